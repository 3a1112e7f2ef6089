package dtype

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// gaussian returns n normally distributed values with a fixed seed, the
// usual shape of model weights.
func gaussian(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	return float32s(n, func(int) float32 { return float32(r.NormFloat64()) })
}

func roundTrip(t *testing.T, typ Type, x []float32) []float32 {
	t.Helper()
	q, err := Quantize(typ, x)
	if err != nil {
		t.Fatalf("Quantize(%v): %v", typ, err)
	}
	if want, _ := Bytes(typ, int64(len(x))); int64(len(q)) != want {
		t.Fatalf("Quantize(%v) returned %d bytes, want %d", typ, len(q), want)
	}
	y := make([]float32, len(x))
	if err := Dequantize(typ, q, y); err != nil {
		t.Fatalf("Dequantize(%v): %v", typ, err)
	}
	return y
}

// relRMSE is the root-mean-square error relative to the data's RMS.
func relRMSE(x, y []float32) float64 {
	var num, den float64
	for i := range x {
		d := float64(x[i]) - float64(y[i])
		num += d * d
		den += float64(x[i]) * float64(x[i])
	}
	return math.Sqrt(num / den)
}

func TestQuantizeRoundTripError(t *testing.T) {
	// Bounds sit 15-50% above what these quantizers reach on this
	// (seeded, so deterministic) Gaussian data; ggml's own quantizers land
	// in the same range. A broken layout or a poor scale search fails.
	tests := []struct {
		typ   Type
		bound float64 // on the relative RMSE
	}{
		{F32, 0},
		{F16, 0.0004},
		{BF16, 0.003},
		{Q8_0, 0.0065},
		{Q5_0, 0.05},
		{Q5_1, 0.045},
		{Q4_0, 0.1},
		{Q4_1, 0.09},
		{Q4_K, 0.09},
		{Q5_K, 0.045},
		{Q6_K, 0.025},
		{Q2_K, 0.32},
		{Q3_K, 0.18},
		{IQ4_NL, 0.09},
		{IQ4_XS, 0.09},
		{MXFP4, 0.14},
	}
	x := gaussian(64*256, 42)
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			y := roundTrip(t, tt.typ, x)
			got := relRMSE(x, y)
			t.Logf("relative RMSE %.5f", got)
			if got > tt.bound {
				t.Errorf("relative RMSE %.5f exceeds %.5f", got, tt.bound)
			}
		})
	}
}

// TestQuantizeBlockBound checks every element against a bound that follows
// from the format: half a quantization step, where the step is the
// block's range over the number of codes, plus slack for the f16 scales.
func TestQuantizeBlockBound(t *testing.T) {
	tests := []struct {
		typ   Type
		steps float64 // codes across the block's range
		block int     // elements sharing one step
	}{
		{Q8_0, 254, 32},
		{Q5_0, 31, 32},
		{Q5_1, 31, 32},
		{Q4_0, 15, 32},
		{Q4_1, 15, 32},
	}
	x := gaussian(32*256, 7)
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			y := roundTrip(t, tt.typ, x)
			for b := 0; b < len(x); b += tt.block {
				lo, hi := minMax(x[b : b+tt.block])
				span := float64(hi - lo)
				if tt.typ == Q8_0 || tt.typ == Q5_0 || tt.typ == Q4_0 {
					// Symmetric formats span twice the largest magnitude.
					span = 2 * math.Max(math.Abs(float64(lo)), math.Abs(float64(hi)))
				}
				bound := span/tt.steps*0.5*1.01 + 1e-3*span
				if tt.typ == Q4_0 || tt.typ == Q5_0 {
					// The code on the far side of the max is clamped
					// (-8..7, -16..15), costing up to one full step.
					bound = span/tt.steps*1.01 + 1e-3*span
				}
				for i := b; i < b+tt.block; i++ {
					if e := math.Abs(float64(x[i] - y[i])); e > bound {
						t.Fatalf("element %d: %v -> %v, error %g > %g", i, x[i], y[i], e, bound)
					}
				}
			}
		})
	}
}

// TestQuantizeExact feeds values that lie exactly on a format's grid:
// they must come back unchanged.
func TestQuantizeExact(t *testing.T) {
	tests := []struct {
		typ Type
		x   []float32
	}{
		{Q8_0, float32s(32, func(j int) float32 { return float32(j*8-127) / 4 })},
		{Q4_0, float32s(32, func(j int) float32 { return float32(j%16-8) * 0.5 })},
		{Q4_1, float32s(32, func(j int) float32 { return float32(j%16)*0.25 - 3 })},
		{Q5_0, float32s(32, func(j int) float32 { return float32(j - 16) })},
		{Q5_1, float32s(32, func(j int) float32 { return float32(j)*2 + 1 })},
		{F16, []float32{1, -2, 0.5, 65504}},
		{BF16, []float32{1, -2.5, 0x1p100}},
	}
	for _, tt := range tests {
		t.Run(tt.typ.String(), func(t *testing.T) {
			expectBits(t, roundTrip(t, tt.typ, tt.x), tt.x)
		})
	}
}

