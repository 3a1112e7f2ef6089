package shaders_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/shaders"
)

// half rounds v to the nearest IEEE half (ties to even), as f16() does.
func half(v float64) float64 { return float64(dtype.HalfValue(dtype.HalfBits(float32(v)))) }

// TestF16GEMVTolerance states matmul_f16_gemv's f16 error against its f32
// twin where no device can run it (the f16 kernels need shader-f16 and a
// compiler that takes f16 code: none here): it emulates the f16 variant's
// arithmetic on the CPU (x rounded to a half, each product and each sum of
// the dot of four rounded to a half, the dots added in f32) over f16
// weights like a model's and inputs with outliers, and checks the error
// stays within shaders.F16GEMVTolerance of Σ|x·w|, the bound the device
// twin test (runtime/gpu TestF16Twins) holds the kernel to.
func TestF16GEMVTolerance(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 9))
	worst := 0.0
	for _, k := range []int{64, 576, 2048, 8192} {
		for range 200 {
			var exact, mag float64
			var acc float32
			for i := 0; i < k; i += 4 {
				var dot float64
				for c := range 4 {
					w := half(rng.NormFloat64() * 0.05)
					x := rng.NormFloat64() * 3
					if rng.IntN(200) == 0 {
						x *= 300 // a residual stream's outliers
					}
					exact += w * x
					mag += math.Abs(w * x)
					p := half(w * half(x))
					if c == 0 {
						dot = p
					} else {
						dot = half(dot + p)
					}
				}
				acc += float32(dot)
			}
			worst = max(worst, math.Abs(float64(acc)-exact)/mag)
		}
	}
	t.Logf("worst |f16 - exact| / Σ|x·w| = %.3g (tolerance %.3g)", worst, shaders.F16GEMVTolerance)
	if worst > shaders.F16GEMVTolerance {
		t.Errorf("the f16 GEMV's emulated error %.3g exceeds F16GEMVTolerance %.3g", worst, shaders.F16GEMVTolerance)
	}
}
