package dtype

import (
	"math"
	"slices"
)

// The 4-bit codebook formats: IQ4_NL and IQ4_XS (llama.cpp's non-linear
// 4-bit types) and MXFP4 (the OCP microscaling FP4 of gpt-oss). Each value
// is a scale times a level looked up by its 4-bit code; the levels are
// small integers, so scale·level is exact in f32 and every backend that
// multiplies in f32 gets ggml's values bit for bit.

// kvaluesIQ4NL are IQ4_NL's and IQ4_XS's 16 levels (ggml's kvalues_iq4nl):
// denser near zero, where most weights are.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// kvaluesMXFP4 are the E2M1 values times two (ggml's kvalues_mxfp4):
// ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, the sign in bit 3. The scale of a block
// is then half its E8M0 power of two (e8m0Half).
var kvaluesMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// Codebook returns the 16 levels of a codebook type (IQ4_NL, IQ4_XS,
// MXFP4) and whether t has one.
func Codebook(t Type) (*[16]int8, bool) {
	switch t {
	case IQ4_NL, IQ4_XS:
		return &kvaluesIQ4NL, true
	case MXFP4:
		return &kvaluesMXFP4, true
	}
	return nil, false
}

// e8m0Half is 2^(e−128): half the E8M0 scale 2^(e−127), exact in f32 for
// every e but 255 (which OCP reserves for NaN and ggml decodes as 2^127),
// as ggml's GGML_E8M0_TO_FP32_HALF computes it.
func e8m0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e) // subnormal 2^-128, 2^-127
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// dequantIQ4NL: f16 d, 16 bytes whose low nibbles are elements 0..15 and
// high nibbles 16..31 (Q4_0's order); value = d·kvalues[q].
func dequantIQ4NL(src []byte, dst []float32) {
	const bb = 2 + qk/2
	for b := 0; b < len(dst)/qk; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qk:(b+1)*qk]
		d := f16(blk)
		for j, q := range blk[2:bb] {
			y[j] = d * float32(kvaluesIQ4NL[q&15])
			y[j+qk/2] = d * float32(kvaluesIQ4NL[q>>4])
		}
	}
}

// IQ4XSScale is the 6-bit factor of sub-block j of an IQ4_XS super-block
// (its low 4 bits in scales_l, its top 2 in scales_h), offset by 32.
func IQ4XSScale(scalesH uint16, scalesL []byte, j int) int {
	return int(scalesL[j/2]>>(4*(j%2))&15|byte(scalesH>>(2*j)&3)<<4) - 32
}

// dequantIQ4XS: f16 d, u16 scales_h, scales_l[4], qs[128]; each 32-value
// sub-block j has d·(ls_j − 32) and 16 bytes of codes in Q4_0's order.
func dequantIQ4XS(src []byte, dst []float32) {
	const bb = 2 + 2 + qkK/64 + qkK/2
	for b := 0; b < len(dst)/qkK; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qkK:(b+1)*qkK]
		d, sh := f16(blk), le.Uint16(blk[2:])
		for j := range qkK / qk {
			dl := d * float32(IQ4XSScale(sh, blk[4:8], j))
			out := y[qk*j : qk*(j+1)]
			for l, q := range blk[8+16*j : 8+16*(j+1)] {
				out[l] = dl * float32(kvaluesIQ4NL[q&15])
				out[l+16] = dl * float32(kvaluesIQ4NL[q>>4])
			}
		}
	}
}

// dequantMXFP4: an E8M0 exponent byte e, then 16 bytes of E2M1 codes in
// Q4_0's order; value = kvaluesMXFP4[q]·2^(e−128).
func dequantMXFP4(src []byte, dst []float32) {
	const bb = 1 + qk/2
	for b := 0; b < len(dst)/qk; b++ {
		blk, y := src[b*bb:(b+1)*bb], dst[b*qk:(b+1)*qk]
		d := e8m0Half(blk[0])
		for j, q := range blk[1:bb] {
			y[j] = float32(kvaluesMXFP4[q&15]) * d
			y[j+qk/2] = float32(kvaluesMXFP4[q>>4]) * d
		}
	}
}

