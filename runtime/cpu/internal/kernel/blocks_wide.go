package kernel

import (
	"unsafe"

	"github.com/tessera-llm/tessera/models/dtype"
)

// The wide kernel: a block of WideRows weight rows with many rows of
// activations, the weight rows in a vector's lanes. The tile kernels
// (blocks_tile.go) give each row pair a vector of sixteen lanes, two
// groups of eight, and so pay per pair of groups and rows the sums of
// those lanes to each group's (a transpose shared by four rows), its
// scaling and its sum, and the weight row's unpacking shared by eight
// rows. With the sixteen weight rows in the lanes instead, a group's
// integer sum is sixteen multiply-adds into one vector for all sixteen
// weight rows, its f32(S·d) is one product, and the unpacking is done
// once for every row of activations: the codes are expanded to int16
// pairs, a vector of one pair of every weight row, once for a block of
// columns (expandWide: the nibble types a group of the sixteen rows at a
// time, the others a row at a time, then transposeWide), and each row of
// activations then costs about 22 instructions a group for the sixteen
// weight rows (the pair of codes broadcast from the row). Every sum,
// product and fold is dotBlocksGo's, so the results are its bits.
// Expanding costs about what the products of a few rows save, so the
// kernel serves prompts and steps of many sequences (WideMin rows or
// more).
//
// The K quants (Q2_K to Q6_K, IQ4_XS) take the same walk with their own
// definition (dotBlocksKGo): their rows expand as the one-row loop
// unpacks them, each code times its half group's factor (expandKWide;
// exact in int16), with each super-block's eight mins (Q2_K's sixteen)
// and d as vectors of the sixteen rows, and each half group's sixteen
// integer sums f·half then take a conversion, the scaling by f32(d·D)
// and the sum into the half's lane (dotWideKVNNI): 16 multiply-adds and
// 6 float operations a group for the sixteen weight rows (Q4_0's: 16 and
// 3), where the four-row tile kernel spends about twice that a row.
//
// CPUs with AVX2 and no AVX-512 (most desktops: Intel's client cores, AMD's
// before Zen 4) have no tile kernels and ran prompts through the one-row
// kernel, which unpacks every weight row again for each row of
// activations. The AVX2 form (wideAVX2) takes the same walk and layout:
// each type's rows expand a row at a time with its AVX2 one-row loop's
// unpacking, transposeWideAVX2 turns them, and the sixteen weight rows are
// two vectors of eight, with the lanes (more than AVX2's sixteen
// registers) in WideScratch.acc. Each pair's multiply-add is a VPMADDWD
// and a VPADDD, or one VPDPWSSD where the CPU has AVX-VNNI (wideAVXVNNI).
// The same bits again.

// WideRows is the weight rows a call of DotBlocksWide takes: a vector's
// sixteen lanes.
const WideRows = 16

// WideMin is the fewest rows of activations (four a QTile) for which
// DotBlocksWide's expansion of type t pays: 8 where it writes the codes'
// layout at once (the nibble types), 16 where they go through
// transposeWide, the K quants' too (BenchmarkBlocksWide against
// DotBlocksTile8: Q4_K at 8 rows 39 G against the tile kernel's 45, at 16
// rows 48 against 42). The AVX2 form's is 8: there the alternative is the
// one-row kernel (Q4_K 2048 wide at 8 rows: 29 G against 23).
func WideMin(t dtype.Type) int {
	if wideDirect(t) || wideFormFor(t).avx2() {
		return 8
	}
	return 16
}

// TilesFor says whether products of type t with m rows of activations
// want the rows packed as tiles (QTile): where the tile kernels run, or
// where the wide kernel takes t and m rows pay for it (WideMin).
func TilesFor(t dtype.Type, m int) bool {
	if m < TileRows {
		return false
	}
	return BlocksTile() || wideFormFor(t) != wideNone && m >= WideMin(t)
}

// WideRowBytes is what DotBlocksWide keeps of each row of activations
// between blocks of columns of a wide input (its sixteen weight rows'
// eight lanes, a group's place in its chunk of eight): 512 bytes.
// WideKRowBytes is the K quants' (dotBlocksKGo's sixteen lanes of half
// groups and eight of mins): 1536.
const (
	WideRowBytes  = Lanes * WideRows * 4
	WideKRowBytes = 3 * Lanes * WideRows * 4
)

// wideGroups is the groups of a row the wide kernel expands at once: 24
// KiB of expanded codes, which stay in L1 beside a QTile's codes of them
// while each tile of activations passes. A multiple of 8 (a chunk's
// scales decode whole).
const wideGroups = 24

// WideScratch is the memory DotBlocksWide works in: one a goroutine.
type WideScratch struct {
	codes  []int32   // a block of columns' codes, 2 KiB a pair of groups
	scales []float32 // its scales, a vector of 16 a group (made in blocks of 16 groups)
	acc    []float32 // each activation row's lanes between blocks of columns
	pad    []uint32  // a matrix's last scale words, with room for a chunk's reading
}

