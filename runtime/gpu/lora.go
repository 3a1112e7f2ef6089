package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// Unmerged LoRA: after the MatMuls of the weights that share an input,
// one lora_shrink computes h = x·Aᵀ for all of them (q, k and v; gate and
// up) with the A of each row's own adapter slot, and one lora_expand per
// weight adds s·h·Bᵀ from that weight's columns of h: each row
// finds its slot in the per-row slot buffer (rowLoRA, or outLoRA for
// output tensors, whose rows are the batch's Out rows), so one batch
// mixes adapters and rows without one. Both grids are slots × groups of
// up to MAXM rows of one slot × columns: a workgroup serves one group of
// rows of one adapter, reading that adapter's A or Bᵀ once for all of
// them. MAXM (2, 4 or 8) and the group count follow from the most rows
// one slot has in the step, so that a step of 8 rows over 4 adapters
// does the work of 8 rows, not of 4 × 8. Both kernels are specialised by
// R, the largest rank among the weight's slots (h's stride), and MAXM.

var (
	loraShrinkOp = op{kernel: "lora_shrink", operands: []Access{ReadWrite, ReadOnly, ReadOnly, ReadOnly, ReadOnly}}
	loraExpandOp = op{kernel: "lora_expand", operands: []Access{ReadWrite, ReadOnly, ReadOnly, ReadOnly, ReadOnly}}
)

// LoRA is the adapters of weights that share an input, on the device:
// A rows slot by slot (each slot's weights one after the other, so that
// one lora_shrink computes x·Aᵀ for all of them) with a slot table, and
// per weight the rows of Bᵀ slot by slot with a table that also says
// where the weight's columns start in h.
type LoRA struct {
	in      int
	outs    []loraOut
	a       Buffer // [ΣRank, in]
	slots   Buffer // per slot: first row of a, Σ rank, 0, 0
	n       int    // slots
	maxRank int    // h's stride: the largest Σ rank of a slot
}

// loraOut is one weight of a LoRA.
type loraOut struct {
	out     int
	bt      Buffer // [ΣRank, out]
	slots   Buffer // per slot: first row of bt, rank, scale, first column in h
	maxRank int    // 0: no slot adapts this weight
}

func (l *LoRA) Slots() int   { return l.n }
func (l *LoRA) MaxRank() int { return l.maxRank }

func (b *Backend) NewLoRA(in int, outs ...int) (backend.LoRA, error) {
	if in <= 0 || len(outs) == 0 || slices.Min(outs) <= 0 {
		return nil, fmt.Errorf("gpu: lora of %v×%d", outs, in)
	}
	l := &LoRA{in: in}
	for _, o := range outs {
		l.outs = append(l.outs, loraOut{out: o})
	}
	return l, nil
}

func (b *Backend) SetLoRA(l backend.LoRA, slots [][]backend.LoRASlot) error {
	c := l.(*LoRA)
	outs := make([]int, len(c.outs))
	for k, o := range c.outs {
		outs[k] = o.out
	}
	if err := backend.CheckLoRA(slots, c.in, outs); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if b.pending { // recorded work may still read the old adapters
		if err := b.submit(); err != nil {
			return err
		}
	}
	// The shrink side: A rows slot by slot, weight by weight.
	var a []float32
	table := make([]byte, 16*max(len(slots), 1))
	c.maxRank = 0
	for j, ws := range slots {
		binary.LittleEndian.PutUint32(table[16*j:], uint32(len(a)/c.in))
		rank := 0
		for _, w := range ws {
			a = append(a, w.A...)
			rank += w.Rank
		}
		binary.LittleEndian.PutUint32(table[16*j+4:], uint32(rank))
		c.maxRank = max(c.maxRank, rank)
	}
	if err := b.uploadLoRA(&c.a, f32bytes(a), c); err != nil {
		return err
	}
	if err := b.uploadLoRA(&c.slots, table, c); err != nil {
		return err
	}
	// The expand side, weight by weight: Bᵀ rows slot by slot.
	for k := range c.outs {
		o := &c.outs[k]
		var rows int
		for _, ws := range slots {
			rows += ws[k].Rank
		}
		bt := make([]float32, rows*o.out)
		table := make([]byte, 16*max(len(slots), 1))
		row := 0
		o.maxRank = 0
		for j, ws := range slots {
			w, col := ws[k], 0
			for _, v := range ws[:k] {
				col += v.Rank
			}
			for i := range o.out {
				for t := range w.Rank {
					bt[(row+t)*o.out+i] = w.B[i*w.Rank+t]
				}
			}
			binary.LittleEndian.PutUint32(table[16*j:], uint32(row))
			binary.LittleEndian.PutUint32(table[16*j+4:], uint32(w.Rank))
			binary.LittleEndian.PutUint32(table[16*j+8:], math.Float32bits(w.Scale))
			binary.LittleEndian.PutUint32(table[16*j+12:], uint32(col))
			row += w.Rank
			o.maxRank = max(o.maxRank, w.Rank)
		}
		if err := b.uploadLoRA(&o.bt, f32bytes(bt), c); err != nil {
			return err
		}
		if err := b.uploadLoRA(&o.slots, table, c); err != nil {
			return err
		}
	}
	c.n = len(slots)
	return b.loraScratch(c.maxRank)
}

