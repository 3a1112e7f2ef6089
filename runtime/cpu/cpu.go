// Package cpu is the reference backend: every op of a forward pass written
// in plain Go, as directly as the math reads. It is what every WGSL kernel is
// tested against, and the fallback where no GPU adapter exists. Matrix
// products, attention and the ops of a step's rows are spread across cores
// (team.go), in as few jobs a layer as the fused ops allow (fused.go).
package cpu

import (
	"fmt"
	"slices"
	"sync"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
)

// Tensor is an f32 matrix in row-major order.
type Tensor struct {
	rows, cols int
	Data       []float32
	out        bool // one row per output row of the batch
}

func (t *Tensor) Rows() int { return t.rows }
func (t *Tensor) Cols() int { return t.cols }

// Row returns row i.
func (t *Tensor) Row(i int) []float32 { return t.Data[i*t.cols : (i+1)*t.cols] }

// NewTensor wraps data as a rows × cols tensor.
func NewTensor(rows, cols int, data []float32) *Tensor {
	return &Tensor{rows: rows, cols: cols, Data: data}
}

// Weight is a model tensor dequantized to f32.
type Weight struct {
	shape []int
	Data  []float32
}

func (w *Weight) Shape() []int { return w.shape }
func (w *Weight) Bytes() int64 { return 4 * int64(len(w.Data)) }

// NewWeight wraps data as a weight of the given shape.
func NewWeight(shape []int, data []float32) *Weight { return &Weight{shape: shape, Data: data} }

// Backend is the Go reference backend. Its zero value is not usable; call New.
type Backend struct {
	batch  backend.Batch
	team   *team // shares each matrix product and attention out
	stats  backend.Stats
	kept   []int32       // Keep's ids since the last Begin
	last   []int32       // the last Keep's ids: the next chained step's tokens
	lora   *loraBufs     // AddLoRA's buffers, kept between calls
	qrows  []kernel.QRow // MatMul's quantized rows of qsrc's first qm
	qtiles tileCache     // their packing for block products (matMulBlocks)
	qsrc   *Tensor
	qm     int
	qvalid bool      // no op but MatMul ran since qrows were made
	ropeF  []float32 // Rope's frequencies
	ropeK  []float32 // RopeStore's frequencies of k
	rope   ropeAngles
	// ropeRow is one row's angles of a multi-axis rotation.
	ropeRow  []float32
	exps     []float32 // GLU's exps
	spanKT   []float32 // attendSpans' keys, transposed
	spanKeys int       // the most bytes of spanKT (SpanKeysBytes)
	// spanWork holds attendSpans' workers' scratch (*spanWork) from one
	// layer to the next: a job's scores are up to spanScoreBytes.
	spanWork sync.Pool
	// attendAt is Attend's positions before each job (its split), and
	// attendRows the rows of those jobs.
	attendAt, attendRows []int

	scratches map[scratchKey]*Tensor // the fused ops' intermediate values
}

// New returns a reference backend that uses up to workers goroutines for
// matrix products (0: one per core).
func New(workers int) *Backend {
	return &Backend{team: newTeam(workers), spanKeys: SpanKeysBytes}
}

func (b *Backend) Name() string { return "cpu" }

// Threads is how many goroutines share a matrix product.
func (b *Backend) Threads() int { return b.team.size }

// Kernels names the vector kernels this CPU runs: "avx2" (chosen at run
// time from the CPU's features), or "go" where the plain-Go twins run.
func Kernels() string { return kernel.Path() }

// BlockKernels reports whether this CPU multiplies weights of block type t
// kept at their file's bits (backend.Blocks) in vector kernels; where it
// does not, the plain-Go twin runs, several times slower than the int4
// and int8 kernels (kernel.BlocksKernel).
func BlockKernels(t dtype.Type) bool { return kernel.BlocksKernel(t) }

