package dtype

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestInt4Layout pins the documented bit layout: value 8w+i of a group in
// bits 4i..4i+3 of word w, scale in the low half of the scale word.
func TestInt4Layout(t *testing.T) {
	var q [Int4GroupSize]uint8
	for i := range q {
		q[i] = uint8(i % 16)
	}
	words := make([]uint32, 4)
	PackNibbles(&q, words)
	want := []uint32{0x76543210, 0xfedcba98, 0x76543210, 0xfedcba98}
	for w := range words {
		if words[w] != want[w] {
			t.Errorf("word %d = %#08x, want %#08x", w, words[w], want[w])
		}
	}
	var back [Int4GroupSize]uint8
	UnpackNibbles(words, &back)
	if back != q {
		t.Errorf("unpack: %v, want %v", back, q)
	}
	sm := PackScaleMin(0.5, -2)
	if sm != 0x3800|0xc000<<16 { // f16 0.5 = 0x3800, -2 = 0xc000
		t.Errorf("PackScaleMin(0.5, -2) = %#08x", sm)
	}
	if s, m := UnpackScaleMin(sm); s != 0.5 || m != -2 {
		t.Errorf("UnpackScaleMin = %v, %v", s, m)
	}
	m := NewInt4(2, 40)       // two groups per row, the second short
	m.Codes[4*3+0] = 0xa << 4 // row 1, group 1, word 0, nibble 1: column 33
	m.Scales[3] = PackScaleMin(0.25, 1)
	if c := m.Code(1, 33); c != 10 {
		t.Errorf("Code(1, 33) = %d, want 10", c)
	}
	row := make([]float32, 40)
	m.DequantizeRow(1, row)
	if row[33] != 0.25*10+1 || row[39] != 1 || row[0] != 0 {
		t.Errorf("row 1 = %v", row)
	}
	if m.Groups() != 2 || m.Bytes() != 2*2*20 || Int4Bytes(2, 40) != m.Bytes() {
		t.Errorf("groups %d, bytes %d", m.Groups(), m.Bytes())
	}
}

// randomBlocks returns n blocks of type t with random bytes and the given
// f16 values written over the scale fields by fix.
func randomBlocks(t Type, n int, seed uint64, fix func(blk []byte, r *rand.Rand)) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	bb := t.BlockBytes()
	raw := make([]byte, n*bb)
	for i := range raw {
		raw[i] = byte(r.Uint32())
	}
	for b := range n {
		fix(raw[b*bb:(b+1)*bb], r)
	}
	return raw
}

// randomF16 is a random normal f16 of magnitude in [2^-10, 2^2), keeping
// only bits significant bits of its significand (11 for any).
func randomF16(r *rand.Rand, bits int) float32 {
	v := float32(math.Ldexp(1+r.Float64(), r.IntN(12)-10))
	if r.IntN(2) == 0 {
		v = -v
	}
	m := math.Ldexp(1, bits-1)
	fr, exp := math.Frexp(float64(v))
	v = float32(math.Ldexp(math.Round(fr*2*m)/(2*m), exp))
	return f16(f16bytes(v))
}

func f16bytes(v float32) []byte {
	b := make([]byte, 2)
	putF16(b, v)
	return b
}

// ggmlCodes returns the 4-bit codes of a Q4_0/Q4_1/Q4_K tensor in value
// order, read straight from ggml's layouts.
func ggmlCodes(t Type, raw []byte, n int) []uint8 {
	out := make([]uint8, n)
	switch t {
	case Q4_0, Q4_1:
		bb, off := t.BlockBytes(), 2
		if t == Q4_1 {
			off = 4
		}
		for b := range n / qk {
			qs := raw[b*bb+off : (b+1)*bb]
			for j := range qk / 2 {
				out[b*qk+j], out[b*qk+j+16] = qs[j]&15, qs[j]>>4
			}
		}
	case Q4_K:
		bb := t.BlockBytes()
		for b := range n / qkK {
			qs := raw[b*bb+16 : (b+1)*bb]
			for j := range 4 {
				for l := range 32 {
					out[b*qkK+64*j+l], out[b*qkK+64*j+32+l] = qs[32*j+l]&15, qs[32*j+l]>>4
				}
			}
		}
	}
	return out
}

