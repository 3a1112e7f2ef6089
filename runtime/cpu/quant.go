package cpu

import (
	"fmt"
	"sync"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
)

// QWeight is a matrix kept compressed, as int4 (dtype.Int4), int8
// (dtype.Int8), its file's block type (dtype.Blocks) or f16. Embed
// expands a row to f32 with the arithmetic of the WGSL kernels (scale·q +
// min, the product exact), so both backends see the same weight values bit
// for bit; MatMul reads int4 and blocks with integer kernels and int8 with
// f32 ones (see MatMulQ).
type QWeight struct {
	shape   []int
	storage backend.Storage
	Int4    *dtype.Int4   // for Int4
	Int8    *dtype.Int8   // for Int8
	Blocks  *dtype.Blocks // for Blocks
	F16     []uint16      // for F16: rows × cols halves
}

func (w *QWeight) Shape() []int { return w.shape }

func (w *QWeight) Bytes() int64 {
	if w.Int4 != nil {
		return w.Int4.Bytes()
	}
	if w.Int8 != nil {
		return w.Int8.Bytes()
	}
	if w.Blocks != nil {
		return w.Blocks.Bytes()
	}
	return 2 * int64(len(w.F16))
}

// Storage says how the weight is kept.
func (w *QWeight) Storage() backend.Storage { return w.storage }

func (w *QWeight) cols() int { return w.shape[len(w.shape)-1] }

// Row writes the f32 values of row r into dst (len ≥ cols).
func (w *QWeight) Row(r int, dst []float32) {
	if w.Int4 != nil {
		w.Int4.DequantizeRow(r, dst)
		return
	}
	if w.Int8 != nil {
		w.Int8.DequantizeRow(r, dst)
		return
	}
	if w.Blocks != nil {
		w.Blocks.DequantizeRow(r, dst)
		return
	}
	k := w.cols()
	for i, h := range w.F16[r*k : (r+1)*k] {
		dst[i] = dtype.HalfValue(h)
	}
}

func (b *Backend) UploadAs(t *tensor.Tensor, s backend.Storage) (backend.Weight, error) {
	if s == backend.F32 {
		return b.Upload(t)
	}
	w, err := NewQWeight(t, s)
	if err != nil {
		return nil, err
	}
	b.stats.Memory += w.Bytes()
	return w, nil
}

// NewQWeight converts the matrix t to storage s (F16, Int8, Int4 or
// Blocks).
func NewQWeight(t *tensor.Tensor, s backend.Storage) (*QWeight, error) {
	if len(t.Shape) != 2 {
		return nil, fmt.Errorf("cpu: %s storage of %s needs a matrix, not shape %v", s, t.Name, t.Shape)
	}
	w := &QWeight{shape: t.Shape, storage: s}
	switch s {
	case backend.Int4:
		var err error
		if w.Int4, err = t.Int4(); err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
	case backend.Int8:
		var err error
		if w.Int8, err = t.Int8(); err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
	case backend.Blocks:
		var err error
		if w.Blocks, err = t.Blocks(); err != nil {
			return nil, fmt.Errorf("cpu: %w", err)
		}
	case backend.F16:
		data, err := t.Float32()
		if err != nil {
			return nil, err
		}
		w.F16 = make([]uint16, len(data))
		for i, v := range data {
			w.F16[i] = dtype.HalfBits(v)
		}
	default:
		return nil, fmt.Errorf("cpu: unknown storage %v", s)
	}
	return w, nil
}

// MatMulQ sets dst[m×n] = x[m×k] · w[n×k]ᵀ for a compressed w. Int4
// and blocks weights meet activations quantized to int16 per group of 32
// (see matMulInt4, matMulBlocks); int8 weights meet the f32 rows
// (matMulInt8); f16 weights meet the f32 rows exactly as MatMul's would
// their widened values (kernel.DotF16).
func MatMulQ(dst, x []float32, w *QWeight, m, k, n, workers int) {
	matMulQ(dst, x, w, m, k, n, newTeam(workers))
}

func matMulQ(dst, x []float32, w *QWeight, m, k, n int, t *team) {
	if w.Int4 != nil || w.Blocks != nil {
		var qs []kernel.QRow
		var tiles tileCache
		quantizeRows(&qs, x, m, k, t)
		matMulInt(dst, x, qs, &tiles, w, n, t)
		return
	}
	if w.Int8 != nil {
		matMulInt8(dst, x, w.Int8, m, t)
		return
	}
	h := w.F16
	t.over(m*n*k, n, func(lo, hi int) { // matMul's blocks, kernel.DotF16Block's tiles
		mb := rowBlock(m, k)
		for i := 0; i < m; i += mb {
			kernel.DotF16Block(dst[i*n+lo:], n, h[lo*k:hi*k], hi-lo, x[i*k:], k, min(mb, m-i))
		}
	})
}

