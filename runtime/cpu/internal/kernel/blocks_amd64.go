//go:build !purego

package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// The AVX2 block products (blocks_amd64.s), one per type: the loop of
// dotBlocksGo over whole groups, from and into the twin's accumulators.
// hs is read by Q2_K's alone.

//go:noescape
func dotBlocksQ4_0AVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksQ5_0AVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksQ5_1AVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksQ8_0AVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksIQ4_NLAVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksMXFP4AVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksIQ4_XSAVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksQ4_KAVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksQ5_KAVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksQ6_KAVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksQ3_KAVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

//go:noescape
func dotBlocksQ2_KAVX2(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

type blocksKernel = func(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32)

// blocksAVX2 is the AVX2 kernel of type t, nil for none (Q4_1 takes the
// twin: the engine keeps it in Int4).
func blocksAVX2(t dtype.Type) blocksKernel {
	switch t {
	case dtype.Q4_0:
		return dotBlocksQ4_0AVX2
	case dtype.Q5_0:
		return dotBlocksQ5_0AVX2
	case dtype.Q5_1:
		return dotBlocksQ5_1AVX2
	case dtype.Q8_0:
		return dotBlocksQ8_0AVX2
	case dtype.IQ4_NL:
		return dotBlocksIQ4_NLAVX2
	case dtype.MXFP4:
		return dotBlocksMXFP4AVX2
	case dtype.IQ4_XS:
		return dotBlocksIQ4_XSAVX2
	case dtype.Q4_K:
		return dotBlocksQ4_KAVX2
	case dtype.Q5_K:
		return dotBlocksQ5_KAVX2
	case dtype.Q6_K:
		return dotBlocksQ6_KAVX2
	case dtype.Q3_K:
		return dotBlocksQ3_KAVX2
	case dtype.Q2_K:
		return dotBlocksQ2_KAVX2
	}
	return nil
}

// dotBlocksAsm runs the vector kernel of type t over a row of groups
// groups, adding to acc and macc, and returns how many groups it did
// (dotBlocksGroups does the rest). Its last chunk of eight groups reads
// eight groups' scale words and ds: where the row's slices do not reach
// that far (Blocks and QRow pad their storage for it), that chunk is left
// to the twin.
func dotBlocksAsm(t dtype.Type, codes, scales []uint32, x *QRow, groups int, acc *[2][Lanes]float32, macc *[Lanes]float32) int {
	if !hasAVX2 {
		return 0
	}
	k := blocksAVX2(t)
	if k == nil {
		return 0
	}
	l, _ := dtype.Layout(t)
	chunks := (groups + 7) / 8
	if groups%8 != 0 && (4*cap(scales) < chunks*8/l.ScaleGroups*l.ScaleBytes || cap(x.DS) < 16*chunks) {
		groups &^= 7
	}
	if groups == 0 {
		return 0
	}
	var hs *float32
	if l.Min == 2 {
		hs = &x.Halves[0]
	}
	k(&codes[0], &scales[0], &x.Codes[0], &x.DS[0], hs, groups, acc, macc)
	return groups
}
