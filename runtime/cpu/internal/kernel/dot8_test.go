package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// TestDotQ8 checks DotQ8 against the float64 dot product of the
// dequantized weights on widths that are not whole groups (1, 15, 17, 100)
// and long ones; the bound is that of an f32 sum of k terms, 4e-7·k
// relative to Σ|w·x|.
func TestDotQ8(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, k := range []int{1, 15, 16, 17, 100, 4096} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			w := make([]float32, 3*k)
			for i := range w {
				w[i] = float32(r.NormFloat64())
			}
			m := dtype.QuantizeInt8(w, 3, k)
			vals := m.Dequantize()
			x := make([]float32, k)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			sums := make([]float32, m.Groups())
			GroupSums8(x, sums)
			G := m.Groups()
			for j := range 3 {
				got := DotQ8(m.Codes[4*j*G:4*(j+1)*G], m.Scales[j*G:(j+1)*G], x, sums)
				var want, mag float64
				for i, xv := range x {
					p := float64(vals[j*k+i]) * float64(xv)
					want += p
					mag += math.Abs(p)
				}
				// The min term meets a sum of x: its rounding scales with |m|·Σ|x|.
				var msum float64
				for g := range G {
					_, mn := m.ScaleMin(j, g)
					for _, xv := range x[g*16 : min(k, (g+1)*16)] {
						msum += math.Abs(float64(mn) * float64(xv))
					}
				}
				if e := math.Abs(float64(got) - want); e > 4e-7*float64(k+8)*(mag+msum) {
					t.Errorf("row %d: %v, want %v (error %g)", j, got, want, e)
				}
			}
		})
	}
}

// TestDotQ8Twin: the AVX2 kernel gives dotQ8Go's bits, on widths with and
// without a short last group, subnormal scales and zero rows included.
func TestDotQ8Twin(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, k := range []int{1, 16, 17, 31, 48, 100, 576, 2048} {
		w := make([]float32, 4*k)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		for i := range w[k : 2*k] { // row 1: tiny, subnormal halves
			w[k+i] *= 1e-6
		}
		clear(w[2*k : 3*k]) // row 2: zero
		m := dtype.QuantizeInt8(w, 4, k)
		x := make([]float32, k)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		sums := make([]float32, m.Groups())
		GroupSums8(x, sums)
		G := m.Groups()
		for j := range 4 {
			c, s := m.Codes[4*j*G:4*(j+1)*G], m.Scales[j*G:(j+1)*G]
			if got, want := DotQ8(c, s, x, sums), dotQ8Go(c, s, x, sums); math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("k %d row %d: %v (%s), twin %v", k, j, got, Path(), want)
			}
		}
	}
}
