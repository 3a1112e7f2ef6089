package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// TestDotBlocksTile: the tile kernel gives DotBlocks's bits for every type,
// on widths of one block, odd group counts and short last chunks, weight
// row counts and offsets that are not multiples of anything, and rows of
// activations at very different scales (one all zero); the twin
// (dotBlocksTileGo) too.
func TestDotBlocksTile(t *testing.T) {
	if !BlocksTile() {
		t.Log("no tile kernel on this CPU: checking the twin alone")
	}
	withTileVariants(t, testDotBlocksTile)
}

func testDotBlocksTile(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range dtype.BlockTypes {
		l, _ := dtype.Layout(typ)
		for _, cols := range blockWidths(typ) {
			const rows = 7
			m := blocksMatrix(t, rng, typ, rows, cols)
			qs := spreadRows(rng, TileRows, cols, 2, l.Min == 2)
			var xs [TileRows]*QRow
			for r := range qs {
				xs[r] = &qs[r]
			}
			var tile QTile
			tile.Pack(&xs)
			for _, span := range [][2]int{{0, rows}, {1, 5}, {rows - 1, 1}, {2, rows - 2}} {
				r0, n := span[0], span[1]
				const stride = 11
				out := make([]float32, (TileRows-1)*stride+n)
				DotBlocksTile(m, r0, n, &tile, out, stride)
				twin := make([]float32, len(out))
				G := m.Groups()
				cw, sw := G*l.CodeWords, m.RowScaleWords()
				dotBlocksTileGo(typ, m.Codes[r0*cw:], m.Scales[r0*sw:], sw, &tile, n, twin, stride)
				if KType(typ) && BlocksTile() { // the K kernel takes the rows (all but a last one it cannot read past)
					kout := make([]float32, len(out))
					if done := dotBlocksKTileAsm(typ, m.Codes[r0*cw:(r0+n)*cw], m.Scales[r0*sw:], sw, &tile, G, n, kout, stride); done < n-1 || done == 0 {
						t.Fatalf("%v %d wide: the K tile kernel took %d of %d rows", typ, cols, done, n)
					}
				}
				for r := range TileRows {
					for j := range n {
						want := DotBlocks(m, r0+j, xs[r])
						got, tw := out[r*stride+j], twin[r*stride+j]
						if math.Float32bits(got) != math.Float32bits(want) || math.Float32bits(tw) != math.Float32bits(want) {
							t.Fatalf("%v %d wide, weight row %d, activation row %d: tile %g, twin %g, DotBlocks %g", typ, cols, r0+j, r, got, tw, want)
						}
					}
				}
			}
		}
	}
}

// TestDotBlocksTile8: two tiles at once give DotBlocks's bits for every
// type (the eight-row kernel where the type has one, the tiles one by one
// elsewhere), on the widths and weight row spans of TestDotBlocksTile;
// the eight-row kernel takes every row it can for the types it serves.
func TestDotBlocksTile8(t *testing.T) {
	withTileVariants(t, testDotBlocksTile8)
}

func testDotBlocksTile8(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, typ := range dtype.BlockTypes {
		l, _ := dtype.Layout(typ)
		for _, cols := range blockWidths(typ) {
			rows := 7
			if typ == dtype.Q4_0 { // more than a call's 16 rows of weights
				rows = 37
			}
			m := blocksMatrix(t, rng, typ, rows, cols)
			qs := spreadRows(rng, 2*TileRows, cols, 5, l.Min == 2)
			var xs [2][TileRows]*QRow
			for r := range qs {
				xs[r/TileRows][r%TileRows] = &qs[r]
			}
			var tiles [2]QTile
			tiles[0].Pack(&xs[0])
			tiles[1].Pack(&xs[1])
			for _, span := range [][2]int{{0, rows}, {1, 5}, {rows - 1, 1}, {2, rows - 2}} {
				r0, n := span[0], span[1]
				stride := rows + 4 // results of one activation row apart from the next one's
				out := make([]float32, (2*TileRows-1)*stride+n)
				DotBlocksTile8(m, r0, n, &tiles[0], &tiles[1], out, stride)
				if eight := []dtype.Type{dtype.Q4_0, dtype.Q5_0, dtype.Q8_0, dtype.IQ4_NL, dtype.MXFP4}; BlocksTile() && slices.Contains(eight, typ) {
					G := m.Groups()
					cw, sw := G*l.CodeWords, m.RowScaleWords()
					kout := make([]float32, len(out))
					if done := dotBlocksTile8Asm(typ, m.Codes[r0*cw:(r0+n)*cw], m.Scales[r0*sw:], sw, &tiles[0], &tiles[1], G, n, kout, stride); done < n-1 || done == 0 {
						t.Fatalf("%v %d wide: the eight-row kernel took %d of %d rows", typ, cols, done, n)
					}
				}
				for r := range 2 * TileRows {
					for j := range n {
						want := DotBlocks(m, r0+j, &qs[r])
						if got := out[r*stride+j]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%v %d wide, weight row %d, activation row %d: eight-row tile %g, DotBlocks %g", typ, cols, r0+j, r, got, want)
						}
					}
				}
			}
		}
	}
}