// DotBlocksWide sets out[r·stride + j] to the dot product of row r0 + j
// of w with row r of the tiles ts (row r%TileRows of ts[r/TileRows]), for
// j < rows (a multiple of WideRows), with DotBlocksRows's bits, and
// reports whether it could: it takes the types with an eight-row tile
// kernel and the K quants (rows of whole super-blocks, tiles with their
// K codes), on CPUs with AVX-512 VNNI or with AVX2 and no AVX-512
// (wideFormFor), and whole blocks of rows. The caller falls back to the
// tile kernels where it cannot (on AVX2, the one-row kernel a row of the
// tiles at a time). Where the rows
// are wider than a block of columns, the blocks of weight rows (up to
// wideBlocks of them) take each block of columns in turn, so that the
// activations' part stays in the core's cache for all of them: an input
// 8192 wide has 2 MiB of activation rows at a step of 128, which one
// block of weight rows at a time read from beyond the cache for every
// block.
func DotBlocksWide(w *dtype.Blocks, r0, rows int, ts []QTile, out []float32, stride int, s *WideScratch) bool {
	return dotBlocksWide(wideFormFor(w.Type), w, r0, rows, ts, out, stride, s)
}

// wideForm is the instructions a wide kernel runs in.
type wideForm int

const (
	wideNone    wideForm = iota
	wideVNNI             // AVX-512 with VNNI: the sixteen weight rows a vector
	wideAVX2             // AVX2, for CPUs without AVX-512: two vectors of eight rows, the lanes in memory
	wideAVXVNNI          // AVX2's with AVX-VNNI's VPDPWSSD for VPMADDWD and VPADDD
)

// avx2 says whether form f is one of AVX2's (the expansions of
// blocks_wide_rows_amd64.h and blocks_k_wide_amd64.h with KWAVX2, the
// products of blocks_wide_dot_avx2_amd64.h).
func (f wideForm) avx2() bool { return f == wideAVX2 || f == wideAVXVNNI }

// dotBlocksWide is DotBlocksWide in form f.
func dotBlocksWide(f wideForm, w *dtype.Blocks, r0, rows int, ts []QTile, out []float32, stride int, s *WideScratch) bool {
	G := w.Groups()
	if !wideTakes(f, w.Type) || G == 0 || len(ts) == 0 || rows <= 0 || rows%WideRows != 0 || r0+rows > w.Rows {
		return false
	}
	k := KType(w.Type)
	if k && !wideKReady(G, ts, w.Layout().Min == 2) {
		return false
	}
	l := w.Layout()
	cw, sw := G*l.CodeWords, w.RowScaleWords()
	chunkWords := 8 / l.ScaleGroups * l.ScaleBytes / 4
	_ = out[(len(ts)*TileRows-1)*stride+rows-1]
	g := min(G, wideGroups)
	s.codes = grow(s.codes, (g+1)/2*512)
	rowBytes := WideRowBytes
	if k {
		s.scales = grow(s.scales, g/kGroups*kScaleFloats(l))
		rowBytes = WideKRowBytes
	} else {
		s.scales = grow(s.scales, (g+15)/16*16*WideRows)
	}
	nb := rows / WideRows
	lanes := len(ts) * TileRows * rowBytes / 4 // a block's rows of lanes
	inAcc := G > wideGroups || f.avx2()        // the lanes kept in s.acc
	if inAcc {
		s.acc = grow(s.acc, nb*lanes)
	}
	for g0 := 0; g0 < G; g0 += wideGroups {
		n := min(wideGroups, G-g0)
		mode := 0
		if g0 > 0 {
			mode |= 1
		}
		if g0+n == G {
			mode |= 2
		}
		for b := range nb {
			rb := r0 + b*WideRows
			codes, scales := w.Codes[rb*cw:(rb+WideRows)*cw], w.Scales[rb*sw:]
			if chunks := (G + 7) / 8; (k || G%8 != 0) && 4*cap(scales) < 4*(WideRows-1)*sw+chunks*8/l.ScaleGroups*l.ScaleBytes+4 {
				// The expansion reads a chunk's scale words whole (and
				// Q4_K's and Q5_K's decoding 4 bytes on), past the
				// matrix's last ones here: the block's go to scratch with
				// room.
				s.pad = grow(s.pad, WideRows*sw+chunkWords+1)
				copy(s.pad, scales[:WideRows*sw])
				scales = s.pad
			}
			if k {
				expandKWide(f, w.Type, &codes[g0*l.CodeWords], &scales[0], G, g0, 4*cw, 4*sw, n, &s.codes[0], &s.scales[0])
				transposeWideOf(f, unsafe.Pointer(&s.codes[0]), n)
				transposeWideOf(f, unsafe.Pointer(&s.scales[0]), n/kGroups*kScaleFloats(l)/256)
			} else {
				expandWide(f, w.Type, &codes[g0*l.CodeWords], &scales[g0/8*chunkWords], 4*cw, 4*sw, n, &s.codes[0], &s.scales[0])
				if f.avx2() || !wideDirect(w.Type) {
					transposeWideOf(f, unsafe.Pointer(&s.codes[0]), (n+1)/2*2)
				}
				transposeWideOf(f, unsafe.Pointer(&s.scales[0]), (n+15)/16)
			}
			// What the next expansion reads (the next block's columns,
			// or the first block's next ones, or the next call's first
			// block), asked for a few rows at a time while these
			// products run: at a step of few rows the expansion is where
			// the weights come from memory, and in a burst it waited on
			// each line.
			rn, gn := rb+WideRows, g0
			if b == nb-1 {
				rn, gn = r0, g0+n
				if gn == G {
					rn, gn = r0+rows, 0
				}
			}
			if rn+WideRows > w.Rows {
				rn = -1
			}
			for t := range ts {
				if rn >= 0 {
					for j := t * WideRows / len(ts); j < (t+1)*WideRows/len(ts); j++ {
						prefetchWide(w, rn+j, gn, min(wideGroups, G-gn), cw, sw, l.CodeWords, chunkWords)
					}
				}
				var acc *float32
				if inAcc {
					acc = &s.acc[b*lanes+t*TileRows*rowBytes/4]
				}
				o := &out[t*TileRows*stride+b*WideRows]
				if k {
					x := &ts[t]
					kmode, sums := mode, &x.KSums[g0*TileRows]
					switch l.Min {
					case 1:
						kmode |= 4
					case 2:
						kmode, sums = kmode|8, &x.Halves[2*g0*TileRows]
					}
					dotWideK(f, &s.codes[0], &s.scales[0], &x.KCodes[g0*Group], 2*len(x.KCodes)/TileRows, &x.KD[g0/kGroups*TileRows], sums, n, acc, kmode, o, 4*stride)
				} else {
					dotWide(f, &s.codes[0], &s.scales[0], &ts[t].Data[g0/2*tilePair], n, acc, mode, o, 4*stride)
				}
			}
		}
	}
	return true
}

