package kernel

import (
	"math"

	"github.com/tessera-llm/tessera/models/dtype"
)

// The K quants' products (Q2_K to Q6_K, and IQ4_XS, whose super-blocks
// are built the same way) in integers per super-block, llama.cpp's
// Q4_K×Q8_K design with 16-bit activations. A super-block of 256 weights
// shares one f16 d (and dmin), and its groups' 4- to 8-bit factors are
// integers; so where the activations too share one scale per 256 inputs
// (QRow.KCodes, KD), a super-block's products are
//
//	d·D · Σ_g f_g · Σ_i c_i·xq_i
//
// with every sum exact in int32: the codes meet the activations in
// integer multiply-adds, the sums of each half group (16 inputs) meet
// their factor once, and one conversion to float and one multiply serve
// the whole super-block, where per-group activation scales need a
// conversion and a multiply for every 32 inputs. The mins meet the exact
// f32 sums of each group's inputs (of each half group's, for Q2_K), as in
// dotBlocksGo.
//
// Activations keep 16 bits (Max), not Q8_K's 8: per 256 inputs the
// rounding step is max|x|/32767, a few times coarser than QRow's per-32
// codes and about 250 times finer than llama.cpp's, and the integer sums
// still fit: a half's sum times its factor is at most 16·32·32767·128 =
// 2 147 352 576 < 2³¹ in magnitude (Q6_K: codes −32..31, factors
// −128..127; IQ4_XS: 16·127·32767·32 = 2 130 640 896, its codebook's
// levels −127..113 and factors −32..31; Q3_K: codes −4..3, factors
// −32..31, far below; Q2_K: codes 0..3, factors 0..15).

// KBlock is the inputs a super-block spans, and so a KCodes scale.
const KBlock = 256

// kGroups is the groups of a super-block.
const kGroups = KBlock / Group

// KType says whether the products of t meet the per-super-block
// activations (dotBlocksKGo) rather than the per-group ones.
func KType(t dtype.Type) bool {
	switch t {
	case dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K, dtype.IQ4_XS:
		return true
	}
	return false
}

// quantizeK sets q.KCodes and q.KD to x quantized per super-block of 256
// inputs, as quantizeKGo defines (the whole super-blocks in vector code
// where the CPU has it), and q.KSums to the groups' sums (DS's, which
// Quantize made first) one after the other, for the kernels' contiguous
// loads.
func (q *QRow) quantizeK(x []float32) {
	b0 := 0
	if n := len(x) / KBlock; n > 0 && hasAVX2 {
		quantizeKAVX2(&x[0], &q.KCodes[0], &q.KD[0], n)
		b0 = n
	}
	q.quantizeKGo(x, b0)
	for g := range q.Groups() {
		q.KSums[g] = q.DS[2*g+1]
	}
}

// quantizeKGo is the definition of quantizeK's codes and scales, of
// super-blocks b0 and after: per super-block of 256 inputs (a last one may
// be shorter; missing inputs are 0), as quantizeGo does per group, D =
// max|x|/Max and codes round(x·(1/D)) to nearest, ties to even, where
// 1/D is finite (0 elsewhere), placed by CodeIndex.
func (q *QRow) quantizeKGo(x []float32, b0 int) {
	G := q.Groups()
	for b := b0; b < len(q.KD); b++ {
		lo, hi := b*KBlock, min(len(x), (b+1)*KBlock)
		var amax float32
		for _, v := range x[lo:hi] {
			amax = max(amax, abs(v))
		}
		d := amax / Max
		inv := 1 / d
		if !(inv <= math.MaxFloat32) {
			inv = 0
		}
		for i := lo; i < min((b+1)*KBlock, G*Group); i++ {
			var c int16 // 0 past the row's end, where its last group pads
			if i < hi {
				c = int16(math.RoundToEven(float64(x[i] * inv)))
			}
			q.KCodes[CodeIndex(i/Group, G, i%Group)] = c
		}
		q.KD[b] = d
	}
}