// quantizeRows sets (*qs)[:m] to the m rows of x, k wide, growing qs.
func quantizeRows(qs *[]kernel.QRow, x []float32, m, k int, t *team) {
	if len(*qs) < m {
		*qs = append(*qs, make([]kernel.QRow, m-len(*qs))...)
	}
	q := (*qs)[:m]
	t.over(2*m*k, m, func(lo, hi int) { // a value's quantizing costs about two multiply-adds
		for i := lo; i < hi; i++ {
			q[i].QuantizeGroups(x[i*k : (i+1)*k])
		}
	})
}

// quantizeRowsK adds the per-super-block codes to the rows of q, made
// from x (k wide) by quantizeRows, that lack them: the K quants' products
// read them, the others not, so a model without K quants never pays for
// them and one with them pays once per quantized input.
func quantizeRowsK(q []kernel.QRow, x []float32, k int, t *team) {
	t.over(2*len(q)*k, len(q), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			q[i].QuantizeK(x[i*k : (i+1)*k])
		}
	})
}

// matMulInt multiplies the rows of x, quantized as qs, by w, kept in Int4
// or Blocks.
func matMulInt(dst, x []float32, qs []kernel.QRow, tiles *tileCache, w *QWeight, n int, t *team) {
	if w.Int4 != nil {
		matMulInt4(dst, qs, w.Int4, n, t)
		return
	}
	matMulBlocks(dst, x, qs, tiles, w.Blocks, t)
}

// matMulBlocks is matMulInt4's path for weights at their file's bits
// (kernel.DotBlocksRows): each worker takes its rows of w in tiles of
// blocksTile, and each tile meets every row of x, so that a tile is read
// from memory once for all of them and a call's cost is spread over its
// rows. Where the CPU has the tile kernel, the rows of x go four at a time
// (kernel.QTile, packed once), two tiles a call (kernel.DotBlocksTile8):
// each weight row is unpacked once for eight rows, not once for each, with
// the same bits. Q2_K's
// mins meet sums of 16 inputs, which the rows then get once (x holds them
// unquantized).
func matMulBlocks(dst, x []float32, q []kernel.QRow, tiles *tileCache, w *dtype.Blocks, t *team) {
	ts := blocksReady(x, q, tiles, w, t)
	overBlocks(t, len(q)*w.Rows*w.Cols, w.Rows, func(lo, hi int) { blocksRows(dst, q, ts, w, lo, hi, &tiles.wide) })
}

// WideBytes is what each worker's wide kernel keeps of a step of m rows
// where a product's input is wider than its blocks of columns: each row's
// lanes (kernel.WideKRowBytes, the K quants', the most of any type) for
// each block of weight rows a call takes (kernel.WideBlocksFor). eval's
// memory estimate counts it.
func WideBytes(m int) int64 {
	return int64(m) * kernel.WideKRowBytes * int64(kernel.WideBlocksFor(m)/kernel.WideRows)
}

// overBlocks is t.over of n rows of weights in whole blocks of blocksTile
// (the last part takes what is left): a part of 72 rows had a block of 8
// that the wide kernel, which takes whole blocks, left to the tile
// kernels.
func overBlocks(t *team, work, n int, f func(lo, hi int)) {
	t.over(work, (n+blocksTile-1)/blocksTile, func(lo, hi int) { f(lo*blocksTile, min(hi*blocksTile, n)) })
}

// blocksReady readies the quantized rows q of x for products with w (the
// sums Q2_K's mins meet, the K quants' codes) and returns their tiles
// where the tile kernel takes them.
func blocksReady(x []float32, q []kernel.QRow, tiles *tileCache, w *dtype.Blocks, t *team) []kernel.QTile {
	if l := w.Layout(); l.Min == 2 {
		k := w.Cols
		for i := range q {
			if len(q[i].Halves) == 0 {
				q[i].SumHalves(x[i*k : (i+1)*k])
			}
		}
	}
	if kernel.KType(w.Type) && !hasK(q) {
		quantizeRowsK(q, x, w.Cols, t)
	}
	if kernel.TilesFor(w.Type, len(q)) {
		return tiles.pack(q, t)
	}
	return nil
}

