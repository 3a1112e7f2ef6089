package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/shaders"
)

// Unmerged LoRA. A projection with adapters (backend.Projection.LoRA)
// runs one lora_shrink before its product, h = x·Aᵀ for all the weights
// that share the input (q, k and v; gate and up) with the A of each row's
// own adapter slot, and the product adds s·h·Bᵀ to each column in its
// epilogue (shaders.Fusion.LoRA; a GEMV folds the terms into its sums,
// fusion.inc.wgsl's lora_fold, its invocations of a column splitting the
// rank on a GPU) before the GLU or the residual add: one dispatch more
// than the plain projection, whose fusions all stay; none where the
// product is a GEMV so small that its workgroups compute h themselves
// for less than a dispatch (shrinkInside, Fusion.Shrink). Where the fused kernel would bind more storage
// buffers than the device allows (q, k and v of int4 weights with
// biases, on a device of 8) or Plan.LoRA says "unfused", the product runs
// as without adapters (a GLU's gate and up split) and one lora_expand per
// weight adds the term after it: the path AddLoRA takes. Each row finds
// its slot in the per-row slot buffer (rowLoRA, or outLoRA for output
// tensors, whose rows are the batch's Out rows), so one batch mixes
// adapters and rows without one. Both kernels' grids are slots × groups
// of up to MAXM rows of one slot × columns: a workgroup serves one group
// of rows of one adapter, reading that adapter's A or Bᵀ once for all of
// them. MAXM (2, 4 or 8) and the group count follow from the most rows
// one slot has in the step, so that a step of 8 rows over 4 adapters does
// the work of 8 rows, not of 4 × 8. Both are specialised by R, the
// largest Σ rank of a slot (h's stride), and MAXM; the shrink by KS too,
// its invocations that split the width on a GPU (shrinkSplits).

