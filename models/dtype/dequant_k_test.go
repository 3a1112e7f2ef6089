package dtype

import (
	"math"
	"testing"
)

// Known-value tests for the K quants. The blocks are built element by
// element from the layout as ggml documents it (which byte and which bits
// hold element i), deliberately not by the loop structure the decoders
// use, and the expected values follow ggml's formulas operation by
// operation: the K-quant decoders must agree bit for bit.

// Scales and mins for the eight Q4_K/Q5_K sub-blocks: small values, and 63
// in the last one to exercise the top two bits of the 6-bit fields.
var (
	k4Scales = [8]byte{1, 2, 3, 4, 5, 6, 7, 63}
	k4Mins   = [8]byte{0, 1, 2, 3, 4, 5, 6, 63}
)

// k4ScaleBytes is k4Scales and k4Mins packed by hand: bytes 0..3 are the
// scales of sub-blocks 0..3 with the top bits of scales 4..7 in bits 6..7,
// bytes 4..7 the same for mins, bytes 8..11 the low nibbles of scale
// (low) and min (high) of sub-blocks 4..7.
var k4ScaleBytes = []byte{
	0x01, 0x02, 0x03, 0xc4, // 63>>4 = 3 in the top bits of byte 3
	0x00, 0x01, 0x02, 0xc3,
	0x45, 0x56, 0x67, 0xff,
}

// k4Code is the 4-bit code given to element i of a Q4_K/Q5_K test block:
// a different pattern in every sub-block.
func k4Code(i int) byte {
	if s := i / 32; s%2 == 0 {
		return byte(i % 16)
	}
	return byte(15 - i%16)
}

// setNibble4K stores a 4-bit code for element i of a K-quant qs array:
// sub-block s lives in the 32 bytes 32*(s/2).., low nibble for even s.
func setNibble4K(qs []byte, i int, q byte) {
	s := i / 32
	qs[32*(s/2)+i%32] |= q << (4 * (s % 2))
}

func TestDequantizeQ4K(t *testing.T) {
	blk := make([]byte, 144)
	copy(blk, u16(h0_5))        // d
	copy(blk[2:], u16(h0_25))   // dmin
	copy(blk[4:], k4ScaleBytes) // scales
	for i := range 256 {
		setNibble4K(blk[16:], i, k4Code(i))
	}
	want := make([]float32, 256)
	for i := range want {
		s := i / 32
		d1 := float32(0.5) * float32(k4Scales[s])
		m1 := float32(0.25) * float32(k4Mins[s])
		want[i] = float32(d1*float32(k4Code(i))) - m1
	}
	// A few values worked out on paper, as a check on the loop above.
	spot := map[int]float32{
		0:   0,                   // 0.5*1*0 - 0
		1:   0.5,                 // 0.5*1*1 - 0
		32:  14.75,               // 0.5*2*15 - 0.25*1
		224: 0.5*63*15 - 0.25*63, // 456.75
		255: -15.75,              // 0.5*63*0 - 0.25*63
	}
	for i, v := range spot {
		if want[i] != v {
			t.Fatalf("test table: element %d = %v, worked out %v", i, want[i], v)
		}
	}
	got := make([]float32, 256)
	if err := Dequantize(Q4_K, blk, got); err != nil {
		t.Fatal(err)
	}
	expectBits(t, got, want)
}

func TestDequantizeQ5K(t *testing.T) {
	blk := make([]byte, 176)
	copy(blk, u16(h0_5))
	copy(blk[2:], u16(h0_25))
	copy(blk[4:], k4ScaleBytes)
	qh, qs := blk[16:48], blk[48:]
	// The fifth bit of element i is bit s (its sub-block) of qh[i%32].
	// Set it for every third element.
	code := func(i int) byte {
		c := k4Code(i)
		if i%3 == 0 {
			c |= 16
		}
		return c
	}
	for i := range 256 {
		setNibble4K(qs, i, code(i)&15)
		qh[i%32] |= code(i) >> 4 << (i / 32)
	}
	want := make([]float32, 256)
	for i := range want {
		s := i / 32
		d1 := float32(0.5) * float32(k4Scales[s])
		m1 := float32(0.25) * float32(k4Mins[s])
		want[i] = float32(d1*float32(code(i))) - m1
	}
	if want[255] != 0.5*63*(0+16)-0.25*63 { // 255 % 3 == 0
		t.Fatalf("test table: element 255 = %v", want[255])
	}
	got := make([]float32, 256)
	if err := Dequantize(Q5_K, blk, got); err != nil {
		t.Fatal(err)
	}
	expectBits(t, got, want)
}

// q6Scales mixes signs and includes both int8 extremes.
var q6Scales = [16]int8{1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 7, -7, 127, -128}