// Describe says the backend runs on the CPU, with its kernels and
// threads (backend.Describer).
func (b *Backend) Describe() backend.Info {
	return backend.Info{Device: "cpu", Kernels: Kernels(), Threads: b.Threads()}
}

// CopyBandwidth measures the memory bandwidth of the CPU
// (backend.BandwidthProber): the package's CopyBandwidth.
func (b *Backend) CopyBandwidth(bytes int64, iters int) (float64, error) {
	return CopyBandwidth(int(bytes), iters), nil
}

// NewSibling opens another CPU backend with as many threads
// (backend.Sibling); a CPU backend takes batches of any size.
func (b *Backend) NewSibling(int) (backend.Backend, error) { return New(b.team.size), nil }

func (b *Backend) Upload(t *tensor.Tensor) (backend.Weight, error) {
	data, err := t.Float32()
	if err != nil {
		return nil, err
	}
	b.stats.Memory += 4 * int64(len(data))
	return NewWeight(t.Shape, data), nil
}

func (b *Backend) NewTensor(rows, cols int) (backend.Tensor, error) {
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("cpu: tensor of %d×%d", rows, cols)
	}
	b.stats.Memory += 4 * int64(rows*cols)
	return NewTensor(rows, cols, make([]float32, rows*cols)), nil
}

func (b *Backend) NewOutputTensor(rows, cols int) (backend.Tensor, error) {
	t, err := b.NewTensor(rows, cols)
	if err != nil {
		return nil, err
	}
	t.(*Tensor).out = true
	return t, nil
}

func (b *Backend) NewKV(s backend.KVShape) (backend.KV, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	records := s.Layers * s.Blocks * s.BlockSize * s.Heads
	c := &KV{shape: s, K: newKVStore(s.Type, records, s.HeadDim, s.BlockSize, true), V: newKVStore(s.Type, records, s.HeadDim, s.BlockSize, false)}
	b.stats.Memory += c.K.bytes() + c.V.bytes()
	return c, nil
}

func (b *Backend) Begin(batch backend.Batch) error {
	if err := batch.Validate(len(batch.Tokens)); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	b.batch = batch
	b.rope.rows = 0
	b.kept, b.last = nil, nil
	b.qvalid = false
	return nil
}

// Stats counts every op since the backend was made as one dispatch.
func (b *Backend) Stats() backend.Stats { return b.stats }

// op counts one op, and forgets MatMul's quantized input (see MatMul).
func (b *Backend) op() {
	b.stats.Dispatches++
	b.qvalid = false
}

// rows is how many rows of t the current batch covers.
func (b *Backend) rows(t backend.Tensor) int {
	if t.(*Tensor).out {
		return min(t.Rows(), len(b.batch.Out))
	}
	return min(t.Rows(), b.batch.Len())
}

func (b *Backend) Embed(dst backend.Tensor, table backend.Weight) {
	b.op()
	if q, ok := table.(*QWeight); ok {
		d := dst.(*Tensor)
		for i := 0; i < b.rows(d); i++ {
			q.Row(int(b.batch.Tokens[i]), d.Row(i))
		}
		return
	}
	d, w := dst.(*Tensor), table.(*Weight)
	for i := 0; i < b.rows(d); i++ {
		tok := int(b.batch.Tokens[i])
		copy(d.Row(i), w.Data[tok*d.cols:(tok+1)*d.cols])
	}
}

func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32) {
	b.op()
	d, xs, ws := dst.(*Tensor), x.(*Tensor), w.(*Weight)
	b.team.over(2*b.rows(d)*d.cols, b.rows(d), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			RMSNorm(d.Row(i), xs.Row(i), ws.Data, eps)
		}
	})
}