// checkInt4Against converts raw (rows × cols of type t) and checks that
// the codes are ggml's and the values equal Dequantize's; exact says
// whether values must be equal or only within the f16 rounding of the
// combined Q4_K scales.
func checkInt4Against(t *testing.T, typ Type, raw []byte, rows, cols int, exact bool) {
	t.Helper()
	m, err := Int4FromGGML(typ, raw, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, rows*cols)
	if err := Dequantize(typ, raw, want); err != nil {
		t.Fatal(err)
	}
	codes := ggmlCodes(typ, raw, rows*cols)
	got := m.Dequantize()
	for i := range want {
		r, c := i/cols, i%cols
		if m.Code(r, c) != codes[i] {
			t.Fatalf("value %d: code %d, ggml's %d", i, m.Code(r, c), codes[i])
		}
		if exact {
			if got[i] != want[i] {
				t.Fatalf("value %d: %v, ggml %v", i, got[i], want[i])
			}
			continue
		}
		// Scale and min each move by at most half an f16 ulp (2^-11).
		s, mn := m.ScaleMin(r, c/32)
		bound := (math.Abs(float64(s))*float64(codes[i]) + math.Abs(float64(mn))) * 0x1p-11 * 1.001
		if e := math.Abs(float64(got[i] - want[i])); e > bound {
			t.Fatalf("value %d: %v, ggml %v: error %g > %g", i, got[i], want[i], e, bound)
		}
	}
}

func TestInt4FromQ4_0(t *testing.T) {
	raw := randomBlocks(Q4_0, 64, 1, func(blk []byte, r *rand.Rand) { copy(blk, f16bytes(randomF16(r, 11))) })
	checkInt4Against(t, Q4_0, raw, 4, 16*32, true)
	m, _ := Int4FromGGML(Q4_0, raw, 4, 16*32)
	for g := range 64 { // min = −8d exactly
		s, mn := m.ScaleMin(g/16, g%16)
		if s != f16(raw[g*18:]) || mn != -8*s {
			t.Fatalf("group %d: scale %v min %v, d %v", g, s, mn, f16(raw[g*18:]))
		}
	}
}

func TestInt4FromQ4_1(t *testing.T) {
	raw := randomBlocks(Q4_1, 64, 2, func(blk []byte, r *rand.Rand) {
		copy(blk, f16bytes(randomF16(r, 11)))
		copy(blk[2:], f16bytes(randomF16(r, 11)))
	})
	checkInt4Against(t, Q4_1, raw, 2, 32*32, true)
	m, _ := Int4FromGGML(Q4_1, raw, 2, 32*32)
	for g := range 64 { // d and m bit for bit
		if m.Scales[g] != le.Uint32(raw[g*20:]) {
			t.Fatalf("group %d: %#08x, block starts %#08x", g, m.Scales[g], le.Uint32(raw[g*20:]))
		}
	}
}

// TestInt4ToQ4_1: Int4.Q4_1 is the inverse of Int4FromGGML for Q4_1, in
// both directions, bit for bit; rows that are not whole blocks are refused.
func TestInt4ToQ4_1(t *testing.T) {
	raw := randomBlocks(Q4_1, 24, 3, func(blk []byte, r *rand.Rand) {
		copy(blk, f16bytes(randomF16(r, 11)))
		copy(blk[2:], f16bytes(randomF16(r, 11)))
	})
	m, err := Int4FromGGML(Q4_1, raw, 3, 8*32)
	if err != nil {
		t.Fatal(err)
	}
	back, err := m.Q4_1()
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != string(raw) {
		t.Error("Q4_1 → Int4 → Q4_1 changed the bytes")
	}
	x := make([]float32, 5*64)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	q := QuantizeInt4(x, 5, 64)
	enc, _ := q.Q4_1()
	again, err := Int4FromGGML(Q4_1, enc, 5, 64)
	if err != nil {
		t.Fatal(err)
	}
	for i := range q.Codes {
		if q.Codes[i] != again.Codes[i] {
			t.Fatalf("code word %d: %#x, after Q4_1 %#x", i, q.Codes[i], again.Codes[i])
		}
	}
	for i := range q.Scales {
		if q.Scales[i] != again.Scales[i] {
			t.Fatalf("scale word %d: %#x, after Q4_1 %#x", i, q.Scales[i], again.Scales[i])
		}
	}
	if _, err := QuantizeInt4(x[:3*40], 3, 40).Q4_1(); err == nil {
		t.Error("rows of 40 values encoded as Q4_1")
	}
}

func TestInt4FromQ4_K(t *testing.T) {
	// d and dmin with 5 significant bits: d·sc and dmin·m (6-bit integers)
	// fit f16's 11 bits, so the conversion is exact.
	few := randomBlocks(Q4_K, 16, 3, func(blk []byte, r *rand.Rand) {
		copy(blk, f16bytes(float32(math.Abs(float64(randomF16(r, 5))))/64))
		copy(blk[2:], f16bytes(float32(math.Abs(float64(randomF16(r, 5))))/64))
	})
	t.Run("exact", func(t *testing.T) { checkInt4Against(t, Q4_K, few, 4, 4*256, true) })
	// Full-precision d: codes kept, values within the f16 rounding.
	full := randomBlocks(Q4_K, 16, 4, func(blk []byte, r *rand.Rand) {
		copy(blk, f16bytes(float32(math.Abs(float64(randomF16(r, 11))))/64))
		copy(blk[2:], f16bytes(float32(math.Abs(float64(randomF16(r, 11))))/64))
	})
	t.Run("rounded", func(t *testing.T) { checkInt4Against(t, Q4_K, full, 2, 8*256, false) })
	// Real quantizer output.
	x := gaussian(8*256, 5)
	q, _ := Quantize(Q4_K, x)
	t.Run("quantized", func(t *testing.T) { checkInt4Against(t, Q4_K, q, 8, 256, false) })
}

