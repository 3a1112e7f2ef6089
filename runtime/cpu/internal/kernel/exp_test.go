package kernel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpShiftMatchesExpf: ExpShift gives Expf's bits on a sweep of every
// 9973rd float32 bit pattern (both signs, NaNs and infinities included),
// on the edges of its range and of the 2^128 case, and on awkward lengths
// with a shift.
func TestExpShiftMatchesExpf(t *testing.T) {
	var xs []float32
	for b := uint64(0); b < 1<<32; b += 9973 {
		xs = append(xs, math.Float32frombits(uint32(b)))
	}
	for _, v := range []float32{0, 88.72283, -87.33654, 88.02969, 88.0297, 88.5, 127, -126, 1e-30} {
		for _, s := range []float32{v, -v, math.Nextafter32(v, 1e9), math.Nextafter32(v, -1e9)} {
			xs = append(xs, s)
		}
	}
	inf := float32(math.Inf(1))
	xs = append(xs, inf, -inf, float32(math.NaN()), math.Float32frombits(0xffc00001), math.Float32frombits(0x80000000))
	check := func(what string, x []float32, m float32) {
		t.Helper()
		got := append([]float32(nil), x...)
		ExpShift(got, m)
		for i, v := range x {
			want := Expf(v - m)
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("%s: Expf(%v - %v) = %v (%#08x), ExpShift gives %v (%#08x)", what, v, m, want, math.Float32bits(want), got[i], math.Float32bits(got[i]))
			}
		}
	}
	check("sweep", xs, 0)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 7, 8, 9, 17, 64, 100} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 30)
		}
		check("random", x, float32(rng.NormFloat64()*10))
	}
}

// TestPrefetch runs the prefetch over lengths below, at and past a line,
// at the end of an array: it must return and change nothing.
func TestPrefetch(t *testing.T) {
	x := make([]float32, 100)
	for i := range x {
		x[i] = float32(i)
	}
	for _, n := range []int{0, 1, 15, 16, 17, 33, 100} {
		Prefetch(x[len(x)-n:])
	}
	for i, v := range x {
		if v != float32(i) {
			t.Fatalf("x[%d] = %v after Prefetch", i, v)
		}
	}
}

// TestScaleMax: ScaleMax's products are the plain loop's, and its maximum
// theirs, on lengths with tails and with the largest value in each lane.
func TestScaleMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{1, 7, 8, 9, 16, 23, 64, 100} {
		for top := 0; top < n; top += 1 + n/9 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			x[top] = 10
			scale := float32(rng.Float64() + 0.1)
			got := append([]float32(nil), x...)
			mx := ScaleMax(got, scale)
			want := float32(math.Inf(-1))
			for i, v := range x {
				if p := v * scale; math.Float32bits(got[i]) != math.Float32bits(p) {
					t.Fatalf("n %d: x[%d]·scale %v, ScaleMax stored %v", n, i, p, got[i])
				}
				want = max(want, v*scale)
			}
			if mx != want {
				t.Fatalf("n %d, largest at %d: ScaleMax returned %v, want %v", n, top, mx, want)
			}
		}
	}
	if mx := ScaleMax(nil, 2); !math.IsInf(float64(mx), -1) {
		t.Errorf("ScaleMax of nothing: %v", mx)
	}
}