// hasK says whether every row of q has its K quants' codes (readyRows
// makes them where a product needs them), so that no job is run for
// nothing.
func hasK(q []kernel.QRow) bool {
	for i := range q {
		if !q[i].HasK() {
			return false
		}
	}
	return true
}

// blocksRows sets columns lo..hi of dst (len(q) rows, w.Rows wide) to the
// products of rows lo..hi of w with every row of q (ts: their tiles, from
// blocksReady). Each output is one kernel call's, whichever rows of w
// share the call, so any split of the rows gives the same bits. Where
// the tiles hold kernel.WideMin rows or more, the blocks of rows of w
// meet them all in the wide kernel where it takes them, a few blocks a
// call (kernel.WideBlocksFor; its scratch from wide, one a job), and in
// the tile kernels elsewhere: the same bits either way.
func blocksRows(dst []float32, q []kernel.QRow, ts []kernel.QTile, w *dtype.Blocks, lo, hi int, wide *sync.Pool) {
	m, n := len(q), w.Rows
	tiled := len(ts) * kernel.TileRows
	var buf [blocksTile]float32
	out := buf[:]
	var s *kernel.WideScratch
	if tiled >= kernel.WideMin(w.Type) {
		s, _ = wide.Get().(*kernel.WideScratch)
		if s == nil {
			s = new(kernel.WideScratch)
		}
		defer wide.Put(s)
	}
	for j := lo; j < hi; {
		tile := min(blocksTile, hi-j)
		if s != nil && tile == kernel.WideRows {
			// Whole blocks, a few at a time (kernel.WideBlocksFor).
			tile = min(kernel.WideBlocksFor(tiled), (hi-j)/kernel.WideRows*kernel.WideRows)
		}
		if s == nil || tile < kernel.WideRows || !kernel.DotBlocksWide(w, j, tile, ts, dst[j:], n, s) {
			tile = min(blocksTile, hi-j)
			i := 0
			for ; i+1 < len(ts); i += 2 {
				kernel.DotBlocksTile8(w, j, tile, &ts[i], &ts[i+1], dst[i*kernel.TileRows*n+j:], n)
			}
			if i < len(ts) {
				kernel.DotBlocksTile(w, j, tile, &ts[i], dst[i*kernel.TileRows*n+j:], n)
			}
		}
		for i := tiled; i < m; i++ {
			for a := j; a < j+tile; a += blocksTile {
				c := min(a+blocksTile, j+tile)
				kernel.DotBlocksRows(w, a, &q[i], out[:c-a])
				copy(dst[i*n+a:], out[:c-a])
			}
		}
		j += tile
	}
}

// tileCache is the rows of a product's input packed four at a time
// (kernel.QTile) for matMulBlocks, kept for the next product of the same
// quantized rows (q, k and v; gate and up): packed is how many tiles hold
// them, 0 once the rows change.
type tileCache struct {
	tiles  []kernel.QTile
	packed int
	// wide holds the wide kernel's scratch (*kernel.WideScratch) between
	// products: blocksRows takes one a job.
	wide sync.Pool
}

// pack returns the tiles of the rows of q, packing them unless c holds
// them already (adding the K quants' codes where the rows have gained
// them since).
func (c *tileCache) pack(q []kernel.QRow, t *team) []kernel.QTile {
	n := len(q) / kernel.TileRows
	if c.packed == n {
		ts := c.tiles[:n]
		for i := range ts {
			ts[i].PackK()
		}
		return ts
	}
	if len(c.tiles) < n {
		c.tiles = append(c.tiles, make([]kernel.QTile, n-len(c.tiles))...)
	}
	ts := c.tiles[:n]
	// Each tile its own: the team shares them (on one goroutine, a
	// prompt's packing was a stretch of every product the other cores
	// waited out).
	t.over(len(q)*q[0].Cols, n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := i * kernel.TileRows
			ts[i].Pack(&[kernel.TileRows]*kernel.QRow{&q[r], &q[r+1], &q[r+2], &q[r+3]})
		}
	})
	c.packed = n
	return ts
}

// reserve returns room for n tiles, which the caller packs.
func (c *tileCache) reserve(n int) []kernel.QTile {
	if len(c.tiles) < n {
		c.tiles = append(c.tiles, make([]kernel.QTile, n-len(c.tiles))...)
	}
	c.packed = n
	return c.tiles[:n]
}