// MatMul quantizes x for int4 and blocks weights once for a run of products that read
// it (q, k and v; gate and up): the quantized rows stay valid until any
// other op runs, since a product never writes its own input.
func (b *Backend) MatMul(dst, x backend.Tensor, w backend.Weight) {
	d, xs := dst.(*Tensor), x.(*Tensor)
	m := b.rows(d)
	fresh := !b.qvalid || b.qsrc != xs || b.qm != m
	b.op()
	switch w := w.(type) {
	case *QWeight:
		if w.Int4 == nil && w.Blocks == nil {
			matMulQ(d.Data, xs.Data, w, m, xs.cols, d.cols, b.team)
			return
		}
		switch {
		case fresh && w.Blocks != nil:
			b.readyRows(xs, xs, m, nil, 0, []*dtype.Blocks{w.Blocks})
		case fresh:
			quantizeRows(&b.qrows, xs.Data, m, xs.cols, b.team)
			b.qsrc, b.qm = xs, m
			b.qtiles.packed = 0
		}
		b.qvalid = true
		matMulInt(d.Data, xs.Data, b.qrows[:m], &b.qtiles, w, d.cols, b.team)
	case *Weight:
		matMul(d.Data, xs.Data, w.Data, m, xs.cols, d.cols, b.team)
	}
}

func (b *Backend) Rope(x backend.Tensor, r backend.Rope) {
	b.op()
	xs := x.(*Tensor)
	b.ropeF = RopeFreqs(b.ropeF, r)
	n := b.rows(xs)
	if r.Multi() && b.batch.RopePos != nil {
		for i := range n {
			b.ropeRow = RopeAnglesMulti(b.ropeRow, b.ropeF, r, b.batch.RopePos[4*i:4*i+4])
			RopeWith(xs.Row(i), b.ropeRow, r)
		}
		return
	}
	cs := b.rope.of(b.ropeF, r.Mscale(), b.batch.Pos[:n])
	w := len(b.ropeF) * 2
	b.team.over(n*xs.cols, n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			RopeWith(xs.Row(i), cs[i*w:(i+1)*w], r)
		}
	})
}

// ropeAngles keeps the cosines and sines of a batch's rows for one set of
// frequencies: every layer's q and k rotate by the same angles (layers
// with their own base have other frequencies and recompute), and their
// cos and sin were a twentieth of a batched decode step.
type ropeAngles struct {
	freqs []float32
	scale float32
	cs    []float32 // row i's RopeAngles at i·2·len(freqs)
	row   []float32 // one row's, as RopeAngles makes them
	rows  int       // rows computed since Begin
}

// of returns the angles of the rows at positions pos for freqs and scale.
func (a *ropeAngles) of(freqs []float32, scale float32, pos []int32) []float32 {
	w := 2 * len(freqs)
	if a.rows < len(pos) || !slices.Equal(a.freqs, freqs) || a.scale != scale {
		a.freqs, a.scale = append(a.freqs[:0], freqs...), scale
		a.cs = a.cs[:0]
		for _, p := range pos {
			a.row = RopeAngles(a.row, freqs, scale, int(p))
			a.cs = append(a.cs, a.row...)
		}
		a.rows = len(pos)
	}
	return a.cs[:len(pos)*w]
}

func (b *Backend) StoreKV(kv backend.KV, l int, k, v backend.Tensor) {
	b.op()
	c, ks, vs := kv.(*KV), k.(*Tensor), v.(*Tensor)
	for i := 0; i < b.rows(ks); i++ {
		b.storeRow(c, l, i, ks.Row(i), vs.Row(i))
	}
}

// storeRow stores row i's keys kr and values vr in layer l of c. The rows
// of a step have slots of their own (a sequence's positions are its own,
// and a ring holds all of a step's rows: backend.RingBlocks), so rows may
// be stored in any order, on any worker.
func (b *Backend) storeRow(c *KV, l, i int, kr, vr []float32) {
	hd := c.shape.HeadDim
	slot := b.batch.SlotIn(c.shape, i) // a ring's slot in a windowed cache
	for h := range c.shape.Heads {
		r := c.record(l, slot, h)
		c.K.put(r, kr[h*hd:(h+1)*hd])
		c.V.put(r, vr[h*hd:(h+1)*hd])
	}
}