func TestDequantizeQ6K(t *testing.T) {
	blk := make([]byte, 210)
	ql, qh, sc := blk[:128], blk[128:192], blk[192:208]
	copy(blk[208:], u16(h0_5))
	for j, s := range q6Scales {
		sc[j] = byte(s)
	}
	code := func(i int) byte { return byte((i * 7) % 64) }
	// Element i: half n = i/128; within it quarter k = (i%128)/32 and
	// lane l = i%32. Its low 4 bits are nibble k/2 of ql[64n + 32(k%2) + l],
	// its high 2 bits are bits 2k..2k+1 of qh[32n + l].
	for i := range 256 {
		n, k, l := i/128, i%128/32, i%32
		c := code(i)
		ql[64*n+32*(k%2)+l] |= (c & 15) << (4 * (k / 2))
		qh[32*n+l] |= c >> 4 << (2 * k)
	}
	want := make([]float32, 256)
	for i := range want {
		want[i] = float32(0.5) * float32(q6Scales[i/16]) * float32(int(code(i))-32)
	}
	// Element 233 is in sub-block 14 (scale 127) with code 233*7%64 = 31.
	if want[233] != 0.5*127*(31-32) {
		t.Fatalf("test table: element 233 = %v", want[233])
	}
	got := make([]float32, 256)
	if err := Dequantize(Q6_K, blk, got); err != nil {
		t.Fatal(err)
	}
	expectBits(t, got, want)
}

func TestDequantizeQ2K(t *testing.T) {
	blk := make([]byte, 84)
	scales, qs := blk[:16], blk[16:80]
	copy(blk[80:], u16(h0_5))  // d
	copy(blk[82:], u16(h0_25)) // dmin
	// Sub-block j of 16 elements: scale j%16 in the low nibble, min
	// 15-j in the high nibble.
	for j := range 16 {
		scales[j] = byte(j) | byte(15-j)<<4
	}
	code := func(i int) byte { return byte(i*5) % 4 }
	// Element i: half n = i/128, group g = (i%128)/32 (bits 2g..2g+1),
	// lane l = i%32: byte qs[32n + l].
	for i := range 256 {
		n, g, l := i/128, i%128/32, i%32
		qs[32*n+l] |= code(i) << (2 * g)
	}
	want := make([]float32, 256)
	for i := range want {
		j := i / 16
		dl := float32(0.5) * float32(j)
		ml := float32(0.25) * float32(15-j)
		want[i] = float32(dl*float32(code(i))) - ml
	}
	got := make([]float32, 256)
	if err := Dequantize(Q2_K, blk, got); err != nil {
		t.Fatal(err)
	}
	expectBits(t, got, want)
}

func TestDequantizeQ3K(t *testing.T) {
	blk := make([]byte, 110)
	hmask, qs, scales := blk[:32], blk[32:96], blk[96:108]
	copy(blk[108:], u16(h0_5))
	// 6-bit scale j (stored +32): low nibble is nibble j/8 of byte j%8,
	// top two bits are bits 2(j/4)..+1 of byte 8 + j%4.
	stored := func(j int) byte { return byte(j*4 + 1) } // 1, 5, ..., 61
	for j := range 16 {
		scales[j%8] |= (stored(j) & 15) << (4 * (j / 8))
		scales[8+j%4] |= stored(j) >> 4 << (2 * (j / 4))
	}
	// A 3-bit code: low 2 bits in qs like Q2_K, the third bit in
	// hmask[i%32] at bit 4n + g.
	code := func(i int) byte { return byte(i*3) % 8 }
	for i := range 256 {
		n, g, l := i/128, i%128/32, i%32
		qs[32*n+l] |= code(i) & 3 << (2 * g)
		hmask[l] |= code(i) >> 2 << (4*n + g)
	}
	want := make([]float32, 256)
	for i := range want {
		dl := float32(0.5) * float32(int(stored(i/16))-32)
		want[i] = dl * float32(int(code(i))-4)
	}
	got := make([]float32, 256)
	if err := Dequantize(Q3_K, blk, got); err != nil {
		t.Fatal(err)
	}
	expectBits(t, got, want)
}

func TestDequantizeQ8K(t *testing.T) {
	blk := make([]byte, 292)
	le.PutUint32(blk, math.Float32bits(0.125))
	for i := range 256 {
		blk[4+i] = byte(int8(i - 128))
	}
	want := float32s(256, func(i int) float32 { return 0.125 * float32(i-128) })
	got := make([]float32, 256)
	if err := Dequantize(Q8_K, blk, got); err != nil {
		t.Fatal(err)
	}
	expectBits(t, got, want)
}

// TestDequantizeMultipleBlocks checks that block b reads its own bytes:
// two Q4_K blocks whose d differs must decode to values that differ by
// exactly that factor.
func TestDequantizeMultipleBlocks(t *testing.T) {
	one := make([]byte, 144)
	copy(one[4:], k4ScaleBytes)
	for i := range 256 {
		setNibble4K(one[16:], i, k4Code(i))
	}
	two := append([]byte(nil), one...)
	copy(one, u16(h1))
	copy(two, u16(h2))
	got := make([]float32, 512)
	if err := Dequantize(Q4_K, cat(one, two), got); err != nil {
		t.Fatal(err)
	}
	for i := range 256 {
		if got[256+i] != 2*got[i] {
			t.Fatalf("element %d: second block %v, first %v", i, got[256+i], got[i])
		}
	}
}
