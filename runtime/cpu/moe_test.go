package cpu_test

import (
	"math"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/runtime/cpu"
)

// TestRoute checks the router's rule on rows worked by hand: the k largest
// logits in order, the lower expert first among equal ones, weights the
// softmax over all E (renormalised over the k when asked), and NaN logits
// chosen only when nothing else is left.
func TestRoute(t *testing.T) {
	nan := float32(math.NaN())
	softmax := func(l []float32) []float64 {
		var sum float64
		p := make([]float64, len(l))
		for i, v := range l {
			p[i] = math.Exp(float64(v))
			sum += p[i]
		}
		for i := range p {
			p[i] /= sum
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		logits []float32
		k      int
		norm   bool
		ids    []int32
	}{
		{"k=1", []float32{0.5, 2, -1}, 1, false, []int32{1}},
		{"k=1 renormalised", []float32{0.5, 2, -1}, 1, true, []int32{1}},
		{"order", []float32{0.1, 3, -2, 1.5, 0.7}, 3, false, []int32{1, 3, 4}},
		{"ties", []float32{1, 2, 2, 1, 2}, 4, true, []int32{1, 2, 4, 0}},
		{"k=E", []float32{-1, 0, 1}, 3, true, []int32{2, 1, 0}},
		{"NaN last", []float32{nan, 1, nan, 0}, 3, false, []int32{1, 3, 0}},
	} {
		ids, w := make([]int32, tc.k), make([]float32, tc.k)
		cpu.Route(ids, w, tc.logits, tc.norm)
		if !slices.Equal(ids, tc.ids) {
			t.Errorf("%s: experts %v, want %v", tc.name, ids, tc.ids)
			continue
		}
		clean := slices.Clone(tc.logits)
		for i, v := range clean {
			if v != v {
				clean[i] = float32(math.Inf(-1))
			}
		}
		p := softmax(clean)
		var total float64
		for _, e := range tc.ids {
			total += p[e]
		}
		for s, e := range tc.ids {
			want := p[e]
			if tc.norm {
				want /= total
			}
			if math.IsNaN(float64(w[s])) && slices.Contains(tc.logits, nan) {
				continue // the softmax of a row with NaNs is NaN
			}
			if math.Abs(float64(w[s])-want) > 1e-6 {
				t.Errorf("%s: weight %d = %g, want %g", tc.name, s, w[s], want)
			}
		}
	}
}
