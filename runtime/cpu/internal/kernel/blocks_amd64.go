//go:build !purego

package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// The AVX2 and AVX-512 block products (blocks_amd64.s), one of each per
// type: dotBlocksGo for rows of weights one after the other (codes
// following each other, scale words sstride bytes apart) and one row of
// activations, a result for each into out.

//go:noescape
func dotBlocksQ4_0AVX2(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ4_0AVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ5_0AVX2(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ5_0AVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ5_1AVX2(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ5_1AVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ8_0AVX2(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ8_0AVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksIQ4_NLAVX2(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksIQ4_NLAVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksMXFP4AVX2(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksMXFP4AVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)

// dotBlocksRowsAsm sets out[r] to the products of rows of weights of type
// t (codes, scale words sstride words apart) with x, a row of groups
// groups, in the vector kernels where the CPU has them, and returns how
// many rows it did (dotBlocksRows does the rest with the twin). A row's
// last chunk of eight groups reads eight groups' scale words and ds:
// where the slices do not reach that far (Blocks and QRow pad their
// storage for it), the last row is left to the twin. The kernels are
// called directly, not through a func value, so that nothing escapes.
func dotBlocksRowsAsm(t dtype.Type, codes, scales []uint32, sstride int, x *QRow, groups int, out []float32) int {
	return dotBlocksRowsOn(blocksPaths()[0], t, codes, scales, sstride, x, groups, out)
}

// blocksPaths are the block kernels this CPU runs, the best first; the
// twin ("go") last.
func blocksPaths() []string {
	switch {
	case hasAVX512:
		return []string{"avx512", "avx2", "go"}
	case hasAVX2:
		return []string{"avx2", "go"}
	}
	return []string{"go"}
}

// blocksCovered reports whether path has a kernel for rows of t (of whole
// super-blocks, for the K quants): every vector path has one for every
// type but Q4_1.
func blocksCovered(path string, t dtype.Type) bool { return path != "go" && t != dtype.Q4_1 }

// dotBlocksRowsOn is dotBlocksRowsAsm on the kernels of path.
func dotBlocksRowsOn(path string, t dtype.Type, codes, scales []uint32, sstride int, x *QRow, groups int, out []float32) int {
	if path == "go" || t == dtype.Q4_1 {
		return 0
	}
	if KType(t) {
		return dotBlocksKRowsOn(path, t, codes, scales, sstride, x, groups, out)
	}
	l, _ := dtype.Layout(t)
	rows := len(out)
	chunks := (groups + 7) / 8
	if groups%8 != 0 && (4*cap(scales) < 4*(rows-1)*sstride+chunks*8/l.ScaleGroups*l.ScaleBytes || cap(x.DS) < 16*chunks) {
		rows--
	}
	if rows <= 0 {
		return 0
	}
	c, s, xq, ds, o := &codes[0], &scales[0], &x.Codes[0], &x.DS[0], &out[0]
	sstride *= 4
	if path == "avx512" {
		switch t {
		case dtype.Q4_0:
			dotBlocksQ4_0AVX512(c, s, sstride, xq, ds, groups, rows, o)
		case dtype.Q5_0:
			dotBlocksQ5_0AVX512(c, s, sstride, xq, ds, groups, rows, o)
		case dtype.Q5_1:
			dotBlocksQ5_1AVX512(c, s, sstride, xq, ds, groups, rows, o)
		case dtype.Q8_0:
			dotBlocksQ8_0AVX512(c, s, sstride, xq, ds, groups, rows, o)
		case dtype.IQ4_NL:
			dotBlocksIQ4_NLAVX512(c, s, sstride, xq, ds, groups, rows, o)
		case dtype.MXFP4:
			dotBlocksMXFP4AVX512(c, s, sstride, xq, ds, groups, rows, o)
		}
		return rows
	}
	switch t {
	case dtype.Q4_0:
		dotBlocksQ4_0AVX2(c, s, sstride, xq, ds, groups, rows, o)
	case dtype.Q5_0:
		dotBlocksQ5_0AVX2(c, s, sstride, xq, ds, groups, rows, o)
	case dtype.Q5_1:
		dotBlocksQ5_1AVX2(c, s, sstride, xq, ds, groups, rows, o)
	case dtype.Q8_0:
		dotBlocksQ8_0AVX2(c, s, sstride, xq, ds, groups, rows, o)
	case dtype.IQ4_NL:
		dotBlocksIQ4_NLAVX2(c, s, sstride, xq, ds, groups, rows, o)
	case dtype.MXFP4:
		dotBlocksMXFP4AVX2(c, s, sstride, xq, ds, groups, rows, o)
	}
	return rows
}