// nearestLevel is the code of the level of kv nearest to v (the lower one
// on a tie; NaN gives the level nearest 0): nearestLevelScan's answer,
// found without its sixteen unpredictable branches for the codebooks the
// quantizers use (a gpt-oss file's MXFP4 experts spent 82% of synth's
// time in the scan).
func nearestLevel(kv *[16]int8, v float32) int {
	if v != v {
		v = 0
	}
	var s *levelSearch
	switch kv {
	case &kvaluesMXFP4:
		s = &searchMXFP4
	case &kvaluesIQ4NL:
		s = &searchIQ4NL
	}
	if s != nil {
		if code, ok := s.nearest(v); ok {
			return code
		}
	}
	return nearestLevelScan(kv, v)
}

// nearestLevelScan is nearestLevel by its definition: of the codes whose
// levels l give the smallest float32 |v − l|, the first.
func nearestLevelScan(kv *[16]int8, v float32) int {
	if v != v {
		v = 0
	}
	best, bestErr := 0, float32(math.Inf(1))
	for i, l := range kv {
		if e := abs32(v - float32(l)); e < bestErr {
			best, bestErr = i, e
		}
	}
	return best
}

// levelSearch is a codebook's distinct levels in ascending order, each
// with its first code, between two sentinels of −∞ and two of +∞ (code
// 0, never the nearer neighbour of a finite v), so that every finite v
// has two neighbours and a level beyond each.
type levelSearch struct {
	levels []float32
	codes  []int
}

var searchMXFP4, searchIQ4NL = newLevelSearch(&kvaluesMXFP4), newLevelSearch(&kvaluesIQ4NL)

func newLevelSearch(kv *[16]int8) levelSearch {
	inf := float32(math.Inf(1))
	s := levelSearch{levels: []float32{-inf, -inf}, codes: []int{0, 0}}
	for _, l := range slices.Sorted(slices.Values(kv[:])) {
		if s.levels[len(s.levels)-1] == float32(l) {
			continue
		}
		s.levels = append(s.levels, float32(l))
		s.codes = append(s.codes, slices.Index(kv[:], l))
	}
	s.levels = append(s.levels, inf, inf)
	s.codes = append(s.codes, 0, 0)
	return s
}

// nearest finds v's neighbours among the levels by counting those at or
// below it (no branch to mispredict) and takes the nearer, the lower
// code on a tie. The float32 |v − l| rounds monotonically in the exact
// distance, so a level beyond a neighbour can only tie with the nearest
// through rounding, never beat it: where the next level out on either
// side is strictly farther than the nearest, the scan's answer is one of
// the two neighbours. Elsewhere (v infinite, or so large that distances
// round together) ok is false and the caller scans.
func (s *levelSearch) nearest(v float32) (code int, ok bool) {
	lv := s.levels
	p := 0
	for _, l := range lv {
		p += b2i(l <= v)
	}
	if p < 2 || p > len(lv)-2 {
		return 0, false
	}
	lo := p - 1
	eLo, eHi := abs32(v-lv[lo]), abs32(v-lv[lo+1])
	e := min(eLo, eHi)
	if !(abs32(v-lv[lo-1]) > e && abs32(v-lv[lo+2]) > e) {
		return 0, false
	}
	if eLo == eHi { // rare: a branch that predicts well
		return min(s.codes[lo], s.codes[lo+1]), true
	}
	return s.codes[lo+b2i(eHi < eLo)], true
}

// b2i is 1 for true: a flag the compiler sets without a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fitCodebook finds a scale d with x ≈ d·kv[q] for the IQ4 levels: it
// tries scales that put the block's largest magnitude on levels near the
// ends of the codebook and refits each by least squares over the codes it
// gives (ggml's search, unweighted).
func fitCodebook(x []float32) float32 {
	m := signedMax(x)
	if m == 0 || m != m {
		return 0
	}
	var codes [qk]int
	var best, scale float64 = -1, 0
	for step := -7; step <= 7; step++ {
		id := (float32(kvaluesIQ4NL[0]) + float32(step)) / m
		var sqx, sq2 float64
		for i, v := range x {
			codes[i] = nearestLevel(&kvaluesIQ4NL, v*id)
			l := float64(kvaluesIQ4NL[codes[i]])
			sqx += float64(l * float64(v))
			sq2 += float64(l * l)
		}
		// The least-squares scale sqx/sq2 leaves an error of Σx² − sqx²/sq2:
		// the largest sqx²/sq2 is the best.
		if sq2 > 0 && sqx*sqx/sq2 > best {
			best, scale = sqx*sqx/sq2, sqx/sq2
		}
	}
	return float32(scale)
}

