package dtype

import (
	"math"
	"testing"
)

// Known-value tests for the plain types and the legacy quants. Every block
// is written out byte by byte and every expected value worked out by hand
// from ggml's formula, so a layout mistake (nibble order, bit position,
// field order) shows up as a wrong element.

// Half-precision constants used as block scales.
const (
	h0_25  = 0x3400
	h0_5   = 0x3800
	h1     = 0x3c00
	h2     = 0x4000
	hNeg1  = 0xbc00
	hNeg2  = 0xc000
	hMax   = 0x7bff // 65504, the largest finite half
	hTiny  = 0x0001 // 2^-24, the smallest subnormal half
	hInf   = 0x7c00
	bf1    = 0x3f80
	bfNeg  = 0xc020 // -2.5
	bfInf  = 0x7f80
	bfTiny = 0x0001 // 2^-133, a float32 subnormal
)

func u16(v uint16) []byte { return []byte{byte(v), byte(v >> 8)} }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// fill returns n bytes produced by f(index).
func fill(n int, f func(j int) byte) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = f(j)
	}
	return b
}

func float32s(n int, f func(j int) float32) []float32 {
	v := make([]float32, n)
	for j := range v {
		v[j] = f(j)
	}
	return v
}

func TestDequantizeKnownBlocks(t *testing.T) {
	tests := []struct {
		name string
		typ  Type
		src  []byte
		want []float32
	}{
		{
			name: "F32",
			typ:  F32,
			src:  []byte{0, 0, 0x80, 0x3f, 0, 0, 0x20, 0xc0, 0, 0, 0x80, 0x7f},
			want: []float32{1, -2.5, float32(math.Inf(1))},
		},
		{
			name: "F16",
			typ:  F16,
			src:  cat(u16(h1), u16(hNeg2), u16(hMax), u16(hTiny), u16(hInf)),
			want: []float32{1, -2, 65504, 0x1p-24, float32(math.Inf(1))},
		},
		{
			name: "BF16",
			typ:  BF16,
			src:  cat(u16(bf1), u16(bfNeg), u16(bfInf), u16(bfTiny)),
			want: []float32{1, -2.5, float32(math.Inf(1)), 0x1p-133},
		},
		{
			name: "F64",
			typ:  F64,
			src:  []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x3f, 0, 0, 0, 0, 0, 0, 0x10, 0xc0},
			want: []float32{1.5, -4},
		},
		{
			name: "I8",
			typ:  I8,
			src:  []byte{0x80, 0x7f, 0xff, 0},
			want: []float32{-128, 127, -1, 0},
		},
		{
			name: "I16",
			typ:  I16,
			src:  cat(u16(0x8000), u16(0x7fff), u16(0xffff)),
			want: []float32{-32768, 32767, -1},
		},
		{
			name: "I32",
			typ:  I32,
			src:  []byte{0, 0, 0, 0x80, 0xff, 0xff, 0xff, 0xff},
			want: []float32{-2147483648, -1},
		},
		{
			name: "I64",
			typ:  I64,
			src:  []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
			want: []float32{-2},
		},
		{
			// d=0.5; int8 quants -16..15.
			name: "Q8_0",
			typ:  Q8_0,
			src:  cat(u16(h0_5), fill(32, func(j int) byte { return byte(int8(j - 16)) })),
			want: float32s(32, func(j int) float32 { return float32(j-16) * 0.5 }),
		},
		{
			// d=0.25, s is ignored; quants -128..127 in steps of 8.
			name: "Q8_1",
			typ:  Q8_1,
			src:  cat(u16(h0_25), u16(hMax), fill(32, func(j int) byte { return byte(8*j - 128) })),
			want: float32s(32, func(j int) float32 { return float32(8*j-128) * 0.25 }),
		},
		{
			// d=2; byte j holds j in its low nibble (element j) and 15-j
			// in its high nibble (element j+16); value = (q-8)*d.
			name: "Q4_0",
			typ:  Q4_0,
			src:  cat(u16(h2), fill(16, func(j int) byte { return byte(j | (15-j)<<4) })),
			want: float32s(32, func(j int) float32 {
				if j < 16 {
					return float32(j-8) * 2
				}
				return float32(15-(j-16)-8) * 2
			}),
		},
		{
			// d=0.25, m=-1; value = q*d + m.
			name: "Q4_1",
			typ:  Q4_1,
			src:  cat(u16(h0_25), u16(hNeg1), fill(16, func(j int) byte { return byte(j | (15-j)<<4) })),
			want: float32s(32, func(j int) float32 {
				if j < 16 {
					return float32(j)*0.25 - 1
				}
				return float32(15-(j-16))*0.25 - 1
			}),
		},
		{
			// d=0.5; qh has bits 3 and 20 set, so only elements 3 and 20
			// get the fifth bit. Low nibbles are 1, high nibbles 2.
			name: "Q5_0",
			typ:  Q5_0,
			src:  cat(u16(h0_5), []byte{0x08, 0x00, 0x10, 0x00}, fill(16, func(int) byte { return 0x21 })),
			want: float32s(32, func(j int) float32 {
				switch {
				case j == 3:
					return (17 - 16) * 0.5
				case j == 20:
					return (18 - 16) * 0.5
				case j < 16:
					return (1 - 16) * 0.5
				default:
					return (2 - 16) * 0.5
				}
			}),
		},
		{
			// d=1, m=0.5; qh bit 31 sets the fifth bit of element 31 only.
			name: "Q5_1",
			typ:  Q5_1,
			src:  cat(u16(h1), u16(h0_5), []byte{0, 0, 0, 0x80}, fill(16, func(j int) byte { return byte(j | j<<4) })),
			want: float32s(32, func(j int) float32 {
				if j == 31 {
					return 15 + 16 + 0.5
				}
				return float32(j%16) + 0.5
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make([]float32, len(tt.want))
			if err := Dequantize(tt.typ, tt.src, got); err != nil {
				t.Fatal(err)
			}
			expectBits(t, got, tt.want)
		})
	}
}

