package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// The products of weights kept at their file's bits (dtype.Blocks: Q4_K,
// Q6_K, Q8_0, IQ4_XS, MXFP4, ...) with activations quantized per group of
// 32 (QRow); Q4_K, Q5_K and Q6_K meet the activations quantized per
// super-block instead, in integers (blocks_k.go). One loop serves every type: per group the type's codes are
// unpacked to small integers (its planes of bits, less an offset or
// through a codebook) and meet the int16 activations in exact integer dot
// products, as int4's do; the type's scales, decoded for eight groups at a
// time, scale the integer sums. Every type is one specialisation of that
// loop: the Go twin below defines the bits, and the assembly of each
// architecture is one body whose unpacking and scale decoding each type
// fills in (blocks_amd64.s, blocks_arm64.s).

// DotBlocksRows sets out[j] to the dot product of row r0 + j of w with
// the quantized row x, in the order dotBlocksGo defines (dotBlocksKGo for
// the K quants, which read x's per-super-block codes), on every path
// (the rows in one call of the vector kernel where the CPU has one). Q2_K,
// whose mins are per 16 inputs, needs x's half sums (QRow.SumHalves); the
// K quants need its per-super-block codes (QRow.QuantizeK).
func DotBlocksRows(w *dtype.Blocks, r0 int, x *QRow, out []float32) {
	G := w.Groups()
	if G == 0 || len(out) == 0 {
		clear(out)
		return
	}
	if KType(w.Type) {
		needK(x)
	}
	cw, sw := G*w.Layout().CodeWords, w.RowScaleWords()
	codes, scales := w.Codes[r0*cw:(r0+len(out))*cw], w.Scales[r0*sw:]
	for j := dotBlocksRowsAsm(w.Type, codes, scales, sw, x, G, out); j < len(out); j++ {
		out[j] = dotBlocksRowGo(w.Type, codes[j*cw:(j+1)*cw], scales[j*sw:(j+1)*sw], x)
	}
}

// BlocksPath names the kernels DotBlocksRows runs on this CPU ("avx512",
// "avx2", "neon"), or "go" where only the twin does (wasm, -tags purego,
// x86 without AVX2).
func BlocksPath() string { return blocksPaths()[0] }

// BlocksKernel reports whether DotBlocksRows multiplies rows of type t in
// vector kernels on this CPU; where it does not, the twin costs several
// times what the int4 and int8 kernels do (the runtime then keeps the
// legacy storages). On arm64 every block type but Q5_1, Q2_K and Q3_K
// has NEON kernels.
func BlocksKernel(t dtype.Type) bool { return blocksCovered(blocksPaths()[0], t) }

// DotBlocks returns the dot product of row r of w with x (DotBlocksRows of
// one row).
func DotBlocks(w *dtype.Blocks, r int, x *QRow) float32 {
	var out [1]float32
	DotBlocksRows(w, r, x, out[:])
	return out[0]
}

// dotBlocksRowGo is the twin of DotBlocks of one row: dotBlocksKGo for
// the K types, dotBlocksGo for the others.
func dotBlocksRowGo(t dtype.Type, codes, scales []uint32, x *QRow) float32 {
	if KType(t) {
		return dotBlocksKGo(t, codes, scales, x)
	}
	return dotBlocksGo(t, codes, scales, x.Codes, x.DS, x.Halves)
}

// dotBlocksGo is the definition of DotBlocks for a row of groups of
// activations (codes xq laid out by CodeIndex, ds its scales and sums, hs
// its half sums where Q2_K needs them). Per group g, with the type's
// codes c_i, its scales lo (inputs 0..15) and hi (16..31) and its mins,
// and d = ds[2g]:
//
//	sd_lo = f32(lo·d), sd_hi = f32(hi·d)
//	lane_k = Σ_{i=4k}^{4k+3} c_i·xq_i (exact)
//	acc[g%2][k] += f32(f32(lane_k)·sd), sd_lo for lanes 0..3, sd_hi for 4..7
//	a min per group:  macc[g%8] += f32(m·ds[2g+1])
//	a min per half:   macc[g%8] += f32(m_lo·hs[2g]); macc[g%8] += f32(m_hi·hs[2g+1])
//
// and at the end a_k = acc[0][k] + acc[1][k], then fold(a) + fold(macc),
// fold(v) = ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)): the group's integer
// sums are int4's (dotQ4Go), and the min terms of eight consecutive groups
// go to eight lanes, since the vector code decodes scales eight groups at
// a time.
func dotBlocksGo(t dtype.Type, codes, scales []uint32, xq []int16, ds, hs []float32) float32 {
	var acc [2][Lanes]float32
	var macc [Lanes]float32
	dotBlocksGroups(t, codes, scales, xq, ds, hs, 0, &acc, &macc)
	return foldLanes(&acc, &macc)
}

// dotBlocksGroups adds groups g0... of the row to acc and macc
// (dotBlocksGo's loop).
func dotBlocksGroups(t dtype.Type, codes, scales []uint32, xq []int16, ds, hs []float32, g0 int, acc *[2][Lanes]float32, macc *[Lanes]float32) {
	l, _ := dtype.Layout(t)
	G := len(ds) / 2
	var c [dtype.BlockGroup]int8
	for g := g0; g < G; g++ {
		l.GroupCodes(codes[g*l.CodeWords:(g+1)*l.CodeWords], &c)
		lo, hi, mlo, mhi := dtype.GroupScale(t, scales, g, G)
		d := ds[2*g]
		sd := [2]float32{float32(lo * d), float32(hi * d)}
		for k := range Lanes {
			var lane int32
			for i := 4 * k; i < 4*k+4; i++ {
				lane += int32(c[i]) * int32(xq[CodeIndex(g, G, i)])
			}
			acc[g%2][k] += float32(float32(lane) * sd[k/4])
		}
		switch l.Min {
		case 1:
			macc[g%8] += float32(mlo * ds[2*g+1])
		case 2:
			macc[g%8] += float32(mlo * hs[2*g])
			macc[g%8] += float32(mhi * hs[2*g+1])
		}
	}
}

// foldLanes is dotBlocksGo's horizontal sum.
func foldLanes(acc *[2][Lanes]float32, macc *[Lanes]float32) float32 {
	var a [Lanes]float32
	for k := range a {
		a[k] = acc[0][k] + acc[1][k]
	}
	return fold8(&a) + fold8(macc)
}

func fold8(v *[Lanes]float32) float32 {
	return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]))
}

// SumHalves sets q.Halves to the sums of inputs 0..15 and 16..31 of each
// group of x (GroupSums8's order), which the products of Q2_K, whose mins
// are per 16 inputs, meet. Quantize clears them.
func (q *QRow) SumHalves(x []float32) {
	n := 2 * q.Groups()
	if cap(q.Halves) < n {
		q.Halves = make([]float32, n)
	}
	q.Halves = q.Halves[:n]
	GroupSums8(x, q.Halves)
}
