package dtype

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestInt8Layout pins the documented bit layout: value 4w+i of a group in
// bits 8i..8i+7 of word w, a short last group padded, 20 bytes a group.
func TestInt8Layout(t *testing.T) {
	var q [Int8GroupSize]uint8
	for i := range q {
		q[i] = uint8(16*i + 1)
	}
	words := make([]uint32, 4)
	PackBytes(&q, words)
	if words[0] != 0x31211101 || words[3] != 0xf1e1d1c1 {
		t.Errorf("words %#08x", words)
	}
	m := NewInt8(2, 20)        // two groups per row, the second short
	m.Codes[4*3+0] = 0xc8 << 8 // row 1, group 1, word 0, byte 1: column 17
	m.Scales[3] = PackScaleMin(0.25, -1)
	if c := m.Code(1, 17); c != 200 {
		t.Errorf("Code(1, 17) = %d, want 200", c)
	}
	row := make([]float32, 20)
	m.DequantizeRow(1, row)
	if row[17] != 0.25*200-1 || row[19] != -1 || row[0] != 0 {
		t.Errorf("row 1 = %v", row)
	}
	if m.Groups() != 2 || m.Bytes() != 2*2*20 || Int8Bytes(2, 20) != m.Bytes() {
		t.Errorf("groups %d, bytes %d", m.Groups(), m.Bytes())
	}
}

// TestInt8FromGGML converts random blocks of every type Int8 keeps and
// checks each value against ggml's (Dequantize): identical for Q8_0, Q5_0
// and Q5_1; for Q5_K within the f16 rounding of the combined scale and
// min (half an ulp, 2^-11 relative, each); for Q6_K within the rounding
// of the combined scale times |q−32| plus ggml's own f32 rounding. Codes
// stay within the source's width (a code re-rounded would break the bound
// by a whole step). Scales include tiny ones whose products are subnormal
// halves.
func TestInt8FromGGML(t *testing.T) {
	for _, tc := range []struct {
		typ   Type
		exact bool
		width int // code bits
		fix   func(blk []byte, r *rand.Rand, tiny bool)
	}{
		{Q8_0, true, 8, func(b []byte, r *rand.Rand, tiny bool) { copy(b, f16bytes(scaleF16(r, tiny))) }},
		{Q5_0, true, 5, func(b []byte, r *rand.Rand, tiny bool) { copy(b, f16bytes(scaleF16(r, tiny))) }},
		{Q5_1, true, 5, func(b []byte, r *rand.Rand, tiny bool) {
			copy(b, f16bytes(scaleF16(r, tiny)))
			copy(b[2:], f16bytes(scaleF16(r, tiny)))
		}},
		{Q5_K, false, 5, func(b []byte, r *rand.Rand, tiny bool) {
			copy(b, f16bytes(scaleF16(r, tiny)))
			copy(b[2:], f16bytes(scaleF16(r, tiny)))
		}},
		{Q6_K, false, 6, func(b []byte, r *rand.Rand, tiny bool) { copy(b[208:], f16bytes(scaleF16(r, tiny))) }},
	} {
		for _, tiny := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/tiny=%v", tc.typ, tiny), func(t *testing.T) {
				rows, cols := 3, 2*tc.typ.BlockSize()
				if tc.typ.BlockSize() == qk {
					cols = 5 * qk
				}
				raw := randomBlocks(tc.typ, rows*cols/tc.typ.BlockSize(), uint64(tc.typ), func(b []byte, r *rand.Rand) { tc.fix(b, r, tiny) })
				m, err := ToInt8(tc.typ, raw, rows, cols)
				if err != nil {
					t.Fatal(err)
				}
				want := make([]float32, rows*cols)
				if err := Dequantize(tc.typ, raw, want); err != nil {
					t.Fatal(err)
				}
				got := m.Dequantize()
				for i := range want {
					r, c := i/cols, i%cols
					code := m.Code(r, c)
					if int(code) >= 1<<tc.width {
						t.Fatalf("value %d: code %d wider than %d bits", i, code, tc.width)
					}
					if tc.exact {
						if got[i] != want[i] {
							t.Fatalf("value %d: %v, ggml %v", i, got[i], want[i])
						}
						continue
					}
					s, mn := m.ScaleMin(r, c/Int8GroupSize)
					var bound float64
					if tc.typ == Q5_K {
						bound = (math.Abs(float64(s))*float64(code)+math.Abs(float64(mn)))*0x1p-11*1.001 + 0x1p-24*float64(code)
					} else {
						bound = (math.Abs(float64(s))*0x1p-11+0x1p-25)*math.Abs(float64(code)-32) + math.Abs(float64(want[i]))*0x1p-24
					}
					if e := math.Abs(float64(got[i] - want[i])); e > bound {
						t.Fatalf("value %d (code %d, scale %v): %v, ggml %v: error %g > %g", i, code, s, got[i], want[i], e, bound)
					}
				}
			})
		}
	}
}

// scaleF16 is a random f16 scale: of magnitude 2^-10..2^2, or with tiny a
// normal half so small (2^-14..2^-12) that its products with codes fall
// among the subnormals.
func scaleF16(r *rand.Rand, tiny bool) float32 {
	if tiny {
		return float32(math.Ldexp(1+r.Float64(), -14+r.IntN(2)))
	}
	return randomF16(r, 11)
}

// TestInt8Overflow: a Q8_0 block whose min −128d does not fit f16 is
// requantized, not wrapped to infinity.
func TestInt8Overflow(t *testing.T) {
	raw := randomBlocks(Q8_0, 1, 7, func(b []byte, r *rand.Rand) {
		copy(b, f16bytes(600))
		for i := range qk { // values within ±60000, which f16 holds
			b[2+i] = byte(int8(r.IntN(201) - 100))
		}
	})
	m, err := Int8FromGGML(Q8_0, raw, 1, qk)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, qk)
	_ = Dequantize(Q8_0, raw, want)
	for i, v := range m.Dequantize() {
		if math.IsInf(float64(v), 0) || math.Abs(float64(v-want[i])) > 600*200/255.0/2+64 {
			t.Fatalf("value %d: %v, ggml %v", i, v, want[i])
		}
	}
	if _, err := Int8FromGGML(Q4_0, nil, 1, 32); err == nil {
		t.Error("Q4_0 to int8 accepted")
	}
	if _, err := Int8FromGGML(Q8_0, raw[:10], 1, 32); err == nil {
		t.Error("short data accepted")
	}
}

// TestQuantizeInt8 bounds the error of float weights quantized to int8 on
// awkward widths: half a step (scale/2) plus the f16 rounding of the min,
// with constant and all-zero groups exact.
func TestQuantizeInt8(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, cols := range []int{1, 15, 16, 17, 100, 256} {
		rows := 3
		x := make([]float32, rows*cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		for i := range cols { // row 1 constant, row 2 zero
			x[cols+i], x[2*cols+i] = 0.3, 0
		}
		m := QuantizeInt8(x, rows, cols)
		got := m.Dequantize()
		for i, v := range x {
			s, mn := m.ScaleMin(i/cols, i%cols/Int8GroupSize)
			bound := float64(s)/2*1.0001 + math.Abs(float64(mn))*0x1p-11
			if i >= cols {
				bound = math.Abs(float64(v)) * 0x1p-11
			}
			if e := math.Abs(float64(got[i] - v)); e > bound {
				t.Fatalf("cols %d value %d: %v for %v, error %g > %g", cols, i, got[i], v, e, bound)
			}
		}
	}
}
