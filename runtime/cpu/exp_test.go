package cpu

import (
	"math"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// TestExpf holds expf within 1 ulp of the correctly rounded e^x over the
// whole float32 range where e^x is a normal number, stepping through every
// 97th float32 (about 22 million values), and checks the edges.
func TestExpf(t *testing.T) {
	ulps := func(got float32, want float64) float64 {
		w := float32(want)
		ulp := float64(math.Nextafter32(w, float32(math.Inf(1))) - w)
		return math.Abs(float64(got)-want) / ulp
	}
	worst, at := 0.0, float32(0)
	for _, sign := range []uint32{0, 1 << 31} {
		for b := uint32(0); b < 0x7f800000; b += 97 {
			x := math.Float32frombits(b | sign)
			if x > 88.72283 || x < -87.33654 {
				continue
			}
			if u := ulps(expf(x), math.Exp(float64(x))); u > worst {
				worst, at = u, x
			}
		}
	}
	if worst > 1 {
		t.Errorf("expf(%v) is %.2f ulp from e^x", at, worst)
	}
	t.Logf("worst %.2f ulp, at %v", worst, at)
	for _, c := range []struct{ x, want float32 }{
		{0, 1}, {float32(math.Inf(-1)), 0}, {-100, 0}, {float32(math.Inf(1)), float32(math.Inf(1))}, {89, float32(math.Inf(1))},
	} {
		if got := expf(c.x); got != c.want {
			t.Errorf("expf(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if nan := float32(math.NaN()); !math.IsNaN(float64(expf(nan))) {
		t.Errorf("expf(NaN) = %v", expf(nan))
	}
}

// TestGLUMatchesAct: GLU, whose SiLU takes its exps eight at a time, gives
// Act(x)·u to the bit for each activation, on a length with a tail and
// values from zero to far past exp's range.
func TestGLUMatchesAct(t *testing.T) {
	const rows, cols = 3, 13
	g, u := make([]float32, rows*cols), make([]float32, rows*cols)
	for i := range g {
		g[i] = float32(i-20) * float32(i%7) * 0.37
		u[i] = float32(i%5) - 1.5
	}
	g[0], g[1], g[2] = 0, float32(math.Copysign(0, -1)), -100
	for _, act := range []models.Activation{models.SiLU, models.GELUTanh, models.GELUQuick} {
		b := New(1)
		if err := b.Begin(backend.Batch{Tokens: make([]int32, rows), Pos: make([]int32, rows), Seq: make([]int32, rows), BlockSize: 1, Tables: [][]int32{{0}}}); err != nil {
			t.Fatal(err)
		}
		gt := NewTensor(rows, cols, append([]float32(nil), g...))
		b.GLU(gt, NewTensor(rows, cols, u), act)
		for i, x := range g {
			if want := Act(act, x) * u[i]; math.Float32bits(gt.Data[i]) != math.Float32bits(want) {
				t.Fatalf("activation %v: GLU(%v, %v) = %v, Act gives %v", act, x, u[i], gt.Data[i], want)
			}
		}
	}
}

// TestActGELUQuick: the gate's quick GELU (Gemma 4's vision tower) is
// Activate's, x·σ(1.702x), not SiLU's, which a missing case would give.
func TestActGELUQuick(t *testing.T) {
	for _, x := range []float32{-9, -1.5, -0.25, 0, 0.3, 1, 2.5, 12} {
		got := Act(models.GELUQuick, x)
		if want := Activation(models.GELUQuick, x); math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("Act(GELUQuick, %v) = %v, Activation gives %v", x, got, want)
		}
		if x != 0 && got == Silu(x) {
			t.Errorf("Act(GELUQuick, %v) = %v, SiLU's", x, got)
		}
	}
}
