package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// The products of weights kept at their file's bits (dtype.Blocks: Q4_K,
// Q6_K, Q8_0, IQ4_XS, MXFP4, ...) with activations quantized per group of
// 32 (QRow); the K quants (Q2_K to Q6_K, IQ4_XS) meet the activations
// quantized per super-block instead, in integers (blocks_k.go). One loop
// serves every other type: per group the type's codes are unpacked to
// small integers (its planes of bits, less an offset or through a
// codebook) and meet the int16 activations in one exact integer dot
// product a group; the type's scales, decoded for eight groups at a time,
// scale the integer sums once each. Every type is one specialisation of
// that loop: the Go twin below defines the bits, and the assembly of each
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
// legacy storages). On arm64 every block type but Q5_1 has NEON
// kernels.
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
	return dotBlocksGo(t, codes, scales, x.Codes, x.DS)
}

// dotBlocksGo is the definition of DotBlocks for the types that are not
// K types (a scale, and a min where the type has one, a group) and a row
// of groups of activations (codes xq laid out by CodeIndex, ds its scales
// and sums). Per group g, with the type's codes c_i, its scale s and min
// m, and d = ds[2g]:
//
//	S = Σ_i c_i·xq_i (exact, int32)
//	acc[g%8] += f32(f32(S)·f32(s·d))
//	macc[g%8] += f32(m·ds[2g+1])
//
// and at the end fold8(acc) + fold8(macc), fold8(v) = ((v0+v4)+(v2+v6)) +
// ((v1+v5)+(v3+v7)): one integer sum a group, scaled once, the terms of
// eight consecutive groups in eight lanes, since the vector code decodes
// scales eight groups at a time. The integer sums are exact in any order,
// so each kernel adds a group's products however its registers suit.
func dotBlocksGo(t dtype.Type, codes, scales []uint32, xq []int16, ds []float32) float32 {
	l, _ := dtype.Layout(t)
	G := len(ds) / 2
	var acc, macc [Lanes]float32
	var c [dtype.BlockGroup]int8
	for g := range G {
		l.GroupCodes(codes[g*l.CodeWords:(g+1)*l.CodeWords], &c)
		sc, _, m, _ := dtype.GroupScale(t, scales, g, G)
		d := ds[2*g]
		var sum int32
		for i := range dtype.BlockGroup {
			sum += int32(c[i]) * int32(xq[CodeIndex(g, G, i)])
		}
		acc[g%8] += float32(float32(sum) * float32(sc*d))
		if l.Min == 1 {
			macc[g%8] += float32(m * ds[2*g+1])
		}
	}
	return fold8(&acc) + fold8(&macc)
}

// foldLanes is the K quants' horizontal sum (dotBlocksKGo).
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