// wideKReady says whether the K quants' wide kernel takes a product of
// rows of G groups with the tiles ts: whole super-blocks (every K quant
// file's rows are), the tiles' K codes packed, and where the mins are a
// half group's (halves), the tiles' half sums.
func wideKReady(G int, ts []QTile, halves bool) bool {
	if G%kGroups != 0 {
		return false
	}
	for i := range ts {
		if !ts[i].hasK || halves && len(ts[i].Halves) == 0 {
			return false
		}
	}
	return true
}

// kScaleFloats is the floats of a K quant's super-block that the wide
// kernel's scales take for sixteen weight rows: a 16×16 block of their
// eight mins and d, or two for Q2_K's sixteen mins (one a half group).
func kScaleFloats(l dtype.BlockLayout) int {
	if l.Min == 2 {
		return 512
	}
	return 256
}

// WideBlocksFor is the rows of weights (whole blocks of WideRows, up to
// wideBlocks of them) a call of DotBlocksWide with m rows of activations
// takes at once: as many as keep each block's lanes of the m rows
// (WideRowBytes a row) within wideAccBytes.
func WideBlocksFor(m int) int {
	if m < 64 {
		return WideRows
	}
	return WideRows * max(1, min(wideBlocks, wideAccBytes/(m*WideRowBytes)))
}

// wideBlocks and wideAccBytes bound the blocks of weight rows a call of
// DotBlocksWide takes: their lanes of a step's rows (512 bytes a row and
// block), beside a block of columns' activations (about 2 KiB a row),
// stay in a core's L2 (2 MiB on the Xeon measured).
const (
	wideBlocks   = 4
	wideAccBytes = 512 << 10
)

// prefetchWide asks for the codes and scale words of groups g0..g0+n (a
// block of columns) of row r of w: what expandWide reads of it.
func prefetchWide(w *dtype.Blocks, r, g0, n, cw, sw, codeWords, chunkWords int) {
	if !hasPrefetch {
		return
	}
	at := r*cw + g0*codeWords
	prefetchWords(w.Codes[at : at+n*codeWords])
	sc := r*sw + g0/8*chunkWords
	prefetchWords(w.Scales[sc:min(sc+(n+7)/8*chunkWords, (r+1)*sw)])
}

// prefetchWords is Prefetch of words.
func prefetchWords(x []uint32) {
	if len(x) > 0 {
		prefetch((*float32)(unsafe.Pointer(&x[0])), len(x))
	}
}
