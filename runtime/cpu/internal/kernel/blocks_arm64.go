//go:build !purego

package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// The NEON products of the K quants (blocks_k_arm64.s): dotBlocksKGo's
// arithmetic, bit for bit, for rows of weights one after the other (codes
// following each other, scale words sstride bytes apart) and one row of
// activations (xq its KCodes, kd its KD, sums its KSums: Q2_K's its
// Halves), a result for each into out; rows of whole super-blocks (groups
// a multiple of 8).

//go:noescape
func dotBlocksQ2_KNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ3_KNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ4_KNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ5_KNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ6_KNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

// dotBlocksIQ4_XSKNEON: IQ4_XS's codes index book.
//
//go:noescape
func dotBlocksIQ4_XSKNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32, book *[16]int8)

// The NEON products of the block types with an f16 scale a group and no
// mins (blocks_arm64.s): dotBlocksGo's arithmetic, bit for bit, for rows
// as above with the activations' codes xq and their ds; IQ4_NL's and
// MXFP4's codes index book. Q5_1 runs its Go twin on arm64 so far.

//go:noescape
func dotBlocksQ4_0NEON(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ5_0NEON(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ8_0NEON(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksMXFP4NEON(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, book *[16]int8)

//go:noescape
func dotBlocksIQ4_NLNEON(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, book *[16]int8)

// dotBlocksRowsAsm sets out[r] to the products of rows of weights of type
// t with x in the NEON kernels where there is one for t, and returns how
// many rows it did (dotBlocksRows does the rest with the twin).
func dotBlocksRowsAsm(t dtype.Type, codes, scales []uint32, sstride int, x *QRow, groups int, out []float32) int {
	return dotBlocksRowsOn(blocksPaths()[0], t, codes, scales, sstride, x, groups, out)
}

// blocksPaths are the block kernels this CPU runs, the best first; the
// twin ("go") last.
func blocksPaths() []string {
	if hasNEON {
		return []string{"neon", "go"}
	}
	return []string{"go"}
}

// blocksCovered reports whether path has a kernel for rows of t (of whole
// super-blocks, for the K quants).
func blocksCovered(path string, t dtype.Type) bool {
	if path != "neon" {
		return false
	}
	switch t {
	case dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K, dtype.Q4_0, dtype.Q5_0, dtype.Q8_0, dtype.IQ4_NL, dtype.MXFP4, dtype.IQ4_XS:
		return true
	}
	return false
}

// dotBlocksRowsOn is dotBlocksRowsAsm on the kernels of path. The NEON
// kernels read a row's scale words and codes and nothing past them.
func dotBlocksRowsOn(path string, t dtype.Type, codes, scales []uint32, sstride int, x *QRow, groups int, out []float32) int {
	rows := len(out)
	if !blocksCovered(path, t) || rows == 0 {
		return 0
	}
	sstride *= 4
	if !KType(t) {
		c, s, xq, ds, o := &codes[0], &scales[0], &x.Codes[0], &x.DS[0], &out[0]
		switch t {
		case dtype.Q4_0:
			dotBlocksQ4_0NEON(c, s, sstride, xq, ds, groups, rows, o)
		case dtype.Q5_0:
			dotBlocksQ5_0NEON(c, s, sstride, xq, ds, groups, rows, o)
		case dtype.Q8_0:
			dotBlocksQ8_0NEON(c, s, sstride, xq, ds, groups, rows, o)
		case dtype.IQ4_NL:
			l, _ := dtype.Layout(t)
			dotBlocksIQ4_NLNEON(c, s, sstride, xq, ds, groups, rows, o, l.Codebook)
		case dtype.MXFP4:
			l, _ := dtype.Layout(t)
			dotBlocksMXFP4NEON(c, s, sstride, xq, ds, groups, rows, o, l.Codebook)
		}
		return rows
	}
	if groups%kGroups != 0 {
		return 0
	}
	sums := minSums(t, x.KSums, x.Halves)
	if sums == nil {
		return 0
	}
	c, s, xq, kd, ds, o := &codes[0], &scales[0], &x.KCodes[0], &x.KD[0], &sums[0], &out[0]
	switch t {
	case dtype.Q4_K:
		dotBlocksQ4_KNEON(c, s, sstride, xq, kd, ds, groups, rows, o)
	case dtype.Q5_K:
		dotBlocksQ5_KNEON(c, s, sstride, xq, kd, ds, groups, rows, o)
	case dtype.Q6_K:
		dotBlocksQ6_KNEON(c, s, sstride, xq, kd, ds, groups, rows, o)
	case dtype.Q3_K:
		dotBlocksQ3_KNEON(c, s, sstride, xq, kd, ds, groups, rows, o)
	case dtype.Q2_K:
		dotBlocksQ2_KNEON(c, s, sstride, xq, kd, ds, groups, rows, o)
	case dtype.IQ4_XS:
		l, _ := dtype.Layout(t)
		dotBlocksIQ4_XSKNEON(c, s, sstride, xq, kd, ds, groups, rows, o, l.Codebook)
	}
	return rows
}