// BenchmarkBlocksFourRows: four activation rows against a smollm2-sized
// matrix, a row at a time (DotBlocksRows) and as a tile.
func BenchmarkBlocksFourRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []dtype.Type{dtype.Q4_0, dtype.Q8_0, dtype.Q4_K, dtype.Q6_K} {
		const rows, cols = 256, 1536
		m := blocksMatrix(b, rng, typ, rows, cols)
		var qs [TileRows]QRow
		var xs [TileRows]*QRow
		for r := range qs {
			qs[r].Quantize(randomRow(rng, cols))
			xs[r] = &qs[r]
		}
		out := make([]float32, TileRows*rows)
		b.Run(typ.String()+"/rows", func(b *testing.B) {
			for b.Loop() {
				for r := range TileRows {
					for j := 0; j < rows; j += 16 {
						DotBlocksRows(m, j, xs[r], out[r*rows+j:r*rows+j+16])
					}
				}
			}
		})
		b.Run(typ.String()+"/tile", func(b *testing.B) {
			var tile QTile
			for b.Loop() {
				tile.Pack(&xs)
				for j := 0; j < rows; j += 16 {
					DotBlocksTile(m, j, 16, &tile, out[j:], rows)
				}
			}
		})
	}
}

// BenchmarkBlocksEightRows times DotBlocksTile8 (two tiles, eight rows
// of activations) of Q4_0 and Q8_0 weights at smollm2-135m's widths: 576
// (one block of columns) and 1536 (blocks of tile8Groups, lanes carried).
func BenchmarkBlocksEightRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []dtype.Type{dtype.Q4_0, dtype.Q8_0} {
		for _, cols := range []int{576, 1536} {
			const rows = 256
			m := blocksMatrix(b, rng, typ, rows, cols)
			qs := make([]QRow, 2*TileRows)
			for r := range qs {
				qs[r].Quantize(randomRow(rng, cols))
			}
			tiles := packTiles(qs)
			out := make([]float32, 2*TileRows*rows)
			b.Run(fmt.Sprintf("%v/%d", typ, cols), func(b *testing.B) {
				b.SetBytes(int64(2 * TileRows * rows * cols)) // multiply-adds
				for b.Loop() {
					for j := 0; j < rows; j += 16 {
						DotBlocksTile8(m, j, 16, &tiles[0], &tiles[1], out[j:], rows)
					}
				}
			})
		}
	}
}

// TestQuantizeK: QuantizeGroups then QuantizeK is Quantize (codes, scales
// and the per-super-block codes, whose products match to the bit, one
// row and a tile), and a K quant's product of a row or tile without them
// panics rather than read another row's codes.
func TestQuantizeK(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, cols := range []int{32, 256, 288, 2304} {
		var whole QRow
		var lazy [TileRows]QRow
		var xs [TileRows]*QRow
		x := randomRow(rng, cols)
		whole.Quantize(x)
		for r := range lazy {
			lazy[r].Quantize(randomRow(rng, cols)) // stale K codes of another row
			lazy[r].QuantizeGroups(x)
			xs[r] = &lazy[r]
		}
		if lazy[0].HasK() {
			t.Fatalf("%d wide: QuantizeGroups kept the previous row's K codes", cols)
		}
		var tile QTile
		tile.Pack(&xs)
		m := blocksMatrix(t, rng, dtype.Q6_K, 3, (cols+255)/256*256)
		if m.Cols == cols {
			mustPanic(t, "DotBlocks without QuantizeK", func() { DotBlocks(m, 0, &lazy[0]) })
			mustPanic(t, "DotBlocksTile without PackK", func() { DotBlocksTile(m, 0, 1, &tile, make([]float32, 4), 1) })
		}
		for r := range lazy {
			lazy[r].QuantizeK(x)
		}
		if !slices.Equal(whole.Codes, lazy[0].Codes) || !slices.Equal(whole.DS, lazy[0].DS) ||
			!slices.Equal(whole.KCodes, lazy[0].KCodes) || !slices.Equal(whole.KD, lazy[0].KD) || !slices.Equal(whole.KSums, lazy[0].KSums) {
			t.Fatalf("%d wide: QuantizeGroups + QuantizeK differ from Quantize", cols)
		}
		if m.Cols != cols {
			continue
		}
		tile.PackK()
		out := make([]float32, TileRows*m.Rows)
		DotBlocksTile(m, 0, m.Rows, &tile, out, m.Rows)
		for j := range m.Rows {
			want := DotBlocks(m, j, &whole)
			for r := range TileRows {
				if got := out[r*m.Rows+j]; math.Float32bits(got) != math.Float32bits(want) {
					t.Fatalf("%d wide, weight row %d, tile row %d: %v, want %v", cols, j, r, got, want)
				}
			}
		}
	}
}

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatalf("%s did not panic", what)
		}
	}()
	f()
}

// spreadRows returns n quantized rows of random activations (randomRow's:
// zeros, subnormals, large values), row r scaled by 10^(r%4 − 1) and row
// zero all zero, with their half sums where halves (Q2_K's products need
// them).
func spreadRows(rng *rand.Rand, n, cols, zero int, halves bool) []QRow {
	qs := make([]QRow, n)
	for r := range qs {
		x := randomRow(rng, cols)
		for i := range x {
			x[i] *= float32(math.Pow(10, float64(r%4-1)))
			if r == zero {
				x[i] = 0
			}
		}
		qs[r].Quantize(x)
		if halves {
			qs[r].SumHalves(x)
		}
	}
	return qs
}

// packTiles packs the rows qs, four a tile (len(qs)/TileRows tiles).
func packTiles(qs []QRow) []QTile {
	ts := make([]QTile, len(qs)/TileRows)
	for t := range ts {
		var xs [TileRows]*QRow
		for r := range xs {
			xs[r] = &qs[t*TileRows+r]
		}
		ts[t].Pack(&xs)
	}
	return ts
}