var (
	loraShrinkOp = op{kernel: "lora_shrink", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
	loraExpandOp = op{kernel: "lora_expand", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
	loraGatherOp = op{kernel: "lora_gather", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
)

// LoRA is the adapters of weights that share an input, on the device:
// A slot by slot (each slot's weights' rows one after the other, so that
// one lora_shrink computes x·Aᵀ for all of them; stored transposed) with
// a slot table, and one buffer of the B rows of all the weights behind a
// table of where each (slot, weight)'s rows start, their length, its
// scale and its columns in h, which the fused projections and lora_expand
// read alike.
// Each weight's rank is padded to a multiple of 4 (zero rows of A, zero
// columns of B), so that a projection's epilogue reads a column's row of
// B and a row of h a quad of four values at a time, as the GEMVs read
// weights and x.
// Where every value of every slot is a half (adapters stored in F16, as
// llama.cpp's converter writes them), both buffers hold halves, two to a
// u32, which the kernels widen (shaders.Fusion.Half).
type LoRA struct {
	in      int
	outs    []int         // the weights' widths
	adapts  []bool        // whether some slot adapts weight k
	a       webgpu.Buffer // the slot table, per slot: the element of its Aᵀ, Σ padded rank, 0, 0; then per slot its Aᵀ, [in, Σ padded rank]
	bt      webgpu.Buffer // per (slot, weight): the element of its B row 0, quads a row, scale, first column in h; then the rows
	n       int           // slots
	maxRank int           // h's stride: the largest Σ padded rank of a slot
	rank    int           // the largest Σ rank of a slot
	half    bool          // a's and bt's values are halves (Fusion.Half)
}

func (l *LoRA) Slots() int   { return l.n }
func (l *LoRA) MaxRank() int { return l.rank }
func (l *LoRA) Outs() []int  { return l.outs }

func (b *Backend) NewLoRA(in int, outs ...int) (backend.LoRA, error) {
	if in <= 0 || len(outs) == 0 || slices.Min(outs) <= 0 {
		return nil, fmt.Errorf("gpu: lora of %v×%d", outs, in)
	}
	return &LoRA{in: in, outs: slices.Clone(outs), adapts: make([]bool, len(outs))}, nil
}

// pad4 is r rounded up to a multiple of 4.
func pad4(r int) int { return (r + 3) &^ 3 }

func (b *Backend) SetLoRA(l backend.LoRA, slots [][]backend.LoRASlot) error {
	c := l.(*LoRA)
	if err := backend.CheckLoRA(slots, c.in, c.outs); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if b.pending { // recorded work may still read the old adapters
		if err := b.submit(); err != nil {
			return err
		}
	}
	// The shrink side: per slot its A rows, weight by weight, each
	// weight's padded with zero rows, stored transposed ([in, Σ padded
	// rank]): a lora_shrink invocation's four columns at one step of its
	// loop over in are one quad, and a workgroup's invocations read
	// consecutive quads. One buffer behind a table of the slots, so that a
	// product computing h itself (Fusion.Shrink) binds no more than one
	// reading lora_shrink's.
	var a []float32
	aEntries := make([][4]uint32, len(slots)) // quads before the slot's Aᵀ, Σ padded rank
	c.maxRank, c.rank = 0, 0
	for j, ws := range slots {
		var rows []float32 // the slot's A rows, padded
		rank, padded := 0, 0
		for _, w := range ws {
			rows = append(rows, w.A...)
			rows = append(rows, make([]float32, (pad4(w.Rank)-w.Rank)*c.in)...)
			rank, padded = rank+w.Rank, padded+pad4(w.Rank)
		}
		aEntries[j] = [4]uint32{uint32(len(a) / 4), uint32(padded)}
		at := make([]float32, len(rows))
		for t := range padded {
			for i := range c.in {
				at[i*padded+t] = rows[t*c.in+i]
			}
		}
		a = append(a, at...)
		c.maxRank, c.rank = max(c.maxRank, padded), max(c.rank, rank)
	}
	// The expand side: weight by weight, slot by slot, the rows of B,
	// each of the padded rank, behind a table of (slot, weight)s.
	nw := len(c.outs)
	var bv []float32
	bEntries := make([][4]uint32, len(slots)*nw) // quads before B's row 0, quads a row, scale, column in h
	for k, out := range c.outs {
		c.adapts[k] = false
		for j, ws := range slots {
			w, col := ws[k], 0
			for _, v := range ws[:k] {
				col += pad4(v.Rank)
			}
			r4 := pad4(w.Rank)
			bEntries[j*nw+k] = [4]uint32{uint32(len(bv) / 4), uint32(r4 / 4), math.Float32bits(w.Scale), uint32(col)}
			rows := make([]float32, out*r4)
			for i := range out {
				copy(rows[i*r4:i*r4+w.Rank], w.B[i*w.Rank:])
			}
			bv = append(bv, rows...)
			c.adapts[k] = c.adapts[k] || w.Rank > 0
		}
	}
	// Halves where every value is one (adapters stored in F16): half the
	// memory and half the bytes a step reads, the same values.
	a16, b16 := dtype.Halves(a), dtype.Halves(bv)
	c.half = len(a)+len(bv) > 0 && a16 != nil && b16 != nil
	if err := b.uploadLoRA(&c.a, loraValues(aEntries, a, a16, c.half), c); err != nil {
		return err
	}
	if err := b.uploadLoRA(&c.bt, loraValues(bEntries, bv, b16, c.half), c); err != nil {
		return err
	}
	c.n = len(slots)
	return b.loraScratch(c.maxRank)
}

// loraValues lays out an adapters' buffer as lora.inc.wgsl's
// lora_values reads it: the table, each entry's first word offset by the
// table's elements (its quads of values before), then the values, f32 or
// (half) v16. An element is a quad of four values: 16 bytes, or 8 of
// halves.
func loraValues(table [][4]uint32, v []float32, v16 []uint16, half bool) []byte {
	quad := 16
	if half {
		quad = 8
	}
	head := make([]uint32, 0, 4*len(table))
	for _, e := range table {
		e[0] += uint32(len(table) * 16 / quad)
		head = append(head, e[:]...)
	}
	out := u32bytes(head)
	if !half {
		return append(out, f32bytes(v)...)
	}
	out = slices.Grow(out, 2*len(v16))
	for _, h := range v16 {
		out = binary.LittleEndian.AppendUint16(out, h)
	}
	return out
}

// uploadLoRA writes data to *dst, growing it as needed; nothing for no data.
func (b *Backend) uploadLoRA(dst *webgpu.Buffer, data []byte, c *LoRA) error {
	if len(data) == 0 {
		return nil
	}
	if int64(len(data)) > b.info.MaxStorageBufferBindingSize {
		return fmt.Errorf("gpu: adapters of a %d-wide input (%s) exceed the storage binding limit", c.in, dtype.FormatBytes(int64(len(data))))
	}
	if *dst == nil || (*dst).Size() < int64(len(data)) {
		buf, err := b.buffer("lora", int64(len(data)), webgpu.Storage|webgpu.CopyDst)
		if err != nil {
			return err
		}
		*dst = buf
	}
	if err := b.dev.Write(*dst, 0, data); err != nil {
		return fmt.Errorf("gpu: upload lora: %w", err)
	}
	return nil
}

// loraScratch makes sure h can hold maxRows rows of r values, for the
// batch's rows and for its output rows.
func (b *Backend) loraScratch(r int) error {
	size := int64(4 * b.maxRows * max(r, 1))
	if b.loraH != nil && b.loraH.Size() >= size {
		return nil
	}
	var err error
	if b.loraH, err = b.buffer("lora h", size, webgpu.Storage); err != nil {
		return err
	}
	if b.loraHOut, err = b.buffer("lora h (outputs)", size, webgpu.Storage); err != nil {
		return err
	}
	b.outputs[b.loraHOut] = true
	return nil
}

func (b *Backend) AddLoRA(x backend.Tensor, l backend.LoRA, dsts ...backend.Tensor) {
	c := l.(*LoRA)
	if len(dsts) != len(c.outs) || !b.loraShrink(x.(*Tensor), c, dsts[0].(*Tensor), nil, 0) {
		return
	}
	for k, d := range dsts {
		b.loraExpand(c, k, d.(*Tensor))
	}
}

// EmbedLoRA is AddLoRA for the token embeddings: lora_gather copies each
// adapter row's token's row of Aᵀ into h (the one-hot input's product),
// then lora_expand adds s·h·Bᵀ.
func (b *Backend) EmbedLoRA(dst backend.Tensor, l backend.LoRA) {
	c, d := l.(*LoRA), dst.(*Tensor)
	if len(c.outs) != 1 || d.out {
		b.fail(fmt.Errorf("gpu: EmbedLoRA takes a LoRA of one weight and batch rows"))
		return
	}
	n := b.rows(d)
	if _, groups := b.loraGrid(c, false, n); groups == 0 {
		return
	}
	x, y := b.grid(n*c.maxRank/4, 64)
	o := loraGatherOp
	o.fusion = shaders.Fusion{Half: c.half}
	o.consts = map[string]float64{"R": float64(c.maxRank)}
	b.record(o, params{uint32(c.in), uint32(d.rows), uint32(c.n), uint32(c.maxRank), 0, 0, 0, 0, 0},
		[]webgpu.Binding{{Buffer: b.loraH}, {Buffer: b.tokens}, {Buffer: c.a}, {Buffer: b.rowLoRA}}, x, y, 1)
	b.loraExpand(c, 0, d)
}

// loraGrid is the grid's rows of a LoRA step over n rows (or output
// rows): MAXM, and the groups of up to MAXM rows of one slot; 0 groups
// when no row runs one of c's slots (or c adapts nothing).
func (b *Backend) loraGrid(c *LoRA, out bool, n int) (maxm, groups int) {
	if c.maxRank == 0 || c.n == 0 || b.batch.Adapter == nil {
		return 0, 0
	}
	most := b.loraGroupRows(out, c.n, n)
	maxm = 8
	for _, m := range []int{2, 4} {
		if most <= m {
			maxm = m
			break
		}
	}
	return maxm, (most + maxm - 1) / maxm
}

// loraBuffers are h and the per-row slot table of batch rows or of
// output rows.
func (b *Backend) loraBuffers(out bool) (h, rows webgpu.Buffer) {
	if out {
		return b.loraHOut, b.outLoRA
	}
	return b.loraH, b.rowLoRA
}

// loraShrink records h = x·Aᵀ of c for the rows of x with an adapter
// slot of c, x's rows being those of d (batch or output rows), with norm
// (not nil) h = (x/rms(x) ∘ norm)·Aᵀ; false (nothing recorded) when there
// are no such rows.
func (b *Backend) loraShrink(xs *Tensor, c *LoRA, d *Tensor, norm backend.Weight, eps float32) bool {
	maxm, groups := b.loraGrid(c, d.out, b.rows(d))
	if groups == 0 {
		return false
	}
	h, rows := b.loraBuffers(d.out)
	ks := b.shrinkSplits(c.in)
	o := loraShrinkOp
	o.consts = map[string]float64{"R": float64(c.maxRank), "MAXM": float64(maxm), "KS": float64(ks)}
	binds := []webgpu.Binding{{Buffer: h}, {Buffer: xs.buf}, {Buffer: c.a}, {Buffer: rows}}
	o.fusion = shaders.Fusion{Half: c.half}
	if norm != nil {
		o.fusion.Norm = true
		o.operands = append(slices.Clone(o.operands), webgpu.ReadOnly)
		binds = append(binds, webgpu.Binding{Buffer: norm.(*Weight).parts[0].buf})
	}
	quads := 64 / ks // a workgroup's column quads
	keep := b.next.seq == b.seq
	b.record(o, params{uint32(c.in), uint32(xs.rows), uint32(c.n), uint32(c.maxRank), uint32(maxm), 0, 0, f32param(eps), uint32(ks)},
		binds, uint32((c.maxRank+4*quads-1)/(4*quads)), uint32(groups), uint32(c.n))
	if keep { // the shrink writes only h: an input prepared just before stays valid
		b.next.seq = b.seq
	}
	return true
}

// shrinkSplits is lora_shrink's KS for inputs of width k: on a CPU
// adapter (or with Plan.Shrink "whole") 1, an invocation streaming its
// four columns' whole rows; on a GPU (or with "split") the invocations
// that split the width, 32 to 64 inputs each, at most 16 (a workgroup
// then takes 16 columns): the shrink of a few adapters is a few column
// quads per adapter, too few invocations to fill a GPU unless each
// column's width is shared.
func (b *Backend) shrinkSplits(k int) int {
	switch b.plan.Shrink {
	case "whole":
		return 1
	case "":
		if b.info.DeviceType == "cpu" {
			return 1
		}
	}
	ks := 1
	for ks < 16 && 64*ks <= k {
		ks *= 2
	}
	return ks
}

// loraExpand records d += s·h·Bᵀ of c's weight k, for the rows of d with
// an adapter slot of c (after loraShrink).
func (b *Backend) loraExpand(c *LoRA, k int, d *Tensor) {
	maxm, groups := b.loraGrid(c, d.out, b.rows(d))
	if groups == 0 || !c.adapts[k] {
		return
	}
	h, rows := b.loraBuffers(d.out)
	o := loraExpandOp
	o.fusion = shaders.Fusion{Half: c.half}
	o.consts = map[string]float64{"R": float64(c.maxRank), "MAXM": float64(maxm)}
	b.record(o, params{uint32(d.cols), uint32(d.rows), uint32(c.n), uint32(c.maxRank), uint32(maxm), uint32(k), uint32(len(c.outs)), 0, 0},
		[]webgpu.Binding{{Buffer: d.buf}, {Buffer: h}, {Buffer: c.bt}, {Buffer: rows}}, uint32((d.cols+255)/256), uint32(groups), uint32(c.n))
}

// projectLoRA is Project for a step with rows of c's adapters:
// lora_shrink, then the product with the adapters in its epilogue or,
// where that kernel does not fit the device (loraFused), the product as
// without adapters and a lora_expand per weight, a GLU's gate and up split
// first and joined after. A norm, if any, is the shrink's and the
// product's own where the product takes it as its prologue (GPUs: two
// dispatches in all); elsewhere it is a dispatch of its own whose output
// both read.
func (b *Backend) projectLoRA(p backend.Projection, w *Weight, c *LoRA) {
	xs, d := p.X.(*Tensor), p.Out[0].(*Tensor)
	if b.shrinkInside(p, w, c) {
		b.project(p, w, true, true)
		return
	}
	if p.Norm != nil && (b.normPrologue() || b.prepared(xs, p.Norm)) && b.composes(d, xs, w) && b.loraFused(p, w) {
		b.loraShrink(xs, c, d, p.Norm, p.Eps)
		b.project(p, w, true, false)
		return
	}
	if p.Norm != nil {
		x, err := b.scratch(xs, -xs.cols)
		if err != nil {
			b.fail(err)
			return
		}
		b.RMSNorm(x, xs, p.Norm, p.Eps)
		p.X, p.Norm, xs = x, nil, x
	}
	b.loraShrink(xs, c, d, nil, 0)
	if b.loraFused(p, w) {
		b.project(p, w, true, false)
		return
	}
	q := p
	q.LoRA = nil
	var up *Tensor
	if p.GLU {
		var err error
		if up, err = b.scratch(d, d.cols); err != nil {
			b.fail(err)
			return
		}
		q.GLU, q.Out = false, []backend.Tensor{d, up}
	}
	b.project(q, w, false, false)
	for k, o := range q.Out {
		b.loraExpand(c, k, o.(*Tensor))
	}
	if up != nil {
		b.GLU(d, up, p.Act)
	}
}

// shrinkInside reports whether p's product computes its adapters' h
// itself (shaders.Fusion.Shrink), saving lora_shrink's dispatch: where it
// is a GEMV, h fits its workgroup memory and the bindings the device's
// limit, and the work it does again costs less than a dispatch: on CPU
// adapters (about 100 µs a dispatch on lavapipe, where a workgroup is one
// thread's) at most 1<<14 multiply-adds in all its workgroups (stories260K
// at rank 8: BenchmarkLoRADecode, lavapipe, 4 adapters 1,456 → 1,749
// tok/s; at rank 64, 1<<16 of them a workgroup made it 10% slower than
// the shrink's dispatch), on GPUs at most 1<<16 a workgroup, which its
// 256 invocations share. Plan.LoRA "inline" takes it wherever it can, any
// other plan never.
func (b *Backend) shrinkInside(p backend.Projection, w *Weight, c *LoRA) bool {
	if b.plan.LoRA != "" && b.plan.LoRA != "inline" {
		return false
	}
	xs, d := p.X.(*Tensor), p.Out[0].(*Tensor)
	m, k := b.rows(d), xs.cols
	f := projection(p, w, true, true)
	if !b.composes(d, xs, w) || gemvMaxRows*c.maxRank > lwhValues || !b.fits(w, k, f) {
		return false
	}
	if b.plan.LoRA == "inline" {
		return true
	}
	groups, maxm := b.gemvGroups(w, m, k, f)
	work := maxm * c.maxRank * k // a workgroup's multiply-adds for h
	if b.info.DeviceType == "cpu" {
		return groups*work <= 1<<14
	}
	return work <= 1<<16
}

// lwhValues is the size of a GEMV's h in workgroup memory with Shrink
// (fusion.inc.wgsl's LWH).
const lwhValues = 1024

// gemvGroups is the workgroups of the GEMV of w for m rows of width k,
// composed with f, over all its parts, and its rows a block.
func (b *Backend) gemvGroups(w *Weight, m, k int, f shaders.Fusion) (groups, maxm int) {
	cpu := b.info.DeviceType == "cpu"
	var tpc int
	if w.storage == backend.F32 {
		pl := planMatMul(m, k, cpu, b.plan.MatMul)
		tpc, maxm = pl.tpc, pl.maxm
	} else {
		_, cpu = b.planQuant(m, k)
		tpc, maxm = quantTPC(w.format(), k, cpu), blockRows(m)
	}
	_, _, cpi, perWG := b.gemv(w.format(), maxm, tpc, f)
	for _, pt := range w.parts {
		groups += (pt.rows + cpi*perWG - 1) / (cpi * perWG)
	}
	return groups * ((m + maxm - 1) / maxm), maxm
}

// loraFused reports whether p's product takes its adapters in the
// epilogue: unless Plan.LoRA says "unfused", where the GEMV so composed
// binds no more storage buffers than the device allows (the tiled GEMMs
// and the naive kernel, which go through fuse_epilogue, bind fewer).
func (b *Backend) loraFused(p backend.Projection, w *Weight) bool {
	if b.plan.LoRA == "fused" || b.plan.LoRA == "unfused" {
		return b.plan.LoRA == "fused"
	}
	return b.fits(w, p.X.Cols(), projection(p, w, true, false))
}

// loraGroupRows is the most rows that one of the first nslots slots has
// among the first n batch rows (or output rows): the kernels' grid takes
// groups of up to MAXM of them.
func (b *Backend) loraGroupRows(out bool, nslots, n int) int {
	var small [16]int
	counts := small[:]
	if nslots > len(small) {
		counts = make([]int, nslots)
	}
	most := 0
	for i := range n {
		r := i
		if out {
			r = int(b.batch.Out[i])
		}
		if j := int(b.batch.Adapter[r]); j >= 0 && j < nslots {
			counts[j]++
			most = max(most, counts[j])
		}
	}
	return most
}

// loraRows lays out the per-row slot and scale of a batch (rows) and of its
// output rows (outs), as the kernels' Row struct reads them.
func loraRows(batch backend.Batch) (rows, outs []byte) {
	row := func(dst []byte, r int) {
		slot, scale := int32(-1), float32(0)
		if batch.Adapter != nil {
			slot, scale = batch.Adapter[r], batch.AdapterScale[r]
		}
		binary.LittleEndian.PutUint32(dst, uint32(slot))
		binary.LittleEndian.PutUint32(dst[4:], math.Float32bits(scale))
	}
	rows, outs = make([]byte, 8*batch.Len()), make([]byte, 8*len(batch.Out))
	for i := range batch.Len() {
		row(rows[8*i:], i)
	}
	for i, r := range batch.Out {
		row(outs[8*i:], int(r))
	}
	return rows, outs
}

// loraRowsIf is loraRows' rows (or outs), or nil for a batch without
// adapters, whose rows' slots no op reads.
func loraRowsIf(batch backend.Batch, outs bool) []byte {
	if !batch.HasAdapters() {
		return nil
	}
	r, o := loraRows(batch)
	if outs {
		return o
	}
	return r
}