// TestQuantizeSpecialBlocks covers blocks that break naive scale
// searches: all zeros (scale 0), a constant, one outlier, tiny values in
// the f16 subnormal range, and all-negative or all-positive data (the
// K-quant min has one sign).
func TestQuantizeSpecialBlocks(t *testing.T) {
	blocks := map[string]func(j int) float32{
		"zeros":    func(int) float32 { return 0 },
		"constant": func(int) float32 { return 3.25 },
		"negative": func(j int) float32 { return -1 - float32(j%7) },
		"positive": func(j int) float32 { return 1 + float32(j%5) },
		"outlier": func(j int) float32 {
			if j == 77 {
				return 1000
			}
			return float32(j%3) - 1
		},
		"tiny": func(j int) float32 { return float32(j%9-4) * 1e-6 },
	}
	for _, typ := range []Type{Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS} {
		for name, f := range blocks {
			t.Run(fmt.Sprintf("%v/%s", typ, name), func(t *testing.T) {
				x := float32s(256, f)
				y := roundTrip(t, typ, x)
				_, amax := minMax(float32s(256, func(j int) float32 { return abs32(x[j]) }))
				// Half a 4-bit step of the largest magnitude, the coarsest
				// any of these formats gets, plus f16 error.
				bound := float64(amax)/15 + 1e-3*float64(amax)
				for i := range x {
					e := math.Abs(float64(x[i] - y[i]))
					if name == "tiny" {
						// Scales fall into or below the f16 subnormal
						// range: only "no blow-up" can be promised.
						e = math.Abs(float64(y[i]))
						bound = 2 * float64(amax)
					}
					if math.IsNaN(float64(y[i])) || e > bound {
						t.Fatalf("element %d: %v -> %v (bound %g)", i, x[i], y[i], bound)
					}
				}
				if name == "zeros" {
					for i, v := range y {
						if v != 0 { // -0 is fine: ggml's d = max/-8 is -0 too
							t.Fatalf("element %d = %v, want 0", i, v)
						}
					}
				}
			})
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	tests := []struct {
		name    string
		typ     Type
		n       int
		wantErr string
	}{
		{"unsupported quant", Q8_K, 256, "unsupported"},
		{"unknown type", 4, 32, "unsupported"},
		{"partial block", Q4_0, 33, "whole number"},
		{"partial super-block", Q4_K, 255, "whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Quantize(tt.typ, make([]float32, tt.n))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Quantize = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestQuantizeNonFinite only requires that NaN and infinities neither
// panic nor poison the finite elements of other blocks.
func TestQuantizeNonFinite(t *testing.T) {
	for _, typ := range []Type{Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_NL, IQ4_XS, MXFP4} {
		x := gaussian(512, 3)
		x[1] = float32(math.NaN())
		x[2] = float32(math.Inf(1))
		x[3] = float32(math.Inf(-1))
		y := roundTrip(t, typ, x)
		bound := 0.1
		switch typ {
		case Q2_K, Q3_K, MXFP4: // 2, 3 and E2M1's bits: see TestQuantizeRoundTripError
			bound = 0.5
		}
		if e := relRMSE(x[256:], y[256:]); e > bound {
			t.Errorf("%v: second block relative RMSE %v after a non-finite first block", typ, e)
		}
	}
}

func BenchmarkDequantize(b *testing.B) {
	const n = 1 << 16
	x := gaussian(n, 1)
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K} {
		src, err := Quantize(typ, x)
		if err != nil {
			b.Fatal(err)
		}
		dst := make([]float32, n)
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				if err := Dequantize(typ, src, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkQuantize(b *testing.B) {
	x := gaussian(1<<14, 1)
	for _, typ := range []Type{Q8_0, Q4_0, Q4_K, Q6_K} {
		b.Run(typ.String(), func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				if _, err := Quantize(typ, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestQuantizeRows: a matrix quantized in pieces of rows over the cores
// is Quantize's bytes, for every type (rows of one block, of many, an odd
// count of rows); a done context stops it with its error; rows that are
// not whole blocks, or values that are not whole rows, are refused.
func TestQuantizeRows(t *testing.T) {
	for typ := range quantizers {
		t.Run(typ.String(), func(t *testing.T) {
			block := typ.BlockSize()
			for _, shape := range [][2]int{{1, 1}, {3, 1}, {257, 2}, {1031, 1}, {90, 9}} {
				rows, cols := shape[0], shape[1]*block
				if typ == F32 || typ == F16 || typ == BF16 {
					cols = shape[1] * 7
				}
				x := gaussian(rows*cols, uint64(rows))
				want, err := Quantize(typ, x)
				if err != nil {
					t.Fatal(err)
				}
				got, err := QuantizeRows(context.Background(), typ, x, cols)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%d×%d: QuantizeRows differs from Quantize", rows, cols)
				}
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := QuantizeRows(ctx, IQ4_XS, gaussian(4096*256, 1), 256); !errors.Is(err, context.Canceled) {
		t.Errorf("a done context: %v, want context.Canceled", err)
	}
	if _, err := QuantizeRows(context.Background(), Q4_0, gaussian(96, 1), 48); err == nil {
		t.Error("rows of 48 values took Q4_0 blocks of 32")
	}
	if _, err := QuantizeRows(context.Background(), Q4_0, gaussian(96, 1), 64); err == nil {
		t.Error("96 values took rows of 64")
	}
}