func (b *Backend) CopyBlock(kv backend.KV, src, dst int) {
	b.op()
	c := kv.(*KV)
	for l := 0; l < c.shape.Layers; l++ {
		from, to := c.record(l, src*c.shape.BlockSize, 0), c.record(l, dst*c.shape.BlockSize, 0)
		c.K.copyRecords(to, from, c.blockRecords())
		c.V.copyRecords(to, from, c.blockRecords())
	}
}

// Attend runs a job per block of a sequence's rows over the same
// positions (a prompt's, a tower's: attend_span.go) and kv head, and a
// job per other row and kv head (see attend.go), on one goroutine when
// the whole op is too small to share.
func (b *Backend) Attend(dst, q backend.Tensor, kv backend.KV, l int, a backend.Attention) {
	b.op()
	d, qs, c := dst.(*Tensor), q.(*Tensor), kv.(*KV)
	n := b.rows(d)
	var ends []int32
	if a.Bidirectional {
		ends = b.batch.Ends()
	}
	span := func(i int) (first, last int) {
		pos := int(b.batch.Pos[i])
		if ends != nil {
			return a.First(pos), int(ends[i])
		}
		return a.First(pos), pos
	}
	tables := b.batch.TablesFor(c.shape) // rings for a windowed cache
	rows := b.attendRows[:0]             // the rows that take a job each
	var groups []rowSpan                 // tiled keys (heads below kernel.Block) have no span path
	if c.K.tile == 0 {
		groups = spanGroups(n, a.Heads/a.KVHeads, b.batch.Seq, span)
	}
	if len(groups) > 0 {
		b.attendSpans(d, qs, c, l, a, groups, tables, span)
		for i, g := 0, 0; i < n; i++ {
			if g < len(groups) && i == groups[g].lo {
				i, g = groups[g].hi-1, g+1
				continue
			}
			rows = append(rows, i)
		}
	} else {
		for i := range n {
			rows = append(rows, i)
		}
	}
	b.attendRows = rows
	if len(rows) == 0 {
		return
	}
	// The team splits the jobs by their positions, not their number: a
	// prompt's rows attend to more positions row by row, and parts of as
	// many jobs left the worker with the last rows a tenth of the
	// attention to do alone (modelled from each part's CPU time).
	// b.attendAt[j] is how many positions (plus a job's fixed cost) come
	// before job j; a part of positions [lo, hi) runs the jobs that start
	// in it.
	const jobCost = 16 // a job's fixed cost, in positions
	at := b.attendAt[:0]
	var work, total int // work: about the operations, a dot, an axpy and an exp per position and head
	for _, i := range rows {
		first, last := span(i)
		work += (last - first + 1) * a.Heads * (2*a.HeadDim + 16)
		for range a.KVHeads {
			at = append(at, total)
			total += last - first + 1 + jobCost
		}
	}
	b.attendAt = at
	cols := a.Heads / a.KVHeads * a.HeadDim // one GQA group's
	b.team.over(work, total, func(plo, phi int) {
		lo, _ := slices.BinarySearch(at, plo)
		hi, _ := slices.BinarySearch(at, phi)
		var w attendWork
		for job := lo; job < hi; job++ {
			k, h := job/a.KVHeads, job%a.KVHeads
			i := rows[k]
			first, last := span(i)
			// A prompt's rows follow each other: this worker's job of
			// this kv head for the row before read the same records
			// (all but this row's own), and where the sequence's keys and
			// values of the layer fit in its cache they are still there.
			w.warm = job-a.KVHeads >= lo && i > 0 && rows[k-1] == i-1 && b.batch.Seq[i] == b.batch.Seq[i-1] &&
				a.KVHeads*(last-first+1)*a.HeadDim*8 <= warmBytes
			w.runs = c.runs(w.runs[:0], tables[b.batch.Seq[i]], b.batch.BlockSize, l, first, last, h)
			var sinks []float32
			if a.Sinks != nil {
				g := a.Heads / a.KVHeads
				sinks = a.Sinks.(*Weight).Data[h*g : (h+1)*g]
			}
			c.attendGroup(d.Row(i)[h*cols:(h+1)*cols], qs.Row(i)[h*cols:(h+1)*cols], a.Heads/a.KVHeads, last-first+1, a.Scale, a.Softcap, sinks, &w)
		}
	})
}

