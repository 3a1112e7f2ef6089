package dtype

import "math"

// Dequantizers for the plain types and ggml's legacy 32-element blocks.
//
// Each follows ggml's reference formula operation by operation. Where a
// formula multiplies and then adds, the product is converted to float32
// explicitly: the Go spec lets the compiler fuse x*y+z into one FMA on some
// architectures, which would round differently from ggml's reference.

func dequantF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(le.Uint32(src[4*i : 4*i+4]))
	}
}

func dequantF16(src []byte, dst []float32) {
	table := f16Table()
	for i := range dst {
		dst[i] = table[le.Uint16(src[2*i:2*i+2])]
	}
}

func dequantBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = bf16ToF32(le.Uint16(src[2*i:]))
	}
}

func dequantF64(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = float32(math.Float64frombits(le.Uint64(src[8*i:])))
	}
}

func dequantI8(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = float32(int8(src[i]))
	}
}

func dequantI16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = float32(int16(le.Uint16(src[2*i:])))
	}
}

func dequantI32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = float32(int32(le.Uint32(src[4*i:])))
	}
}

func dequantI64(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = float32(int64(le.Uint64(src[8*i:])))
	}
}

// dequantQ4_0: f16 d, then 16 bytes whose low nibbles are elements 0..15
// and high nibbles elements 16..31; value = (nibble-8)*d.
func dequantQ4_0(src []byte, dst []float32) {
	const bb = 2 + qk/2
	for b := 0; b < len(dst)/qk; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qk:(b+1)*qk]
		d := f16(blk)
		qs := blk[2:]
		for j := range qk / 2 {
			y[j] = float32(int(qs[j]&0x0f)-8) * d
			y[j+qk/2] = float32(int(qs[j]>>4)-8) * d
		}
	}
}

// dequantQ4_1: f16 d, f16 m, nibbles as in Q4_0; value = nibble*d + m.
func dequantQ4_1(src []byte, dst []float32) {
	const bb = 4 + qk/2
	for b := 0; b < len(dst)/qk; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qk:(b+1)*qk]
		d, m := f16(blk), f16(blk[2:])
		qs := blk[4:]
		for j := range qk / 2 {
			y[j] = float32(float32(qs[j]&0x0f)*d) + m
			y[j+qk/2] = float32(float32(qs[j]>>4)*d) + m
		}
	}
}

// q5High returns the fifth bits of elements j and j+16 from the block's
// 32-bit qh field, already shifted into bit 4.
func q5High(qh uint32, j int) (lo, hi byte) {
	return byte(qh>>j<<4) & 0x10, byte(qh>>(j+12)) & 0x10
}

// dequantQ5_0: f16 d, u32 qh (bit j is the fifth bit of element j), nibbles
// as in Q4_0; value = (q-16)*d.
func dequantQ5_0(src []byte, dst []float32) {
	const bb = 2 + 4 + qk/2
	for b := 0; b < len(dst)/qk; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qk:(b+1)*qk]
		d := f16(blk)
		qh := le.Uint32(blk[2:])
		qs := blk[6:]
		for j := range qk / 2 {
			h0, h1 := q5High(qh, j)
			y[j] = float32(int(qs[j]&0x0f|h0)-16) * d
			y[j+qk/2] = float32(int(qs[j]>>4|h1)-16) * d
		}
	}
}

// dequantQ5_1: f16 d, f16 m, then as Q5_0; value = q*d + m.
func dequantQ5_1(src []byte, dst []float32) {
	const bb = 4 + 4 + qk/2
	for b := 0; b < len(dst)/qk; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qk:(b+1)*qk]
		d, m := f16(blk), f16(blk[2:])
		qh := le.Uint32(blk[4:])
		qs := blk[8:]
		for j := range qk / 2 {
			h0, h1 := q5High(qh, j)
			y[j] = float32(float32(qs[j]&0x0f|h0)*d) + m
			y[j+qk/2] = float32(float32(qs[j]>>4|h1)*d) + m
		}
	}
}

// dequantQ8_0: f16 d, 32 int8; value = q*d.
func dequantQ8_0(src []byte, dst []float32) {
	const bb = 2 + qk
	for b := 0; b < len(dst)/qk; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qk:(b+1)*qk]
		d := f16(blk)
		for j, q := range blk[2:bb] {
			y[j] = float32(int8(q)) * d
		}
	}
}

// dequantQ8_1: f16 d, f16 s (d times the sum of the quants, used only by
// dot products), 32 int8; value = q*d.
func dequantQ8_1(src []byte, dst []float32) {
	const bb = 4 + qk
	for b := 0; b < len(dst)/qk; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qk:(b+1)*qk]
		d := f16(blk)
		for j, q := range blk[4:bb] {
			y[j] = float32(int8(q)) * d
		}
	}
}