// TestInt4FromGGMLOverflow: a Q4_0 scale whose −8d overflows f16 is
// requantized from the values instead of turning into infinities.
func TestInt4FromGGMLOverflow(t *testing.T) {
	raw := make([]byte, 18)
	copy(raw, f16bytes(8190)) // −8d = −65520 rounds to −inf in f16
	for j := range 16 {
		raw[2+j] = byte(j | (15-j)<<4)
	}
	m, err := Int4FromGGML(Q4_0, raw, 1, 32)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 32)
	Dequantize(Q4_0, raw, want)
	got := m.Dequantize()
	for i := range got {
		if math.IsInf(float64(got[i]), 0) || math.IsNaN(float64(got[i])) || math.Abs(float64(got[i]-want[i])) > 8190 {
			t.Fatalf("value %d: %v, want about %v", i, got[i], want[i])
		}
	}
}

// TestQuantizeInt4Error: the searched scales beat the plain min/max and
// reach Q4_1's error on Gaussian weights (both use 16 levels per group of
// 32 with an f16 scale and min).
func TestQuantizeInt4Error(t *testing.T) {
	x := gaussian(64*1024, 42)
	start := time.Now()
	m := QuantizeInt4(x, 64, 1024)
	took := time.Since(start)
	got := relRMSE(x, m.Dequantize())
	plain := NewInt4(64, 1024)
	for g := range len(x) / 32 {
		lo, hi := minMax(x[32*g : 32*g+32])
		plain.Scales[g] = PackScaleMin((hi-lo)/15, lo)
		s, mn := UnpackScaleMin(plain.Scales[g])
		var q [32]uint8
		for i, v := range x[32*g : 32*g+32] {
			q[i] = uint8(code((v-mn)*inverse(s), 15))
		}
		PackNibbles(&q, plain.Codes[4*g:4*g+4])
	}
	base := relRMSE(x, plain.Dequantize())
	q41 := relRMSE(x, roundTrip(t, Q4_1, x))
	t.Logf("relative RMSE: int4 %.5f (plain min/max %.5f, Q4_1 %.5f); %.0f ns per value", got, base, q41,
		float64(took.Nanoseconds())/float64(len(x)))
	if got >= base || got > q41 {
		t.Errorf("int4 relative RMSE %.5f: want below plain %.5f and Q4_1 %.5f", got, base, q41)
	}
}

// TestToInt4 covers the load-time paths: floats quantized, rows that are
// not whole groups padded, and a K quant that is not kept exactly.
func TestToInt4(t *testing.T) {
	rows, cols := 3, 172 // 5 groups and 12 values
	x := gaussian(rows*cols, 9)
	for _, typ := range []Type{F32, F16, BF16} {
		raw, err := Quantize(typ, x)
		if err != nil {
			t.Fatal(err)
		}
		m, err := ToInt4(typ, raw, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		if m.Groups() != 6 || len(m.Codes) != rows*6*4 {
			t.Fatalf("%v: %d groups, %d words", typ, m.Groups(), len(m.Codes))
		}
		y := m.Dequantize()
		if len(y) != len(x) {
			t.Fatalf("%v: %d values", typ, len(y))
		}
		if e := relRMSE(x, y); e > 0.1 {
			t.Errorf("%v: relative RMSE %.4f", typ, e)
		}
		for r := range rows { // the padding of the short group is code 0
			for c := cols; c < 192; c++ {
				if m.Code(r, c) != 0 {
					t.Fatalf("%v: padding code (%d, %d) = %d", typ, r, c, m.Code(r, c))
				}
			}
		}
	}
	// Exact types go through Int4FromGGML; Q6_K is requantized.
	x = gaussian(2*256, 10)
	for _, typ := range []Type{Q4_0, Q4_1, Q4_K, Q6_K, Q8_0} {
		raw, _ := Quantize(typ, x)
		m, err := ToInt4(typ, raw, 2, 256)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(x))
		Dequantize(typ, raw, want)
		if e := relRMSE(want, m.Dequantize()); (typ == Q4_0 || typ == Q4_1) && e != 0 || e > 0.1 {
			t.Errorf("%v: relative RMSE against its own values %.5f", typ, e)
		}
	}
	if _, err := Int4FromGGML(Q8_0, make([]byte, 34), 1, 32); err == nil {
		t.Error("Int4FromGGML(Q8_0) did not fail")
	}
}

func BenchmarkQuantizeInt4(b *testing.B) {
	x := gaussian(256*1024, 1)
	b.SetBytes(4 * int64(len(x)))
	for b.Loop() {
		QuantizeInt4(x, 256, 1024)
	}
}
