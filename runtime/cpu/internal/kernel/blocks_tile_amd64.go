//go:build !purego

package kernel

import (
	"golang.org/x/sys/cpu"

	"github.com/tessera-llm/tessera/models/dtype"
)

// hasTile chooses the tile kernels (blocks_tile_avx512_amd64.h): AVX-512
// with VL, whose 256-bit forms reach registers 16..31; hasVNNI their form
// with VPDPWSSD (a multiply-add of int16 pairs into int32: one instruction
// less a pair and row, the same exact sums).
var (
	hasTile = hasAVX512 && cpu.X86.HasAVX512VL
	hasVNNI = hasTile && cpu.X86.HasAVX512VNNI
)

// The AVX-512 tile kernels, one per type: rows of weights one after the
// other (codes following each other, scale words sstride bytes apart)
// with the four rows of a QTile, the results of tile row r ostride bytes
// after row 0's.

//go:noescape
func dotBlocksQ4_0TileAVX512(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_0TileAVX512(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_1TileAVX512(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ8_0TileAVX512(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksIQ4_NLTileAVX512(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksMXFP4TileAVX512(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ3_KTileAVX512(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ2_KTileAVX512(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ4_0TileVNNI(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_0TileVNNI(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_1TileVNNI(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ8_0TileVNNI(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksIQ4_NLTileVNNI(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksMXFP4TileVNNI(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ3_KTileVNNI(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ2_KTileVNNI(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)

// BlocksTile says whether DotBlocksTile has a vector kernel here; where
// not, DotBlocksRows a row at a time is the faster way.
func BlocksTile() bool { return hasTile }

// dotBlocksTileAsm runs the tile kernel of type t over the rows of weights
// it can take, and returns how many (DotBlocksTile does the rest with the
// twin): as dotBlocksRowsOn, a last row whose last chunk's scale words
// the slice does not reach is left out.
func dotBlocksTileAsm(t dtype.Type, codes, scales []uint32, sstride int, x *QTile, groups, rows int, out []float32, stride int) int {
	if !hasTile || t == dtype.Q4_1 {
		return 0
	}
	l, _ := dtype.Layout(t)
	chunks := (groups + 7) / 8
	if groups%8 != 0 && 4*cap(scales) < 4*(rows-1)*sstride+chunks*8/l.ScaleGroups*l.ScaleBytes {
		rows--
	}
	if rows <= 0 {
		return 0
	}
	c, s, xq, ds, o := &codes[0], &scales[0], &x.Data[0], &x.DS[0], &out[0]
	var hs *float32
	if l.Min == 2 {
		hs = &x.Halves[0]
	}
	sstride *= 4
	os := 4 * stride
	if hasVNNI {
		switch t {
		case dtype.Q4_0:
			dotBlocksQ4_0TileVNNI(c, s, sstride, xq, ds, hs, groups, rows, o, os)
		case dtype.Q5_0:
			dotBlocksQ5_0TileVNNI(c, s, sstride, xq, ds, hs, groups, rows, o, os)
		case dtype.Q5_1:
			dotBlocksQ5_1TileVNNI(c, s, sstride, xq, ds, hs, groups, rows, o, os)
		case dtype.Q8_0:
			dotBlocksQ8_0TileVNNI(c, s, sstride, xq, ds, hs, groups, rows, o, os)
		case dtype.IQ4_NL:
			dotBlocksIQ4_NLTileVNNI(c, s, sstride, xq, ds, hs, groups, rows, o, os)
		case dtype.MXFP4:
			dotBlocksMXFP4TileVNNI(c, s, sstride, xq, ds, hs, groups, rows, o, os)
		case dtype.Q3_K:
			dotBlocksQ3_KTileVNNI(c, s, sstride, xq, ds, hs, groups, rows, o, os)
		case dtype.Q2_K:
			dotBlocksQ2_KTileVNNI(c, s, sstride, xq, ds, hs, groups, rows, o, os)
		}
		return rows
	}
	switch t {
	case dtype.Q4_0:
		dotBlocksQ4_0TileAVX512(c, s, sstride, xq, ds, hs, groups, rows, o, os)
	case dtype.Q5_0:
		dotBlocksQ5_0TileAVX512(c, s, sstride, xq, ds, hs, groups, rows, o, os)
	case dtype.Q5_1:
		dotBlocksQ5_1TileAVX512(c, s, sstride, xq, ds, hs, groups, rows, o, os)
	case dtype.Q8_0:
		dotBlocksQ8_0TileAVX512(c, s, sstride, xq, ds, hs, groups, rows, o, os)
	case dtype.IQ4_NL:
		dotBlocksIQ4_NLTileAVX512(c, s, sstride, xq, ds, hs, groups, rows, o, os)
	case dtype.MXFP4:
		dotBlocksMXFP4TileAVX512(c, s, sstride, xq, ds, hs, groups, rows, o, os)
	case dtype.Q3_K:
		dotBlocksQ3_KTileAVX512(c, s, sstride, xq, ds, hs, groups, rows, o, os)
	case dtype.Q2_K:
		dotBlocksQ2_KTileAVX512(c, s, sstride, xq, ds, hs, groups, rows, o, os)
	default:
		return 0
	}
	return rows
}
