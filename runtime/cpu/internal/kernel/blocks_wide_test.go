package kernel

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// TestDotBlocksWide: the wide kernel, in each form this CPU runs (VNNI's,
// and the K quants' AVX2 form), gives DotBlocks's bits for every type it
// takes, on widths of one group, odd group counts, short last chunks of
// scales and more than one block of columns (the lanes carried between
// them), for blocks of weight rows at and off the matrix's start and its
// last rows (whose last chunk of scale words the kernel reads from a
// padded copy), one to three blocks a call (each block's lanes carried
// across the blocks of columns), and one or three tiles of activations at
// very different scales (one row all zero); it declines only the types it
// has no expansion for, which DotBlocksTile8 keeps.
func TestDotBlocksWide(t *testing.T) {
	for _, f := range wideForms() {
		t.Run(fmt.Sprint(f), func(t *testing.T) { testDotBlocksWide(t, f) })
	}
}

func (f wideForm) String() string {
	return [...]string{"none", "vnni", "avx2", "avxvnni"}[f]
}

func testDotBlocksWide(t *testing.T, f wideForm) {
	rng := rand.New(rand.NewPCG(25, 26))
	var s WideScratch
	took := 0
	for _, typ := range dtype.BlockTypes {
		l, _ := dtype.Layout(typ)
		widths := blockWidths(typ)
		switch typ {
		case dtype.Q4_0:
			widths = append(widths, 800, 1568, 2080) // 25, 49 and 65 groups: blocks of columns and a lone group after them
		case dtype.Q4_K:
			widths = append(widths, 1024, 2048) // 32 and 64 groups: blocks of columns of three super-blocks and a short last one
		}
		for _, cols := range widths {
			const rows = 53
			m := blocksMatrix(t, rng, typ, rows, cols)
			m.Scales = m.Scales[:len(m.Scales):len(m.Scales)] // no room past the last row's scale words
			qs := spreadRows(rng, 3*TileRows, cols, 6, l.Min == 2)
			ts := packTiles(qs)
			for _, c := range []struct{ r0, nw int }{{0, 1}, {5, 1}, {rows - WideRows, 1}, {0, 3}, {rows - 2*WideRows, 2}} {
				r0, nw := c.r0, c.nw*WideRows
				for _, n := range []int{1, 3} {
					stride := nw + 3
					out := make([]float32, (n*TileRows-1)*stride+nw)
					for i := range out {
						out[i] = float32(math.NaN())
					}
					if !dotBlocksWide(f, m, r0, nw, ts[:n], out, stride, &s) {
						if wideTakes(f, typ) {
							t.Fatalf("%v %d wide: the wide kernel declined rows %d..", typ, cols, r0)
						}
						continue
					}
					if !wideTakes(f, typ) {
						t.Fatalf("%v: the wide kernel took a type it has no expansion for", typ)
					}
					took++
					for r := range n * TileRows {
						for j := range nw {
							want := DotBlocks(m, r0+j, &qs[r])
							if got := out[r*stride+j]; math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("%v %d wide, weight row %d, activation row %d: wide %g, DotBlocks %g", typ, cols, r0+j, r, got, want)
							}
						}
					}
				}
			}
		}
	}
	if took == 0 {
		t.Fatal("the wide kernel took no block")
	}
	t.Logf("%d blocks through the wide kernel", took)
}

// BenchmarkBlocksWide times a block of 16 weight rows at a time with n rows
// of activations, the wide kernel (each form this CPU runs) against the
// eight-row tile kernel (DotBlocksTile8, two tiles a call) and the one-row
// kernel (DotBlocksRows a row of activations at a time: what CPUs without
// AVX-512 ran before the AVX2 form) on the same data; SetBytes counts
// multiply-adds, so MB/s reads as millions of them a second.
func BenchmarkBlocksWide(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, typ := range []dtype.Type{dtype.Q4_0, dtype.Q8_0, dtype.Q4_K, dtype.Q6_K} {
		for _, cols := range []int{576, 2048, 8192} {
			if typ.BlockSize() == 256 && cols%256 != 0 {
				continue
			}
			const rows = 64
			m := blocksMatrix(b, rng, typ, rows, cols)
			for _, n := range []int{8, 16, 32, 64, 128} {
				qs := make([]QRow, n)
				for r := range qs {
					qs[r].Quantize(normalRow(rng, cols))
				}
				ts := packTiles(qs)
				out := make([]float32, n*rows)
				var s WideScratch
				b.Run(fmt.Sprintf("%v/%d/rows=%d/tile8", typ, cols, n), func(b *testing.B) {
					b.SetBytes(int64(n * rows * cols))
					for b.Loop() {
						for j := 0; j < rows; j += WideRows {
							for t := 0; t+1 < len(ts); t += 2 {
								DotBlocksTile8(m, j, WideRows, &ts[t], &ts[t+1], out[t*TileRows*rows+j:], rows)
							}
						}
					}
				})
				b.Run(fmt.Sprintf("%v/%d/rows=%d/one", typ, cols, n), func(b *testing.B) {
					b.SetBytes(int64(n * rows * cols))
					for b.Loop() {
						for j := 0; j < rows; j += WideRows {
							for r := range qs {
								DotBlocksRows(m, j, &qs[r], out[r*rows+j:r*rows+j+WideRows])
							}
						}
					}
				})
				for _, f := range wideForms() {
					for _, nw := range []int{WideRows, WideBlocksFor(n)} {
						b.Run(fmt.Sprintf("%v/%d/rows=%d/wide%d-%v", typ, cols, n, nw, f), func(b *testing.B) {
							b.SetBytes(int64(n * rows * cols))
							for b.Loop() {
								for j := 0; j < rows; j += nw {
									if !dotBlocksWide(f, m, j, nw, ts, out[j:], rows, &s) {
										b.Skip("no wide kernel here")
									}
								}
							}
						})
					}
				}
			}
		}
	}
}
