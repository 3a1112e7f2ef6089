package dtype

import "math"

// Quantizers for the K quants. Both work in two levels like ggml's: first
// find the best float scale (and min) for each sub-block, then quantize
// those scales against one f16 super-block scale, and finally re-derive
// every code from the scales as the decoder will see them, so that the
// rounding of the scales does not add up with the rounding of the codes.

// fitAffine finds scale >= 0 and min >= 0 with x ≈ scale*q - min for
// integer codes q in [0, nmax], minimizing the squared error. It tries a
// range of code spacings around the naive (max-min)/nmax and refits scale
// and offset by least squares for each, because the naive spacing wastes
// codes on outliers.
func fitAffine(x []float32, nmax int) (scale, mn float32) {
	lo, hi := minMax(x)
	lo = min(lo, 0) // the format subtracts a non-negative min
	if !(hi > lo) { // constant block (or NaN): the min alone encodes it
		return 0, -lo
	}
	var codes [qkK]int
	n := float64(len(x))
	best := math.Inf(1)
	for step := -10; step <= 10; step++ {
		iscale := (float32(nmax) + float32(0.1*float32(step))) / (hi - lo)
		var sq, sq2, sx, sqx float64
		for i, v := range x {
			codes[i] = code((v-lo)*iscale, nmax)
			q := float64(codes[i])
			sq += q
			sq2 += float64(q * q)
			sx += float64(v)
			sqx += float64(q * float64(v))
		}
		var s, b float64 // x ≈ s*q + b
		if den := float64(n*sq2) - float64(sq*sq); den > 0 {
			s = (float64(n*sqx) - float64(sq*sx)) / den
			b = (sx - float64(s*sq)) / n
		}
		if b > 0 || s <= 0 { // a positive offset is not representable
			b = 0
			if sq2 > 0 {
				s = max(sqx/sq2, 0)
			}
		}
		var e float64
		for i, v := range x {
			d := float64(s*float64(codes[i])) + b - float64(v)
			e += float64(d * d)
		}
		if e < best {
			best, scale, mn = e, float32(s), float32(-b)
		}
	}
	return scale, mn
}

// quantQ4K writes Q4_K super-blocks: eight 32-element sub-blocks, each with
// a 6-bit scale and min against the f16 d and dmin, and 4-bit codes.
func quantQ4K(src []float32, dst []byte) {
	quantAffineK(src, dst, 4+12+qkK/2, 15, func(blk []byte, codes *[qkK]int) {
		qs := blk[16:]
		for j := range 4 {
			for l := range 32 {
				qs[32*j+l] = byte(codes[64*j+l] | codes[64*j+32+l]<<4)
			}
		}
	})
}

// quantQ5K writes Q5_K super-blocks: Q4_K's scales with 5-bit codes, the
// low nibbles in qs as Q4_K's and the fifth bits in qh (bit 2j of qh[l]
// for value 64j+l, bit 2j+1 for value 64j+32+l).
func quantQ5K(src []float32, dst []byte) {
	quantAffineK(src, dst, 4+12+qkK/8+qkK/2, 31, func(blk []byte, codes *[qkK]int) {
		qh, qs := blk[16:48], blk[48:]
		clear(qh)
		for j := range 4 {
			for l := range 32 {
				lo, hi := codes[64*j+l], codes[64*j+32+l]
				qs[32*j+l] = byte(lo&15 | (hi&15)<<4)
				qh[l] |= byte(lo>>4)<<(2*j) | byte(hi>>4)<<(2*j+1)
			}
		}
	})
}

