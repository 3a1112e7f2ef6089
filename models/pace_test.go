package models

import (
	"errors"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// TestPaceReads: a model collects after every `every` bytes its tensors
// hand out, counting reads through Raw and what is made from it, and not
// failed reads.
func TestPaceReads(t *testing.T) {
	sizes := map[string]int{"a": 60, "b": 60, "c": 30, "d": 100}
	m := &Model{Tensors: map[string]*Tensor{}}
	for name, n := range sizes {
		m.Tensors[name] = NewTensor(name, []int{n / 4}, dtype.F32, func() ([]byte, error) { return make([]byte, n), nil })
	}
	m.Tensors["bad"] = NewTensor("bad", []int{64}, dtype.F32, func() ([]byte, error) { return nil, errors.New("short read") })
	collections := 0
	m.pace(&collector{every: 100, collect: func() { collections++ }})
	for _, step := range []struct {
		name string
		want int
	}{
		{"a", 0},   // 60 pending
		{"bad", 0}, // a failed read counts nothing
		{"b", 1},   // 120: collected
		{"c", 1},   // 30
		{"d", 2},   // 130: collected
		{"a", 2},   // 60
	} {
		tn := m.Tensors[step.name]
		var err error
		if step.name == "a" {
			_, err = tn.Float32() // through Raw
		} else {
			_, err = tn.Raw()
		}
		if (err != nil) != (step.name == "bad") {
			t.Fatalf("read %s: %v", step.name, err)
		}
		if collections != step.want {
			t.Fatalf("after reading %s: %d collections, want %d", step.name, collections, step.want)
		}
	}
}
