package kernel

import (
	"math"

	"github.com/tessera-llm/tessera/models/dtype"
)

// The block products of many activation rows (a prompt, or a step of many
// sequences): llama.cpp's GEMM idea in the shape of this package's exact
// arithmetic. A weight row's codes are unpacked and its scales decoded
// once for TileRows activation rows, whose products, scaling and sums are
// then those of DotBlocksRows one by one, so that every result has
// dotBlocksGo's bits whatever the number of rows and however they are
// tiled: the greedy tokens of a batch stay those of each sequence alone.

// TileRows is how many activation rows a tile kernel takes at once: four
// accumulators and four chunks of scales fill eight of AVX-512's 32
// registers beside the one-row loop's.
const TileRows = 4

// QTile is TileRows quantized rows of activations packed as the tile
// kernel reads them (blocks_tile_avx512_amd64.h). Data holds, per pair
// of groups, the rows' 64 codes one after the other (a row's codes lie
// as in QRow), then the rows' d of the pair (f32 bits in two int16: the
// even group's of rows 0..3 twice, then the odd one's, in a slot of
// tileD a row); a last group without a partner likewise, its codes 32 a
// row. DS holds per chunk of eight groups the rows' 16 ds (d and
// sum per group, as QRow.DS), Halves their 16 half sums (for Q2_K) alike,
// zero past a row's last group. Made once a product (Pack), it serves
// every weight row.
type QTile struct {
	Cols   int
	Data   []int16
	DS     []float32
	Halves []float32 // where the rows have them (QRow.SumHalves)

	// The K quants' activations (QRow.KCodes, KD, KSums) of the rows,
	// packed for their tile kernel (blocks_k_tile_avx512_amd64.h): the
	// rows' KCodes one after the other; per super-block the rows' KD, then
	// their eight group sums each.
	KCodes []int16
	KD     []float32
	KSums  []float32

	// The rows themselves, which the twin reads: valid while they are.
	rows [TileRows]*QRow
	hasK bool // KCodes, KD and KSums hold the rows' (all rows had them)
}

// Per pair of groups, the int16 slots of a tile row's codes and of its
// spread d, and of the whole pair.
const (
	tileCodes = 2 * Group
	tileD     = 32
	tilePair  = TileRows * (tileCodes + tileD)
)

// Pack sets t to the rows xs, which must have the same width; their
// per-super-block codes too where they all have them (QRow.HasK), else
// PackK adds them once they do.
func (t *QTile) Pack(xs *[TileRows]*QRow) {
	x0 := xs[0]
	t.Cols = x0.Cols
	t.rows = *xs
	t.hasK = false
	t.PackK()
	G := x0.Groups()
	chunks := (G + 7) / 8
	pairs := (G + 1) / 2
	t.Data = grow(t.Data, pairs*tilePair)
	t.DS = grow(t.DS, TileRows*chunks*16)
	clear(t.DS)
	halves := len(x0.Halves) > 0
	if halves {
		t.Halves = grow(t.Halves, TileRows*chunks*16)
		clear(t.Halves)
	} else {
		t.Halves = t.Halves[:0]
	}
	for r, x := range xs {
		for p := range pairs {
			base := p * tilePair
			n := tileCodes
			if 2*p+1 == G { // a lone last group
				n = Group
			}
			copy(t.Data[base+r*n:base+(r+1)*n], x.Codes[p*tileCodes:])
			// The rows' d of the pair as f32 bits: the even group's for
			// rows 0..3 twice, then the odd one's (0 past the last group).
			d := t.Data[base+TileRows*n : base+TileRows*n+2*16]
			for h := range 2 {
				var u uint32
				if g := 2*p + h; g < G {
					u = math.Float32bits(x.DS[2*g])
				}
				for _, l := range [2]int{8*h + r, 8*h + 4 + r} {
					d[2*l], d[2*l+1] = int16(uint16(u)), int16(uint16(u>>16))
				}
			}
		}
		for c := range chunks {
			copy(t.DS[(c*TileRows+r)*16:], x.DS[c*16:min(len(x.DS), (c+1)*16)])
			if halves {
				copy(t.Halves[(c*TileRows+r)*16:], x.Halves[c*16:min(len(x.Halves), (c+1)*16)])
			}
		}
	}
}

// PackK packs the rows' K quant activations (KCodes, KD, KSums), where
// every row has them and t does not yet.
func (t *QTile) PackK() {
	xs := &t.rows
	if t.hasK {
		return
	}
	for _, x := range xs {
		if !x.hasK {
			return
		}
	}
	t.hasK = true
	n, nb := len(xs[0].KCodes), len(xs[0].KD)
	t.KCodes = grow(t.KCodes, TileRows*n)
	t.KD = grow(t.KD, TileRows*nb)
	t.KSums = grow(t.KSums, TileRows*nb*kGroups)
	clear(t.KSums)
	for r, x := range xs {
		copy(t.KCodes[r*n:(r+1)*n], x.KCodes)
		for b, d := range x.KD {
			t.KD[b*TileRows+r] = d
			copy(t.KSums[(b*TileRows+r)*kGroups:(b*TileRows+r+1)*kGroups], x.KSums[b*kGroups:min(len(x.KSums), (b+1)*kGroups)])
		}
	}
}