// GLU takes SiLU's exps eight at a time (kernel.ExpShift of -x), and its
// products and division too (kernel.SiLUMul): the
// same bits as Silu's, element by element. Rows go to the team where
// there are many (a prompt's), since every element is its own.
func (b *Backend) GLU(gate, up backend.Tensor, act tensor.Activation) {
	b.op()
	g, u := gate.(*Tensor), up.(*Tensor)
	cols := g.cols
	b.exps = grow(b.exps, b.rows(g)*cols)
	b.team.over(16*b.rows(g)*cols, b.rows(g), func(lo, hi int) { // an exp costs about 16 multiply-adds
		glu(g.Data[lo*cols:hi*cols], u.Data[lo*cols:hi*cols], b.exps[lo*cols:hi*cols], act)
	})
}

// glu sets gs[i] to act(gs[i])·us[i], with exps as scratch: each element
// on its own, so any split of a row gives the same bits.
func glu(gs, us, exps []float32, act tensor.Activation) {
	switch act {
	case tensor.SwiGLUOAI:
		for i, x := range gs {
			gs[i] = SwiGLUOAI(x, us[i])
		}
	case tensor.SiLU:
		for i, x := range gs {
			exps[i] = -x
		}
		kernel.ExpShift(exps, 0)
		kernel.SiLUMul(gs, exps, us) // x·(1/(1 + exp(-x)))·u, eight at a time
	default:
		for i, x := range gs {
			gs[i] = Act(act, x) * us[i]
		}
	}
}

func (b *Backend) Scale(x backend.Tensor, s float32) {
	b.op()
	xs := x.(*Tensor)
	data := xs.Data[:b.rows(xs)*xs.cols]
	for i := range data {
		data[i] *= s
	}
}

func (b *Backend) Softcap(x backend.Tensor, cap float32) {
	b.op()
	xs := x.(*Tensor)
	data := xs.Data[:b.rows(xs)*xs.cols]
	for i := range data {
		data[i] = Softcap(data[i], cap)
	}
}

func (b *Backend) AddBias(x backend.Tensor, bias backend.Weight) {
	b.op()
	xs, bs := x.(*Tensor), bias.(*Weight).Data
	b.team.over(b.rows(xs)*xs.cols, b.rows(xs), func(lo, hi int) { // a vision tower's thousands of rows
		for i := lo; i < hi; i++ {
			row := xs.Row(i)
			for c := range row {
				row[c] += bs[c]
			}
		}
	})
}

func (b *Backend) HeadNorm(x backend.Tensor, w backend.Weight, headDim int, eps float32) {
	b.op()
	xs, ws := x.(*Tensor), w.(*Weight).Data
	for i := 0; i < b.rows(xs); i++ {
		row := xs.Row(i)
		for h := 0; h+headDim <= len(row); h += headDim {
			RMSNorm(row[h:h+headDim], row[h:h+headDim], ws, eps)
		}
	}
}

func (b *Backend) Add(dst, x backend.Tensor) {
	b.op()
	d, xs := dst.(*Tensor), x.(*Tensor)
	cols := d.cols
	b.team.over(b.rows(d)*cols, b.rows(d), func(lo, hi int) {
		ds, s := d.Data[lo*cols:hi*cols], xs.Data[lo*cols:hi*cols]
		for i := range ds {
			ds[i] += s[i]
		}
	})
}