// readyRows sets b.qrows[:m] to rows 0..m of x (k wide) quantized for
// products with the blocks weights ws, with what those need besides
// (the K quants' codes, Q2_K's sums) and their tiles packed, in one job
// of the team a tile of rows at a time: three jobs before (quantizing,
// packing and the K codes), each with its wait for the slowest worker,
// for a few microseconds of work at a decode step's 32 rows. Where norm
// is not nil, each row of x is first set to RMSNorm of src's, the same
// job too.
func (b *Backend) readyRows(x, src *Tensor, m int, norm *Weight, eps float32, ws []*dtype.Blocks) {
	k := x.cols
	if len(b.qrows) < m {
		b.qrows = append(b.qrows, make([]kernel.QRow, m-len(b.qrows))...)
	}
	q := b.qrows[:m]
	var needK, halves, tiles bool
	for _, w := range ws {
		needK = needK || kernel.KType(w.Type)
		halves = halves || w.Layout().Min == 2
		tiles = tiles || kernel.TilesFor(w.Type, m)
	}
	var ts []kernel.QTile
	if tiles {
		ts = b.qtiles.reserve(m / kernel.TileRows)
	} else {
		b.qtiles.packed = 0
	}
	work := 3 * m * k // about: a norm's multiply-add, quantizing's two
	b.team.over(work, (m+kernel.TileRows-1)/kernel.TileRows, func(lo, hi int) {
		for u := lo; u < hi; u++ {
			r0, r1 := u*kernel.TileRows, min((u+1)*kernel.TileRows, m)
			for i := r0; i < r1; i++ {
				row := x.Data[i*k : (i+1)*k]
				if norm != nil {
					RMSNorm(row, src.Row(i), norm.Data, eps)
				}
				q[i].QuantizeGroups(row)
				if needK {
					q[i].QuantizeK(row)
				}
				if halves {
					q[i].SumHalves(row)
				}
			}
			if u < len(ts) {
				ts[u].Pack(&[kernel.TileRows]*kernel.QRow{&q[r0], &q[r0+1], &q[r0+2], &q[r0+3]})
			}
		}
	})
	b.qsrc, b.qm, b.qvalid = x, m, true
}

// blocksTile is the rows of weights a kernel call of matMulBlocks takes:
// a few KiB, which stay in the core's cache while every row of x meets
// them.
const blocksTile = 16

// matMulInt4 is the integer path of llama.cpp's Q4_0×Q8_0 kind (with
// 16-bit activations): the rows of x, quantized once (kernel.QRow), meet
// each row of w in kernel.DotQ4, four input rows per unpacked weight group
// where there are four.
func matMulInt4(dst []float32, q []kernel.QRow, w *dtype.Int4, n int, t *team) {
	g := w.Groups()
	row := func(j int) ([]uint32, []uint32) { return w.Codes[4*j*g : 4*(j+1)*g], w.Scales[j*g : (j+1)*g] }
	products(dst, q, n, w.Cols, t,
		func(j int, x *kernel.QRow) float32 { c, s := row(j); return kernel.DotQ4(c, s, x) },
		func(j int, xs *[4]*kernel.QRow, out *[4]float32) { c, s := row(j); kernel.DotQ4x4(c, s, xs, out) })
}

// int8Row is a row of activations for int8 products: its values and the
// sums of its groups of 16 (kernel.GroupSums8), computed once per row.
type int8Row struct{ x, sums []float32 }

// matMulInt8 multiplies the m rows of x by every row of w (kernel.DotQ8).
func matMulInt8(dst, x []float32, w *dtype.Int8, m int, t *team) {
	k, g := w.Cols, w.Groups()
	rows := make([]int8Row, m)
	sums := make([]float32, m*g)
	for i := range rows {
		rows[i] = int8Row{x[i*k : (i+1)*k], sums[i*g : (i+1)*g]}
		kernel.GroupSums8(rows[i].x, rows[i].sums)
	}
	row := func(j int) ([]uint32, []uint32) { return w.Codes[4*j*g : 4*(j+1)*g], w.Scales[j*g : (j+1)*g] }
	products(dst, rows, w.Rows, k, t,
		func(j int, x *int8Row) float32 { c, s := row(j); return kernel.DotQ8(c, s, x.x, x.sums) },
		func(j int, xs *[4]*int8Row, out *[4]float32) {
			c, s := row(j)
			for r, x := range xs {
				out[r] = kernel.DotQ8(c, s, x.x, x.sums)
			}
		})
}