// Groups is ceil(Cols/32).
func (t *QTile) Groups() int { return (t.Cols + Group - 1) / Group }

// row returns row r of t as a QRow (the twin's view of it), reusing q.
func (t *QTile) row(r int, q *QRow) {
	G := t.Groups()
	q.Resize(t.Cols)
	for p := range (G + 1) / 2 {
		n := tileCodes
		if 2*p+1 == G {
			n = Group
		}
		copy(q.Codes[p*tileCodes:p*tileCodes+n], t.Data[p*tilePair+r*n:])
	}
	for g := range G {
		c, i := g/8, g%8
		q.DS[2*g], q.DS[2*g+1] = t.DS[(c*TileRows+r)*16+2*i], t.DS[(c*TileRows+r)*16+2*i+1]
	}
}

// DotBlocksTile sets out[r·stride + j] to the dot product of row r0 + j of
// w with row r of the tile x, for j < rows: DotBlocksRows's bits, with the
// AVX-512 tile kernel where the CPU has it, and DotBlocksRows of the
// tile's rows elsewhere and for the rows the kernel cannot take (on CPUs
// with AVX2 alone, tiles serve the wide kernel, and this the rows it
// leaves).
func DotBlocksTile(w *dtype.Blocks, r0, rows int, x *QTile, out []float32, stride int) {
	G := w.Groups()
	if rows <= 0 {
		return
	}
	_ = out[(TileRows-1)*stride+rows-1]
	if G == 0 {
		for r := range TileRows {
			clear(out[r*stride : r*stride+rows])
		}
		return
	}
	cw, sw := G*w.Layout().CodeWords, w.RowScaleWords()
	codes, scales := w.Codes[r0*cw:(r0+rows)*cw], w.Scales[r0*sw:]
	var done int
	if KType(w.Type) {
		if !x.hasK {
			panic("kernel: a K quant's product needs the tile's rows with QRow.QuantizeK, then QTile.PackK")
		}
		done = dotBlocksKTileAsm(w.Type, codes, scales, sw, x, G, rows, out, stride)
	} else {
		done = dotBlocksTileAsm(w.Type, codes, scales, sw, x, G, rows, out, stride)
	}
	if done < rows {
		for r, q := range x.rows {
			DotBlocksRows(w, r0+done, q, out[r*stride+done:r*stride+rows])
		}
	}
}

// DotBlocksTile8 is DotBlocksTile of two tiles, x0's rows' results at
// out[r·stride + j] and x1's at out[(TileRows+r)·stride + j]: where the
// CPU has the eight-row kernel of w's type (Q4_0, Q5_0, Q8_0, IQ4_NL,
// MXFP4: no mins), each weight row unpacks once for the eight rows, and
// wide rows go a block of columns at a time (each lane's sums carried
// from one block to the next, so in the same order); elsewhere the tiles
// go one after the other. The same bits either way.
func DotBlocksTile8(w *dtype.Blocks, r0, rows int, x0, x1 *QTile, out []float32, stride int) {
	G := w.Groups()
	if rows <= 0 {
		return
	}
	_ = out[(2*TileRows-1)*stride+rows-1]
	done := 0
	if G > 0 {
		cw, sw := G*w.Layout().CodeWords, w.RowScaleWords()
		done = dotBlocksTile8Asm(w.Type, w.Codes[r0*cw:(r0+rows)*cw], w.Scales[r0*sw:], sw, x0, x1, G, rows, out, stride)
	}
	if done < rows {
		DotBlocksTile(w, r0+done, rows-done, x0, out[done:], stride)
		DotBlocksTile(w, r0+done, rows-done, x1, out[TileRows*stride+done:], stride)
	}
}

// dotBlocksTileGo is the definition of DotBlocksTile: dotBlocksGo of every
// weight row with every row of the tile (as the tile holds them: the tests'
// twin of the packing too).
func dotBlocksTileGo(t dtype.Type, codes, scales []uint32, sw int, x *QTile, rows int, out []float32, stride int) {
	l, _ := dtype.Layout(t)
	cw := x.Groups() * l.CodeWords
	var q QRow
	for r := range TileRows {
		p := &q
		if KType(t) {
			p = x.rows[r]
		} else {
			x.row(r, &q)
		}
		for j := range rows {
			out[r*stride+j] = dotBlocksRowGo(t, codes[j*cw:(j+1)*cw], scales[j*sw:(j+1)*sw], p)
		}
	}
}

// grow returns s resized to n, reallocated where its capacity is short
// (its contents then lost: every caller overwrites them).
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
