package gptq

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// problem is a synthetic layer: weights w (rows × cols) and a Hessian
// from correlated, unevenly scaled inputs, like a transformer's (some
// input dimensions an order of magnitude larger than others). Input dead
// is zero on every sample, when >= 0.
func problem(rows, cols, samples, dead int, seed uint64) ([]float32, *Hessian) {
	rng := rand.New(rand.NewPCG(seed, 1))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	mix := make([]float64, cols*cols)
	for i := range mix {
		mix[i] = rng.NormFloat64() / math.Sqrt(float64(cols))
	}
	scale := make([]float64, cols)
	for i := range scale {
		scale[i] = math.Exp(rng.NormFloat64())
	}
	h := NewHessian(cols)
	z := make([]float64, cols)
	x := make([]float32, cols)
	for range samples {
		for i := range z {
			z[i] = rng.NormFloat64()
		}
		for i := range x {
			var s float64
			for j, v := range z {
				s += mix[i*cols+j] * v
			}
			x[i] = float32(scale[i] * (s + 0.3*z[i]))
		}
		if dead >= 0 {
			x[dead] = 0
		}
		h.Add(x)
	}
	return w, h
}

// TestQuantizeBeatsRounding: on the calibration objective, the output
// error, GPTQ does clearly better than the per-group search that rounds
// each weight to its nearest code (its own groups are chosen by the same
// search, so only the error feedback differs).
func TestQuantizeBeatsRounding(t *testing.T) {
	for _, tc := range []struct {
		name             string
		rows, cols, dead int
	}{
		{"whole groups", 48, 96, -1},
		{"short last group", 40, 86, -1},
		{"a dead input", 32, 64, 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, h := problem(tc.rows, tc.cols, 4*tc.cols, tc.dead, 7)
			rtn := OutputError(w, dtype.QuantizeInt4(w, tc.rows, tc.cols), h)
			q, err := Quantize(w, tc.rows, tc.cols, h, Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := OutputError(w, q, h)
			t.Logf("output error: gptq %.4g, nearest codes %.4g (%.2f×)", got, rtn, got/rtn)
			if !(got < 0.8*rtn) {
				t.Errorf("gptq output error %.4g, not 20%% below rounding's %.4g", got, rtn)
			}
			vals := q.Dequantize()
			for i, v := range vals {
				if math.IsNaN(float64(v)) || math.Abs(float64(v-w[i])) > 0.5 {
					t.Fatalf("value %d: %g for weight %g", i, v, w[i])
				}
			}
		})
	}
}

// TestInverseFactor: Uᵀ·U is the inverse of the dampened Hessian.
func TestInverseFactor(t *testing.T) {
	_, h := problem(1, 40, 100, 3, 2)
	u, err := inverseFactor(h, DefaultDamp)
	if err != nil {
		t.Fatal(err)
	}
	n := h.N
	a := h.full()
	var mean float64
	for i := range n {
		if a[i*n+i] == 0 {
			a[i*n+i] = 1
		}
		mean += a[i*n+i] / float64(n)
	}
	for i := range n {
		a[i*n+i] += DefaultDamp * mean
	}
	for i := range n {
		for j := range n {
			if j < i && u[i*n+j] != 0 {
				t.Fatalf("U[%d][%d] = %g below the diagonal", i, j, u[i*n+j])
			}
			var s float64 // (UᵀU·A)[i][j]
			for k := range n {
				var inv float64
				for l := range n {
					inv += u[l*n+i] * u[l*n+k]
				}
				s += inv * a[k*n+j]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(s-want) > 1e-8 {
				t.Fatalf("(UᵀU·H)[%d][%d] = %g, want %g", i, j, s, want)
			}
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	if _, err := Quantize(make([]float32, 64), 1, 64, NewHessian(64), Options{}); err != ErrNoSamples {
		t.Errorf("no samples: %v", err)
	}
	if _, err := Quantize(make([]float32, 64), 2, 32, NewHessian(64), Options{}); err == nil {
		t.Error("a Hessian of the wrong width was accepted")
	}
}