// quantAffineK writes the super-blocks of Q4_K or Q5_K (bb bytes each,
// codes 0..nmax): the f16 d and dmin and the 6-bit sub-block scales and
// mins that both share, then the codes re-derived from those as the
// decoder sees them, which pack stores.
func quantAffineK(src []float32, dst []byte, bb, nmax int, pack func(blk []byte, codes *[qkK]int)) {
	var scales, mins [8]float32
	var ls, lm [8]int
	var codes [qkK]int
	for b := 0; b < len(src)/qkK; b++ {
		x, blk := src[b*qkK:(b+1)*qkK], dst[b*bb:(b+1)*bb]
		var maxScale, maxMin float32
		for j := range 8 {
			scales[j], mins[j] = fitAffine(x[32*j:32*j+32], nmax)
			maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
		}
		putF16(blk, maxScale/63)
		putF16(blk[2:], maxMin/63)
		d, dmin := f16(blk), f16(blk[2:])
		for j := range 8 {
			ls[j] = code(scales[j]*inverse(d), 63)
			lm[j] = code(mins[j]*inverse(dmin), 63)
		}
		putScaleMinK4(blk[4:16], &ls, &lm)
		for j := range 8 {
			sc, m := scaleMinK4(j, blk[4:16])
			e, off := d*float32(sc), float32(dmin*float32(m))
			for i, v := range x[32*j : 32*j+32] {
				codes[32*j+i] = code((v+off)*inverse(e), nmax)
			}
		}
		pack(blk, &codes)
	}
}

// putScaleMinK4 packs eight 6-bit scales and mins; the inverse of
// scaleMinK4.
func putScaleMinK4(s []byte, ls, lm *[8]int) {
	for j := range 4 {
		s[j] = byte(ls[j]) | byte(ls[j+4]>>4)<<6
		s[j+4] = byte(lm[j]) | byte(lm[j+4]>>4)<<6
		s[j+8] = byte(ls[j+4]&0x0f) | byte(lm[j+4]&0x0f)<<4
	}
}

// fitSymmetric finds a scale s with x ≈ s*q for integer q in [-nmax,
// nmax-1], trying spacings around the one that puts the largest magnitude
// on -nmax and refitting s by least squares for each.
func fitSymmetric(x []float32, nmax int) float32 {
	m := signedMax(x)
	if m == 0 || m != m {
		return 0
	}
	var codes [qkK]int
	var best, scale float64 = math.Inf(1), 0
	for step := -10; step <= 10; step++ {
		iscale := -(float32(nmax) + float32(0.1*float32(step))) / m
		var sqx, sq2 float64
		for i, v := range x {
			codes[i] = code(float32(v*iscale)+float32(nmax), 2*nmax-1) - nmax
			q := float64(codes[i])
			sqx += float64(q * float64(v))
			sq2 += float64(q * q)
		}
		if sq2 == 0 {
			continue
		}
		s := sqx / sq2
		var e float64
		for i, v := range x {
			d := float64(s*float64(codes[i])) - float64(v)
			e += float64(d * d)
		}
		if e < best {
			best, scale = e, s
		}
	}
	return float32(scale)
}

// quantQ6K writes Q6_K super-blocks: sixteen 16-element sub-blocks with
// int8 scales against the f16 d, and 6-bit codes offset by 32.
func quantQ6K(src []float32, dst []byte) {
	const bb = qkK/2 + qkK/4 + qkK/16 + 2
	var scales [16]float32
	var codes [qkK]int
	for b := 0; b < len(src)/qkK; b++ {
		x, blk := src[b*qkK:(b+1)*qkK], dst[b*bb:(b+1)*bb]
		var amax float32
		for j := range 16 {
			scales[j] = fitSymmetric(x[16*j:16*j+16], 32)
			amax = max(amax, abs32(scales[j]))
		}
		putF16(blk[208:], amax/127)
		d := f16(blk[208:])
		for j := range 16 {
			sc := int8(code(float32(scales[j]*inverse(d))+128, 255) - 128)
			blk[192+j] = byte(sc)
			e := d * float32(sc)
			for i, v := range x[16*j : 16*j+16] {
				codes[16*j+i] = code(float32(v*inverse(e))+32, 63)
			}
		}
		for n := range 2 {
			ql, qh := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32]
			c := codes[128*n : 128*n+128]
			for l := range 32 {
				ql[l] = byte(c[l]&0x0f | (c[l+64]&0x0f)<<4)
				ql[l+32] = byte(c[l+32]&0x0f | (c[l+96]&0x0f)<<4)
				qh[l] = byte(c[l]>>4 | c[l+32]>>4<<2 | c[l+64]>>4<<4 | c[l+96]>>4<<6)
			}
		}
	}
}

