package backend

import (
	"math"
	"slices"
	"testing"
)

// TestRopeAxes: the pairs of a multi-axis rotation go to the axes as
// ggml's mrope cache gives them (ggml_mrope_cache_init), and a vision
// rotation's frequencies start again in each section over half the
// dimensions.
func TestRopeAxes(t *testing.T) {
	axes := func(r Rope) []int {
		var a []int
		for i := range r.Dim / 2 {
			a = append(a, r.Axis(i))
		}
		return a
	}
	m := Rope{Dim: 16, Sections: [4]int{2, 3, 3, 0}, Axes: MRope}
	if got, want := axes(m), []int{0, 0, 1, 1, 1, 2, 2, 2}; !slices.Equal(got, want) {
		t.Errorf("mrope axes %v, want %v", got, want)
	}
	// Qwen3-VL: t h w interleaved for 3·20 pairs, then t where 3·24
	// allows it; pairs 61 and 62 fall to the fourth axis.
	im := Rope{Dim: 128, Sections: [4]int{24, 20, 20, 0}, Axes: IMRope}
	a := axes(im)
	if !slices.Equal(a[:6], []int{0, 1, 2, 0, 1, 2}) || !slices.Equal(a[57:], []int{0, 1, 2, 0, 3, 3, 0}) {
		t.Errorf("imrope axes %v", a)
	}
	v := Rope{Dim: 16, Theta: 10000, Sections: [4]int{4, 4, 4, 4}, Axes: VisionRope}
	if got, want := axes(v), []int{0, 0, 0, 0, 1, 1, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("vision axes %v, want %v", got, want)
	}
	for i := range 8 {
		want := math.Pow(10000, -2*float64(i%4)/8)
		if got := float64(v.Freq(i)); math.Abs(got-want) > 1e-7*want {
			t.Errorf("vision pair %d: frequency %g, want %g", i, got, want)
		}
	}
}