// uploadLoRA writes data to *dst, growing it as needed; nothing for no data.
func (b *Backend) uploadLoRA(dst *Buffer, data []byte, c *LoRA) error {
	if len(data) == 0 {
		return nil
	}
	if int64(len(data)) > b.info.MaxStorageBufferBindingSize {
		return fmt.Errorf("gpu: adapters of a %d-wide input (%s) exceed the storage binding limit", c.in, FormatBytes(int64(len(data))))
	}
	if *dst == nil || (*dst).Size() < int64(len(data)) {
		buf, err := b.buffer("lora", int64(len(data)), Storage|CopyDst)
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
	if b.loraH, err = b.buffer("lora h", size, Storage); err != nil {
		return err
	}
	if b.loraHOut, err = b.buffer("lora h (outputs)", size, Storage); err != nil {
		return err
	}
	b.outputs[b.loraHOut] = true
	return nil
}

func (b *Backend) AddLoRA(x backend.Tensor, l backend.LoRA, dsts ...backend.Tensor) {
	xs, c := x.(*Tensor), l.(*LoRA)
	if c.maxRank == 0 || c.n == 0 || len(dsts) != len(c.outs) {
		return
	}
	d0 := dsts[0].(*Tensor)
	h, rows := b.loraH, b.rowLoRA
	if d0.out {
		h, rows = b.loraHOut, b.outLoRA
	}
	most := b.loraGroupRows(d0.out, c.n, b.rows(d0))
	if most == 0 {
		return
	}
	maxm := 8
	for _, m := range []int{2, 4} {
		if most <= m {
			maxm = m
			break
		}
	}
	groups := uint32((most + maxm - 1) / maxm)
	consts := map[string]float64{"R": float64(c.maxRank), "MAXM": float64(maxm)}
	shrink, expand := loraShrinkOp, loraExpandOp
	shrink.consts, expand.consts = consts, consts
	b.record(shrink, params{uint32(c.in), uint32(d0.rows), uint32(c.n), uint32(c.maxRank), uint32(maxm)},
		[]Binding{{Buffer: h}, {Buffer: xs.buf}, {Buffer: c.a}, {Buffer: rows}, {Buffer: c.slots}}, uint32((c.maxRank+63)/64), groups, uint32(c.n))
	for k, o := range c.outs {
		if o.maxRank == 0 {
			continue
		}
		d := dsts[k].(*Tensor)
		b.record(expand, params{uint32(d.cols), uint32(d.rows), uint32(c.n), uint32(c.maxRank), uint32(maxm)},
			[]Binding{{Buffer: d.buf}, {Buffer: h}, {Buffer: o.bt}, {Buffer: rows}, {Buffer: o.slots}}, uint32((d.cols+255)/256), groups, uint32(c.n))
	}
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