// put2Bits stores 256 two-bit codes as Q2_K and Q3_K order them: value v
// in bits 2·((v%128)/32) of byte 32·(v/128) + v%32.
func put2Bits(codes *[qkK]int, qs []byte) {
	clear(qs[:qkK/4])
	for v, c := range codes {
		qs[32*(v/128)+v%32] |= byte(c&3) << (2 * (v % 128 / 32))
	}
}

// quantQ2K writes Q2_K super-blocks: sixteen 16-value sub-blocks, each a
// 4-bit scale and min against the f16 d and dmin, and 2-bit codes.
func quantQ2K(src []float32, dst []byte) {
	const bb = qkK/16 + qkK/4 + 4
	var scales, mins [16]float32
	var codes [qkK]int
	for b := 0; b < len(src)/qkK; b++ {
		x, blk := src[b*qkK:(b+1)*qkK], dst[b*bb:(b+1)*bb]
		var maxScale, maxMin float32
		for j := range 16 {
			scales[j], mins[j] = fitAffine(x[16*j:16*j+16], 3)
			maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
		}
		putF16(blk[80:], maxScale/15)
		putF16(blk[82:], maxMin/15)
		d, dmin := f16(blk[80:]), f16(blk[82:])
		for j := range 16 {
			sc, m := code(scales[j]*inverse(d), 15), code(mins[j]*inverse(dmin), 15)
			blk[j] = byte(sc | m<<4)
			e, off := d*float32(sc), float32(dmin*float32(m))
			for i, v := range x[16*j : 16*j+16] {
				codes[16*j+i] = code((v+off)*inverse(e), 3)
			}
		}
		put2Bits(&codes, blk[16:80])
	}
}

// quantQ3K writes Q3_K super-blocks: sixteen 16-value sub-blocks with
// 6-bit scales (offset by 32) against the f16 d, and 3-bit codes −4..3:
// the low 2 bits in qs as Q2_K's, the third in hmask (set for codes ≥ 0).
func quantQ3K(src []float32, dst []byte) {
	const bb = qkK/8 + qkK/4 + 12 + 2
	var scales [16]float32
	var codes [qkK]int
	for b := 0; b < len(src)/qkK; b++ {
		x, blk := src[b*qkK:(b+1)*qkK], dst[b*bb:(b+1)*bb]
		var top float32
		for j := range 16 {
			scales[j] = fitSymmetric(x[16*j:16*j+16], 4)
			if abs32(scales[j]) > abs32(top) {
				top = scales[j]
			}
		}
		putF16(blk[108:], top/-32)
		d := f16(blk[108:])
		s := blk[96:108]
		clear(s)
		for j := range 16 {
			l := code(float32(scales[j]*inverse(d))+32, 63)
			s[j%8] |= byte(l&15) << (4 * (j / 8))
			s[8+j%4] |= byte(l>>4) << (2 * (j / 4))
		}
		sc := Q3KScales(s)
		for j := range 16 {
			id := inverse(d * float32(sc[j]))
			for i, v := range x[16*j : 16*j+16] {
				codes[16*j+i] = code(float32(v*id)+4, 7)
			}
		}
		hmask := blk[:32]
		clear(hmask)
		for v, c := range codes {
			hmask[v%32] |= byte(c>>2) << (4*(v/128) + v%128/32)
		}
		put2Bits(&codes, blk[32:96])
	}
}