// packNibbles16 stores 32 codes as Q4_0 orders them: element j in the low
// nibble of byte j, element j+16 in its high nibble.
func packNibbles16(codes *[qk]int, qs []byte) {
	for j := range qk / 2 {
		qs[j] = byte(codes[j] | codes[j+qk/2]<<4)
	}
}

// quantIQ4NL writes IQ4_NL blocks: the fitted scale rounded to f16, and
// each code the nearest level under it.
func quantIQ4NL(src []float32, dst []byte) {
	const bb = 2 + qk/2
	var codes [qk]int
	for b := 0; b < len(src)/qk; b++ {
		x, blk := src[b*qk:(b+1)*qk], dst[b*bb:(b+1)*bb]
		putF16(blk, fitCodebook(x))
		id := inverse(f16(blk))
		for j, v := range x {
			codes[j] = nearestLevel(&kvaluesIQ4NL, v*id)
		}
		packNibbles16(&codes, blk[2:])
	}
}

// quantIQ4XS writes IQ4_XS super-blocks: each sub-block's fitted scale as
// a 6-bit factor (−32..31) of the f16 d that puts the largest of them on
// −32, and the codes re-derived from the factors as the decoder sees them.
func quantIQ4XS(src []float32, dst []byte) {
	const bb = 2 + 2 + qkK/64 + qkK/2
	var scales [qkK / qk]float32
	var codes [qk]int
	for b := 0; b < len(src)/qkK; b++ {
		x, blk := src[b*qkK:(b+1)*qkK], dst[b*bb:(b+1)*bb]
		var top float32
		for j := range scales {
			scales[j] = fitCodebook(x[qk*j : qk*(j+1)])
			if abs32(scales[j]) > abs32(top) {
				top = scales[j]
			}
		}
		putF16(blk, top/-32)
		d := f16(blk)
		var sh uint16
		clear(blk[4:8])
		for j, s := range scales {
			ls := code(float32(s*inverse(d))+32, 63)
			blk[4+j/2] |= byte(ls&15) << (4 * (j % 2))
			sh |= uint16(ls>>4) << (2 * j)
		}
		le.PutUint16(blk[2:], sh)
		for j := range scales {
			id := inverse(d * float32(IQ4XSScale(sh, blk[4:8], j)))
			for i, v := range x[qk*j : qk*(j+1)] {
				codes[i] = nearestLevel(&kvaluesIQ4NL, v*id)
			}
			packNibbles16(&codes, blk[8+16*j:])
		}
	}
}

// quantMXFP4 writes MXFP4 blocks as ggml's reference does: the exponent
// puts the largest magnitude in the top binade of E2M1 (e =
// floor(log2 max) − 2 + 127, so it may saturate at ±6), and each code is
// the nearest E2M1 value.
func quantMXFP4(src []float32, dst []byte) {
	const bb = 1 + qk/2
	var codes [qk]int
	for b := 0; b < len(src)/qk; b++ {
		x, blk := src[b*qk:(b+1)*qk], dst[b*bb:(b+1)*bb]
		amax := abs32(signedMax(x))
		e := 0
		if amax > 0 && amax == amax {
			_, exp := math.Frexp(float64(amax)) // amax = frac·2^exp, frac in [0.5, 1)
			e = min(max(exp-1-2+127, 0), 254)
		}
		blk[0] = byte(e)
		d := float64(e8m0Half(byte(e))) // 1/d overflows f32 for the smallest e
		for j, v := range x {
			codes[j] = nearestLevel(&kvaluesMXFP4, float32(float64(v)/d))
		}
		packNibbles16(&codes, blk[1:])
	}
}
