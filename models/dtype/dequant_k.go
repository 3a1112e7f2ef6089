package dtype

import "math"

// Dequantizers for ggml's K quants: 256-element super-blocks split into
// sub-blocks whose scales (and mins) are themselves quantized against one
// or two f16 super-block scales. As in dequant.go, products that are then
// added to are converted to float32 explicitly to rule out FMA fusion.

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j (0..7) from the
// 12-byte scales field of Q4_K and Q5_K. Bytes 0..3 hold the scales of
// sub-blocks 0..3 and bytes 4..7 their mins, in the low 6 bits; sub-blocks
// 4..7 keep their low 4 bits in bytes 8..11 (scale low nibble, min high
// nibble) and their top 2 bits in the spare top bits of bytes 0..7.
func scaleMinK4(j int, s []byte) (sc, m byte) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0x0f | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

// dequantQ2K: scales[16] (low nibble scale, high nibble min, per 16
// elements), qs[64] (2-bit quants), f16 d, f16 dmin.
func dequantQ2K(src []byte, dst []float32) {
	const bb = qkK/16 + qkK/4 + 4
	for b := 0; b < len(dst)/qkK; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qkK:(b+1)*qkK]
		scales, qs := blk[:16], blk[16:80]
		d, dmin := f16(blk[80:]), f16(blk[82:])
		is := 0
		for n := 0; n < qkK; n += 128 {
			q := qs[n/4 : n/4+32]
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					sc := scales[is]
					is++
					dl := d * float32(sc&0x0f)
					ml := float32(dmin * float32(sc>>4))
					for l := range 16 {
						v := q[l+16*half] >> shift & 3
						y[0] = float32(dl*float32(v)) - ml
						y = y[1:]
					}
				}
			}
		}
	}
}

// Q3KScales unpacks the 12 bytes of Q3_K's sixteen 6-bit scales, less
// their offset of 32: the low nibbles of scales 0..7 and 8..15 are the
// low and high nibbles of bytes 0..7, and the top 2 bits of scale j are
// bits 2*(j/4)..+1 of byte 8+j%4.
func Q3KScales(s []byte) [16]int8 {
	var out [16]int8
	for j := range 16 {
		lo := s[j%8] >> (4 * (j / 8)) & 0x0f
		hi := s[8+j%4] >> (2 * (j / 4)) & 3
		out[j] = int8(lo|hi<<4) - 32
	}
	return out
}

// dequantQ3K: hmask[32] (third bits), qs[64] (low 2 bits), scales[12]
// (6-bit, offset by 32), f16 d. A clear hmask bit subtracts 4.
func dequantQ3K(src []byte, dst []float32) {
	const bb = qkK/8 + qkK/4 + 12 + 2
	for b := 0; b < len(dst)/qkK; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qkK:(b+1)*qkK]
		hmask, qs := blk[:32], blk[32:96]
		scales := Q3KScales(blk[96:108])
		d := f16(blk[108:])
		is := 0
		m := byte(1)
		for n := 0; n < qkK; n += 128 {
			q := qs[n/4 : n/4+32]
			for shift := 0; shift < 8; shift += 2 {
				for half := 0; half < 2; half++ {
					dl := d * float32(scales[is])
					is++
					for l := range 16 {
						i := l + 16*half
						v := int(q[i] >> shift & 3)
						if hmask[i]&m == 0 {
							v -= 4
						}
						y[0] = dl * float32(v)
						y = y[1:]
					}
				}
				m <<= 1
			}
		}
	}
}

// dequantQ4K: f16 d, f16 dmin, scales[12] (see scaleMinK4), qs[128]. Each
// 32 bytes of qs hold two sub-blocks: low nibbles first, then high.
func dequantQ4K(src []byte, dst []float32) {
	const bb = 4 + 12 + qkK/2
	for b := 0; b < len(dst)/qkK; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qkK:(b+1)*qkK]
		d, dmin := f16(blk), f16(blk[2:])
		scales, qs := blk[4:16], blk[16:bb]
		for j := range 4 {
			q := qs[32*j : 32*j+32]
			sc1, m1 := scaleMinK4(2*j, scales)
			sc2, m2 := scaleMinK4(2*j+1, scales)
			d1, min1 := d*float32(sc1), float32(dmin*float32(m1))
			d2, min2 := d*float32(sc2), float32(dmin*float32(m2))
			out := y[64*j : 64*j+64]
			for l := range 32 {
				out[l] = float32(d1*float32(q[l]&0x0f)) - min1
				out[l+32] = float32(d2*float32(q[l]>>4)) - min2
			}
		}
	}
}

// dequantQ5K: f16 d, f16 dmin, scales[12], qh[32], qs[128]. Like Q4_K with
// a fifth bit per element: sub-block s takes bit s of qh[l].
func dequantQ5K(src []byte, dst []float32) {
	const bb = 4 + 12 + qkK/8 + qkK/2
	for b := 0; b < len(dst)/qkK; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qkK:(b+1)*qkK]
		d, dmin := f16(blk), f16(blk[2:])
		scales, qh, qs := blk[4:16], blk[16:48], blk[48:bb]
		for j := range 4 {
			q := qs[32*j : 32*j+32]
			sc1, m1 := scaleMinK4(2*j, scales)
			sc2, m2 := scaleMinK4(2*j+1, scales)
			d1, min1 := d*float32(sc1), float32(dmin*float32(m1))
			d2, min2 := d*float32(sc2), float32(dmin*float32(m2))
			out := y[64*j : 64*j+64]
			for l := range 32 {
				lo := q[l]&0x0f | (qh[l]>>(2*j)&1)<<4
				hi := q[l]>>4 | (qh[l]>>(2*j+1)&1)<<4
				out[l] = float32(d1*float32(lo)) - min1
				out[l+32] = float32(d2*float32(hi)) - min2
			}
		}
	}
}

// dequantQ6K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales int8[16],
// f16 d; value = d*scale*(q-32). Each 128-element half uses 64 bytes of
// ql, 32 of qh and 8 scales.
func dequantQ6K(src []byte, dst []float32) {
	const bb = qkK/2 + qkK/4 + qkK/16 + 2
	for b := 0; b < len(dst)/qkK; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qkK:(b+1)*qkK]
		d := f16(blk[208:])
		for n := range 2 {
			ql := blk[64*n : 64*n+64]
			qh := blk[128+32*n : 128+32*n+32]
			sc := blk[192+8*n : 192+8*n+8]
			out := y[128*n : 128*n+128]
			for l := range 32 {
				is := l / 16
				q1 := int(ql[l]&0x0f|(qh[l]>>0&3)<<4) - 32
				q2 := int(ql[l+32]&0x0f|(qh[l]>>2&3)<<4) - 32
				q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				out[l] = d * float32(int8(sc[is])) * float32(q1)
				out[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				out[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				out[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
	}
}

// dequantQ8K: f32 d, int8 qs[256], int16 bsums[16] (sums of 16 quants, used
// only by dot products); value = q*d.
func dequantQ8K(src []byte, dst []float32) {
	const bb = 4 + qkK + 2*qkK/16
	for b := 0; b < len(dst)/qkK; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qkK:(b+1)*qkK]
		d := math.Float32frombits(le.Uint32(blk))
		for j, q := range blk[4 : 4+qkK] {
			y[j] = d * float32(int8(q))
		}
	}
}