func (b *Backend) CopyRow(t backend.Tensor, dst int, x backend.Tensor, src int) {
	b.op()
	copy(t.(*Tensor).Row(dst), x.(*Tensor).Row(src))
}

func (b *Backend) Argmax(x backend.Tensor, n int) ([]int32, error) {
	xs := x.(*Tensor)
	out := make([]int32, n)
	// A decode step's rows each scan the vocabulary: on the team, they
	// were a serial stretch of every step (1.5 ms of 32 rows of 49,152);
	// kernel.Argmax is backend.ArgmaxRow's answer in vectors.
	b.team.over(n*xs.cols, n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = int32(kernel.Argmax(xs.Row(i)))
		}
	})
	return out, nil
}

func (b *Backend) Mask(x backend.Tensor, r int, mask []uint32) {
	xs := x.(*Tensor)
	if r >= 0 && r < xs.rows && len(mask) >= (xs.cols+31)/32 {
		backend.MaskRow(xs.Row(r), mask)
	}
}

func (b *Backend) TopK(x backend.Tensor, r, k int) ([]int32, []float32, error) {
	xs := x.(*Tensor)
	if r < 0 || r >= xs.rows {
		return nil, nil, fmt.Errorf("cpu: top-k of row %d of %d", r, xs.rows)
	}
	row := xs.Row(r)
	if k <= 0 || k > backend.MaxTopK || k > len(row) {
		return nil, nil, fmt.Errorf("cpu: top-%d of %d values", k, len(row))
	}
	ids, vals := TopK(row, k)
	return ids, vals, nil
}

func (b *Backend) Keep(x backend.Tensor, n int) {
	ids, _ := b.Argmax(x, n)
	b.kept = append(b.kept, ids...)
	b.last = ids
}

func (b *Backend) BeginChained(batch backend.Batch) error {
	if len(b.last) != len(batch.Tokens) {
		return fmt.Errorf("cpu: a chained step of %d rows after a step that kept %d ids", len(batch.Tokens), len(b.last))
	}
	batch.Tokens = b.last
	kept := b.kept
	err := b.Begin(batch)
	b.kept = kept
	return err
}

func (b *Backend) Kept() ([]int32, error) { return b.kept, nil }

func (b *Backend) Read(x backend.Tensor, n int) ([]float32, error) {
	xs := x.(*Tensor)
	return append([]float32(nil), xs.Data[:n*xs.cols]...), nil
}

func (b *Backend) Write(t backend.Tensor, data []float32) error {
	b.qvalid = false
	ts := t.(*Tensor)
	if len(data) > len(ts.Data) || len(data)%ts.cols != 0 {
		return fmt.Errorf("cpu: write of %d values into a %d×%d tensor", len(data), ts.rows, ts.cols)
	}
	copy(ts.Data, data)
	return nil
}

func (b *Backend) Close() error { return nil }

var _ backend.Backend = (*Backend)(nil)

// expf is e^x in float32, within 1 ulp of the exact value (TestExpf), as
// C's expf is (kernel.Expf). Why not float64's math.Exp: attention and
// SiLU take one exp per score or element, and the conversion and the wider
// function were a third of a batched decode step (stories260K at 32
// sequences), where this is a few multiply-adds; attention takes its exps
// eight at a time (kernel.ExpShift), with the same bits.
func expf(x float32) float32 { return kernel.Expf(x) }

// View returns t's first rows·cols values as a rows × cols tensor over
// the same storage (backend.Viewer).
func (b *Backend) View(t backend.Tensor, rows, cols int) (backend.Tensor, error) {
	x := t.(*Tensor)
	if x.out {
		return nil, fmt.Errorf("cpu: a view of an output tensor")
	}
	return &Tensor{rows: rows, cols: cols, Data: x.Data[:rows*cols]}, nil
}
