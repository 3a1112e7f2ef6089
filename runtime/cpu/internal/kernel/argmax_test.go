package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// argmaxLoop is the definition Argmax is held to: the plain loop every
// backend's greedy tokens are defined by.
var argmaxLoop = backend.ArgmaxRow

// TestArgmax: Argmax gives the plain loop's index on awkward lengths (the
// vector part, its tail, both), with the largest value in the vector part
// and in the tail, ties (the first wins, −0 beside +0), NaNs first,
// inside and everywhere, infinities, and whole vocabularies.
func TestArgmax(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := math.Float32frombits(0x80000000)
	cases := map[string][]float32{
		"empty":            {},
		"one":              {3},
		"nan first":        {nan, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		"nan inside":       {1, 2, nan, 3, 0, 0, 0, 0, 0, 0, 0},
		"nan beside max":   {0, 0, 0, 0, 0, 0, 0, nan, 9, nan, 0, 0, 0, 0, 0, 0, 0},
		"all nan but one":  {-1, nan, nan, nan, nan, nan, nan, nan, nan, nan},
		"zeros":            {negZero, 0, negZero, 0, 0, 0, 0, 0, 0},
		"plus zero first":  {0, negZero, 0, 0, 0, 0, 0, 0, 0, -1},
		"all -inf":         {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf},
		"-inf then nan":    {-inf, nan, -inf, nan, -inf, nan, -inf, nan, nan},
		"inf in tail":      {1, 2, 3, 4, 5, 6, 7, 8, inf},
		"ties across":      {5, 1, 1, 1, 1, 1, 1, 1, 5, 5},
		"tie in tail only": {1, 1, 1, 1, 1, 1, 1, 1, 7, 7},
		"max in lane 7":    {0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1},
		"smallest normals": {-math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat32, 0, 0, 0, 0, 0, 0},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 25, 63, 64, 65, 1000, 49152, 151936} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 4)
		}
		cases[fmt.Sprint("random ", n)] = x
		tied := make([]float32, n)
		for i := range tied {
			tied[i] = float32(rng.IntN(3))
		}
		cases[fmt.Sprint("three values ", n)] = tied
		late := append([]float32(nil), x...)
		late[n-1] = 100
		cases[fmt.Sprint("last ", n)] = late
		masked := make([]float32, n)
		for i := range masked {
			masked[i] = -inf
		}
		masked[rng.IntN(n)] = -1e30
		cases[fmt.Sprint("masked ", n)] = masked
		for k := range 4 { // NaNs in every lane and chain, the first value a number
			sprinkled := append([]float32(nil), x...)
			for i := 1; i < n; i++ {
				if rng.IntN(4) <= k {
					sprinkled[i] = nan
				}
			}
			cases[fmt.Sprint("nans ", k, " ", n)] = sprinkled
		}
	}
	for name, x := range cases {
		if got, want := Argmax(x), argmaxLoop(x); got != want {
			t.Errorf("%s (%d values): Argmax %d, the loop %d", name, len(x), got, want)
		}
	}
}

func BenchmarkArgmax(b *testing.B) {
	x := make([]float32, 49152)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	b.Run("kernel", func(b *testing.B) {
		for b.Loop() {
			Argmax(x)
		}
	})
	b.Run("loop", func(b *testing.B) {
		for b.Loop() {
			argmaxLoop(x)
		}
	})
}
