//go:build !purego

package kernel

import (
	"golang.org/x/sys/cpu"

	"github.com/tessera-llm/tessera/models/dtype"
)

// hasKVNNI chooses the form of the K quants' AVX-512 kernels with
// VPDPWSSD (AVX-512 VNNI): the multiply-add of int16 pairs into int32
// lanes in one instruction, the same exact sums as VPMADDWD and VPADDD.
var hasKVNNI = hasAVX512 && cpu.X86.HasAVX512VNNI

// The K quants' products (dotBlocksKGo) of rows of weights one after the
// other (codes following each other, scale words sstride bytes apart)
// with one row of activations (xq its KCodes, kd its KD, sums its KSums), a
// result for each into out; rows of whole super-blocks (groups a multiple
// of 8).

//go:noescape
func dotBlocksQ4_KIntAVX2(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ5_KIntAVX2(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ6_KIntAVX2(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ2_KIntAVX2(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ3_KIntAVX2(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksIQ4_XSIntAVX2(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ4_KIntAVX512(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ4_KIntVNNI(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ5_KIntAVX512(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ5_KIntVNNI(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ6_KIntAVX512(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ6_KIntVNNI(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ2_KIntAVX512(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ2_KIntVNNI(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ3_KIntAVX512(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksQ3_KIntVNNI(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksIQ4_XSIntAVX512(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

//go:noescape
func dotBlocksIQ4_XSIntVNNI(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)

// dotBlocksKRowsOn is dotBlocksRowsOn for the K types: the rows it did
// (none where the row has a partial super-block, which the twin takes, or
// where path has no K kernel). Q4_K's and Q5_K's scale decoding reads 16
// bytes from a super-block's fourth: 4 past a row's end, which a last row
// must have room for.
func dotBlocksKRowsOn(path string, t dtype.Type, codes, scales []uint32, sstride int, x *QRow, groups int, out []float32) int {
	rows := len(out)
	if groups%kGroups != 0 || rows == 0 || (path != "avx512" && path != "avx2") {
		return 0
	}
	if cap(scales) < rows*sstride+1 {
		rows--
	}
	if rows <= 0 {
		return 0
	}
	sums := minSums(t, x.KSums, x.Halves)
	if sums == nil {
		return 0
	}
	c, s, xq, kd, ds, o := &codes[0], &scales[0], &x.KCodes[0], &x.KD[0], &sums[0], &out[0]
	sstride *= 4
	switch {
	case path == "avx2":
		switch t {
		case dtype.Q4_K:
			dotBlocksQ4_KIntAVX2(c, s, sstride, xq, kd, ds, groups, rows, o)
		case dtype.Q5_K:
			dotBlocksQ5_KIntAVX2(c, s, sstride, xq, kd, ds, groups, rows, o)
		case dtype.Q6_K:
			dotBlocksQ6_KIntAVX2(c, s, sstride, xq, kd, ds, groups, rows, o)
		case dtype.IQ4_XS:
			dotBlocksIQ4_XSIntAVX2(c, s, sstride, xq, kd, ds, groups, rows, o)
		case dtype.Q3_K:
			dotBlocksQ3_KIntAVX2(c, s, sstride, xq, kd, ds, groups, rows, o)
		case dtype.Q2_K:
			dotBlocksQ2_KIntAVX2(c, s, sstride, xq, kd, ds, groups, rows, o)
		default:
			return 0
		}
	case t == dtype.Q4_K && hasKVNNI:
		dotBlocksQ4_KIntVNNI(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.Q4_K:
		dotBlocksQ4_KIntAVX512(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.Q5_K && hasKVNNI:
		dotBlocksQ5_KIntVNNI(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.Q5_K:
		dotBlocksQ5_KIntAVX512(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.Q6_K && hasKVNNI:
		dotBlocksQ6_KIntVNNI(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.Q6_K:
		dotBlocksQ6_KIntAVX512(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.IQ4_XS && hasKVNNI:
		dotBlocksIQ4_XSIntVNNI(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.IQ4_XS:
		dotBlocksIQ4_XSIntAVX512(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.Q3_K && hasKVNNI:
		dotBlocksQ3_KIntVNNI(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.Q3_K:
		dotBlocksQ3_KIntAVX512(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.Q2_K && hasKVNNI:
		dotBlocksQ2_KIntVNNI(c, s, sstride, xq, kd, ds, groups, rows, o)
	case t == dtype.Q2_K:
		dotBlocksQ2_KIntAVX512(c, s, sstride, xq, kd, ds, groups, rows, o)
	default:
		return 0
	}
	return rows
}

// The K quants' four-row kernels (blocks_k_tile_avx512_amd64.h): rows of
// weights as dotBlocksKRowsOn's with the four rows of a QTile (xq its
// KCodes, the rows xstride bytes apart; kd, sums its KD and KSums), the
// results of activation row r ostride bytes after row 0's.

//go:noescape
func dotBlocksQ4_KTileIntAVX512(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ4_KTileIntVNNI(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_KTileIntAVX512(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ5_KTileIntVNNI(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ6_KTileIntAVX512(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ6_KTileIntVNNI(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ2_KTileIntAVX512(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ2_KTileIntVNNI(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ3_KTileIntAVX512(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksQ3_KTileIntVNNI(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksIQ4_XSTileIntAVX512(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

//go:noescape
func dotBlocksIQ4_XSTileIntVNNI(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)

// dotBlocksKTileAsm runs the K quants' tile kernel over the rows of
// weights it can take and returns how many (DotBlocksTile does the rest a
// row at a time): none without the tile kernels or where the rows have a
// partial super-block; a last row whose scale decoding would read past
// the slice is left out.
func dotBlocksKTileAsm(t dtype.Type, codes, scales []uint32, sstride int, x *QTile, groups, rows int, out []float32, stride int) int {
	if !hasTile || groups%kGroups != 0 || rows <= 0 {
		return 0
	}
	if cap(scales) < rows*sstride+1 {
		rows--
	}
	if rows <= 0 {
		return 0
	}
	ps := minSums(t, x.KSums, x.Halves)
	if ps == nil {
		return 0
	}
	c, s, xq, kd, sums, o := &codes[0], &scales[0], &x.KCodes[0], &x.KD[0], &ps[0], &out[0]
	xs := 2 * len(x.KCodes) / TileRows
	sstride *= 4
	os := 4 * stride
	switch {
	case t == dtype.Q4_K && hasKVNNI:
		dotBlocksQ4_KTileIntVNNI(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.Q4_K:
		dotBlocksQ4_KTileIntAVX512(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.Q5_K && hasKVNNI:
		dotBlocksQ5_KTileIntVNNI(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.Q5_K:
		dotBlocksQ5_KTileIntAVX512(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.Q6_K && hasKVNNI:
		dotBlocksQ6_KTileIntVNNI(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.Q6_K:
		dotBlocksQ6_KTileIntAVX512(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.IQ4_XS && hasKVNNI:
		dotBlocksIQ4_XSTileIntVNNI(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.IQ4_XS:
		dotBlocksIQ4_XSTileIntAVX512(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.Q3_K && hasKVNNI:
		dotBlocksQ3_KTileIntVNNI(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.Q3_K:
		dotBlocksQ3_KTileIntAVX512(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.Q2_K && hasKVNNI:
		dotBlocksQ2_KTileIntVNNI(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	case t == dtype.Q2_K:
		dotBlocksQ2_KTileIntAVX512(c, s, sstride, xq, xs, kd, sums, groups, rows, o, os)
	default:
		return 0
	}
	return rows
}
