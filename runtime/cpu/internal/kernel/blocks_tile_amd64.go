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
func dotBlocksQ4_0TileAVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_0TileAVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_1TileAVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ8_0TileAVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksIQ4_NLTileAVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksMXFP4TileAVX512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ4_0TileVNNI(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_0TileVNNI(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_1TileVNNI(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ8_0TileVNNI(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksIQ4_NLTileVNNI(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksMXFP4TileVNNI(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)

// The eight-row tile kernels (two QTiles) of the types without mins: as
// the four-row ones, the second tile's results 4·ostride bytes after the
// first's, over groups groups of each row (the row's codes cstride bytes
// after the last row's), the lanes carried in acc (512 bytes a row of
// weights) from the columns before where mode&1, and left there for the
// next columns unless mode&2, where the rows' results are stored.

//go:noescape
func dotBlocksQ4_0Tile8AVX512(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)

//go:noescape
func dotBlocksQ4_0Tile8VNNI(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_0Tile8AVX512(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_0Tile8VNNI(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)

//go:noescape
func dotBlocksQ8_0Tile8AVX512(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)

//go:noescape
func dotBlocksQ8_0Tile8VNNI(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)

//go:noescape
func dotBlocksIQ4_NLTile8AVX512(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)

//go:noescape
func dotBlocksIQ4_NLTile8VNNI(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)

//go:noescape
func dotBlocksMXFP4Tile8AVX512(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)

//go:noescape
func dotBlocksMXFP4Tile8VNNI(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)

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
	sstride *= 4
	os := 4 * stride
	if hasVNNI {
		switch t {
		case dtype.Q4_0:
			dotBlocksQ4_0TileVNNI(c, s, sstride, xq, ds, groups, rows, o, os)
		case dtype.Q5_0:
			dotBlocksQ5_0TileVNNI(c, s, sstride, xq, ds, groups, rows, o, os)
		case dtype.Q5_1:
			dotBlocksQ5_1TileVNNI(c, s, sstride, xq, ds, groups, rows, o, os)
		case dtype.Q8_0:
			dotBlocksQ8_0TileVNNI(c, s, sstride, xq, ds, groups, rows, o, os)
		case dtype.IQ4_NL:
			dotBlocksIQ4_NLTileVNNI(c, s, sstride, xq, ds, groups, rows, o, os)
		case dtype.MXFP4:
			dotBlocksMXFP4TileVNNI(c, s, sstride, xq, ds, groups, rows, o, os)
		}
		return rows
	}
	switch t {
	case dtype.Q4_0:
		dotBlocksQ4_0TileAVX512(c, s, sstride, xq, ds, groups, rows, o, os)
	case dtype.Q5_0:
		dotBlocksQ5_0TileAVX512(c, s, sstride, xq, ds, groups, rows, o, os)
	case dtype.Q5_1:
		dotBlocksQ5_1TileAVX512(c, s, sstride, xq, ds, groups, rows, o, os)
	case dtype.Q8_0:
		dotBlocksQ8_0TileAVX512(c, s, sstride, xq, ds, groups, rows, o, os)
	case dtype.IQ4_NL:
		dotBlocksIQ4_NLTileAVX512(c, s, sstride, xq, ds, groups, rows, o, os)
	case dtype.MXFP4:
		dotBlocksMXFP4TileAVX512(c, s, sstride, xq, ds, groups, rows, o, os)
	default:
		return 0
	}
	return rows
}

// tile8Groups is the groups of a row an eight-row kernel call takes at
// once (768 columns): the eight rows' codes and ds of them (18 KiB) and a
// call's 16 rows of weights stay in the core's 32 KiB L1 together, where
// the whole width of a wide matrix (an 8192-wide down projection: 192 KiB
// of activations a weight row) streams from L2 for every weight row and
// the kernel waits on it: 8192 wide, 32 against 45 GMAC a CPU second
// (one Zen 4 core, Q4_0; 16 and 32 groups measured within noise of 24).
// A multiple of 8: a chunk's scales decode whole.
const tile8Groups = 24

// dotBlocksTile8Asm runs the eight-row tile kernel of type t over the
// rows of weights it can take with the tiles x0 and x1, and returns how
// many: none for the types without one (DotBlocksTile8 then takes the
// tiles one at a time), and, as dotBlocksTileAsm, not a last row whose
// last chunk's scale words the slice does not reach. It takes the columns
// tile8Groups groups at a time for up to blocksRows rows of weights, the
// lanes carried between the calls: each lane's sums go on in the same
// order, so the results are the same bits.
func dotBlocksTile8Asm(t dtype.Type, codes, scales []uint32, sstride int, x0, x1 *QTile, groups, rows int, out []float32, stride int) int {
	if !hasTile {
		return 0
	}
	switch t {
	case dtype.Q4_0, dtype.Q5_0, dtype.Q8_0, dtype.IQ4_NL, dtype.MXFP4:
	default:
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
	cw := groups * l.CodeWords
	if groups <= tile8Groups {
		// One block of columns (mode 2): the kernel neither loads nor
		// stores lanes, so it needs no acc, whose 8 KiB Go would clear a
		// call (5% of a 576-wide product's time).
		tile8(t, &codes[0], &scales[0], 4*cw, 4*sstride, &x0.Data[0], &x1.Data[0], nil, groups, rows, 2, &out[0], 4*stride)
		return rows
	}
	tile8Blocks(t, codes, scales, sstride, x0, x1, groups, rows, out, stride, l.CodeWords, 8/l.ScaleGroups*l.ScaleBytes/4)
	return rows
}

// tile8Blocks is dotBlocksTile8Asm of rows wider than tile8Groups groups
// (cw code words and chunkWords scale words a chunk of a row's groups).
func tile8Blocks(t dtype.Type, codes, scales []uint32, sstride int, x0, x1 *QTile, groups, rows int, out []float32, stride, codeWords, chunkWords int) {
	cw := groups * codeWords
	var acc [blocksRows * 2 * TileRows * 16]float32
	for r := 0; r < rows; r += blocksRows {
		n := min(blocksRows, rows-r)
		for g0 := 0; g0 < groups; g0 += tile8Groups {
			g := min(tile8Groups, groups-g0)
			mode := 0
			if g0 > 0 {
				mode |= 1
			}
			if g0+g == groups {
				mode |= 2
			}
			tile8(t, &codes[r*cw+g0*codeWords], &scales[r*sstride+g0/8*chunkWords], 4*cw, 4*sstride,
				&x0.Data[g0/2*tilePair], &x1.Data[g0/2*tilePair], &acc[0], g, n, mode, &out[r], 4*stride)
		}
	}
}

// blocksRows is the rows of weights whose lanes dotBlocksTile8Asm carries
// from one call to the next: runtime/cpu's tile of 16.
const blocksRows = 16

// tile8 calls type t's eight-row kernel (VNNI's where the CPU has it), in
// direct calls: through a function value, acc would escape to the heap.
func tile8(t dtype.Type, c, s *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int) {
	switch {
	case t == dtype.Q4_0 && hasVNNI:
		dotBlocksQ4_0Tile8VNNI(c, s, cstride, sstride, xq, xq1, acc, groups, rows, mode, out, ostride)
	case t == dtype.Q4_0:
		dotBlocksQ4_0Tile8AVX512(c, s, cstride, sstride, xq, xq1, acc, groups, rows, mode, out, ostride)
	case t == dtype.Q5_0 && hasVNNI:
		dotBlocksQ5_0Tile8VNNI(c, s, cstride, sstride, xq, xq1, acc, groups, rows, mode, out, ostride)
	case t == dtype.Q5_0:
		dotBlocksQ5_0Tile8AVX512(c, s, cstride, sstride, xq, xq1, acc, groups, rows, mode, out, ostride)
	case t == dtype.Q8_0 && hasVNNI:
		dotBlocksQ8_0Tile8VNNI(c, s, cstride, sstride, xq, xq1, acc, groups, rows, mode, out, ostride)
	case t == dtype.Q8_0:
		dotBlocksQ8_0Tile8AVX512(c, s, cstride, sstride, xq, xq1, acc, groups, rows, mode, out, ostride)
	case t == dtype.IQ4_NL && hasVNNI:
		dotBlocksIQ4_NLTile8VNNI(c, s, cstride, sstride, xq, xq1, acc, groups, rows, mode, out, ostride)
	case t == dtype.IQ4_NL:
		dotBlocksIQ4_NLTile8AVX512(c, s, cstride, sstride, xq, xq1, acc, groups, rows, mode, out, ostride)
	case t == dtype.MXFP4 && hasVNNI:
		dotBlocksMXFP4Tile8VNNI(c, s, cstride, sstride, xq, xq1, acc, groups, rows, mode, out, ostride)
	default:
		dotBlocksMXFP4Tile8AVX512(c, s, cstride, sstride, xq, xq1, acc, groups, rows, mode, out, ostride)
	}
}