// kFactors decodes super-block b of a row of groups groups whose scale
// words are s: its f16 d as f32, the integer factor of each half group
// (f[2j] for inputs 0..15 of group j, f[2j+1] for 16..31) and its min,
// −(dmin·m) as dtype.GroupScale makes it (0 without; the same for both
// halves where a group has one).
func kFactors(t dtype.Type, s []uint32, b, groups int) (d float32, f [2 * kGroups]int32, mins [2 * kGroups]float32) {
	byteAt := func(k int) byte { return byte(s[k/4] >> (8 * (k % 4))) }
	switch t {
	case dtype.Q4_K, dtype.Q5_K:
		at := 16 * b
		d, dmin := halfAt(s, at), halfAt(s, at+2)
		var sc [12]byte
		for k := range sc {
			sc[k] = byteAt(at + 4 + k)
		}
		for j := range kGroups {
			c, m := scaleMinK4(j, sc[:])
			f[2*j], f[2*j+1] = int32(c), int32(c)
			mins[2*j] = -(dmin * float32(m))
			mins[2*j+1] = mins[2*j]
		}
		return d, f, mins
	case dtype.Q6_K:
		at := 2*(groups/kGroups) + 16*b
		for k := range f {
			f[k] = int32(int8(byteAt(at + k)))
		}
		return halfAt(s, 2*b), f, mins
	case dtype.Q3_K:
		at := 2*(groups/kGroups) + 12*b
		var b12 [12]byte
		for k := range b12 {
			b12[k] = byteAt(at + k)
		}
		for k, v := range dtype.Q3KScales(b12[:]) {
			f[k] = int32(v)
		}
		return halfAt(s, 2*b), f, mins
	case dtype.Q2_K:
		at := 20 * b
		dmin := halfAt(s, at+2)
		for h := range f {
			c := byteAt(at + 4 + h)
			f[h] = int32(c & 15)
			mins[h] = -(dmin * float32(c>>4))
		}
		return halfAt(s, at), f, mins
	case dtype.IQ4_XS:
		at := 8 * b
		sh := uint16(byteAt(at+2)) | uint16(byteAt(at+3))<<8
		sl := [4]byte{byteAt(at + 4), byteAt(at + 5), byteAt(at + 6), byteAt(at + 7)}
		for j := range kGroups {
			c := int32(dtype.IQ4XSScale(sh, sl[:], j))
			f[2*j], f[2*j+1] = c, c
		}
		return halfAt(s, at), f, mins
	}
	panic("kernel: " + t.String() + " is no K type")
}

// minSums is what the K kernels' sums argument reads for rows of type t:
// the activations' group sums, or Q2_K's (a min a half group) their half
// sums, nil where they were not made (QRow.SumHalves).
func minSums(t dtype.Type, sums, halves []float32) []float32 {
	if t == dtype.Q2_K {
		if len(halves) == 0 {
			return nil
		}
		return halves
	}
	return sums
}

// halfAt is the f16 at byte k of s, as f32.
func halfAt(s []uint32, k int) float32 {
	b := func(k int) uint16 { return uint16(s[k/4] >> (8 * (k % 4)) & 0xff) }
	return half(b(k) | b(k+1)<<8)
}

// scaleMinK4 is group j's 6-bit scale and min of a Q4_K or Q5_K
// super-block's 12 factor bytes (ggml's get_scale_min_k4).
func scaleMinK4(j int, s []byte) (sc, m byte) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0x0f | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

// dotBlocksKGo is the definition of DotBlocks for the K types: per
// super-block b of the row, with the activations' codes xq = KCodes and
// scale D = KD[b], the weights' codes c_i and factors f (kFactors),
//
//	half[h] = Σ_{i in half h} c_i·xq_i   (int32, exact; h = 2j + i/16 for input i of group j)
//	s = f32(d·D)
//	acc[L] += f32(f32(f[h]·half[h])·s)   (lane L = kLane(h))
//	macc[j] += f32(min_j·sum_g)          (Q4_K, Q5_K: group j = g%8, sum_g = KSums[g])
//	macc[h%8] += f32(min_h·hsum_h)       (Q2_K: each half h in turn, hsum_h = Halves[2g + h%2])
//
// and at the end foldLanes(acc, macc), dotBlocksGo's horizontal sum (acc
// as two sets of eight lanes). The lanes are where the vector code's
// reductions leave the half sums (kLane).
func dotBlocksKGo(t dtype.Type, codes, scales []uint32, x *QRow) float32 {
	l, _ := dtype.Layout(t)
	G := x.Groups()
	var acc [2][Lanes]float32
	var macc [Lanes]float32
	var c [dtype.BlockGroup]int8
	for b := 0; b*kGroups < G; b++ {
		d, f, mins := kFactors(t, scales, b, G)
		var half [2 * kGroups]int32
		for j := 0; j < kGroups && b*kGroups+j < G; j++ {
			g := b*kGroups + j
			l.GroupCodes(codes[g*l.CodeWords:(g+1)*l.CodeWords], &c)
			for i := range Group {
				half[2*j+i/16] += int32(c[i]) * int32(x.KCodes[CodeIndex(g, G, i)])
			}
			switch l.Min {
			case 1:
				macc[j] += float32(mins[2*j] * x.KSums[g])
			case 2:
				for k := range 2 {
					macc[(2*j+k)%Lanes] += float32(mins[2*j+k] * x.Halves[2*g+k])
				}
			}
		}
		s := float32(d * x.KD[b])
		for h, v := range half {
			L := kLane(h)
			acc[L/Lanes][L%Lanes] += float32(float32(f[h]*v) * s)
		}
	}
	return foldLanes(&acc, &macc)
}

// kLane is the lane of half h of a super-block's groups: 4·(h%4) + h/4.
// AVX-512 sums a pair p of groups in one register (a lane four inputs of
// its halves 4p..4p+3), and unpacking and adding four such registers
// (dword, then qword interleaves) leaves half 4p+c in lane 4c+p; AVX2
// sums a group in a register and VPHADDD of the even groups' (0, 2, 4, 6),
// then of the odd ones', leaves the same halves in the same lanes.
func kLane(h int) int { return 4*(h%4) + h/4 }
