package models_test

import (
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models"
)

// TestRopePermutation: in the pairs layout, rows 2j and 2j+1 of a head are
// rows j and j + d/2 of the halves layout, whole rows moving together, and
// the two functions undo each other.
func TestRopePermutation(t *testing.T) {
	// Two heads of 4 rows of 2 columns: value 10·row + column.
	var halves []float32
	for r := range 8 {
		halves = append(halves, float32(10*r), float32(10*r+1))
	}
	pairs := models.PairsFromHalves(halves, 2, 4)
	want := []float32{0, 1, 20, 21, 10, 11, 30, 31, 40, 41, 60, 61, 50, 51, 70, 71}
	if !slices.Equal(pairs, want) {
		t.Errorf("PairsFromHalves: %v, want %v", pairs, want)
	}
	if back := models.HalvesFromPairs(pairs, 2, 4); !slices.Equal(back, halves) {
		t.Errorf("HalvesFromPairs undoes it as %v, want %v", back, halves)
	}
}