// expectBits compares bit patterns, so that -0 and +0 or two NaNs are not
// confused and "bit-exact" means exactly that.
func expectBits(t *testing.T, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			if bad++; bad <= 5 {
				t.Errorf("element %d = %v, want %v", i, got[i], want[i])
			}
		}
	}
	if bad > 5 {
		t.Errorf("... %d mismatched elements in all", bad)
	}
}

func TestHalfConversions(t *testing.T) {
	tests := []struct {
		in   float32
		f16  uint16
		bf16 uint16
	}{
		{1, h1, bf1},
		{-2.5, 0xc100, bfNeg},
		{0, 0, 0},
		{float32(math.Inf(1)), hInf, bfInf},
		// 1 + 2^-11 is halfway between two halves: ties go to even.
		{1 + 0x1p-11, h1, bf1},
		{1 + 0x1p-11 + 0x1p-12, h1 + 1, bf1},
		// 1 + 2^-8 is halfway between two bfloat16s: ties go to even.
		{1 + 0x1p-8, 0x3c04, bf1},
		{1 + 3*0x1p-8, 0x3c0c, bf1 + 2},
		{70000, hInf, 0x4789},
	}
	for _, tt := range tests {
		var b [2]byte
		putF16(b[:], tt.in)
		if got := le.Uint16(b[:]); got != tt.f16 {
			t.Errorf("f16(%v) = %#04x, want %#04x", tt.in, got, tt.f16)
		}
		if got := f32ToBF16(tt.in); got != tt.bf16 {
			t.Errorf("bf16(%v) = %#04x, want %#04x", tt.in, got, tt.bf16)
		}
	}
	if nan := f32ToBF16(float32(math.NaN())); bf16ToF32(nan) == bf16ToF32(nan) {
		t.Errorf("bf16(NaN) = %#04x, not a NaN", nan)
	}
}
