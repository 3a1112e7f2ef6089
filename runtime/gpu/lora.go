package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// Unmerged LoRA: two dispatches per adapted weight, after its MatMul.
// lora_shrink computes h = x·Aᵀ for every row with the A of the row's own
// adapter slot, lora_expand adds s·h·Bᵀ with that slot's Bᵀ: each row
// finds its slot in the per-row slot buffer (rowLoRA, or outLoRA for
// output tensors, whose rows are the batch's Out rows), so one batch
// mixes adapters and rows without one. Both grids are slots × blocks of
// loraMaxRows rows × columns: a workgroup serves the rows of one adapter
// in its block, reading that adapter's A or Bᵀ once for all of them, and
// one without such rows returns at once. Both kernels are specialised by
// R, the largest rank among the weight's slots (h's stride).
//
// loraMaxRows is the rows of a block: a decode step of up to 8 sequences
// is one block.
const loraMaxRows = 8

var (
	loraShrinkOp = op{kernel: "lora_shrink", operands: []Access{ReadWrite, ReadOnly, ReadOnly, ReadOnly, ReadOnly}}
	loraExpandOp = op{kernel: "lora_expand", operands: []Access{ReadWrite, ReadOnly, ReadOnly, ReadOnly, ReadOnly}}
)

// LoRA is a weight's adapters on the device, packed as
// backend.LoRALayout lays them out.
type LoRA struct {
	in, out  int
	a, bt    Buffer // [ΣRank, in] and [ΣRank, out]
	slots    Buffer // per slot: first row, rank, scale, padding
	n, ranks int    // slots, and ΣRank
	maxRank  int
}

func (l *LoRA) Slots() int   { return l.n }
func (l *LoRA) MaxRank() int { return l.maxRank }

func (b *Backend) NewLoRA(in, out int) (backend.LoRA, error) {
	if in <= 0 || out <= 0 {
		return nil, fmt.Errorf("gpu: lora of %d×%d", out, in)
	}
	return &LoRA{in: in, out: out}, nil
}

func (b *Backend) SetLoRA(l backend.LoRA, slots []backend.LoRASlot) error {
	c := l.(*LoRA)
	a, bt, off, rank, scale, err := backend.LoRALayout(slots, c.in, c.out)
	if err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if b.pending { // recorded work may still read the old adapters
		if err := b.submit(); err != nil {
			return err
		}
	}
	table := make([]byte, 16*max(len(slots), 1))
	c.maxRank = 0
	for j := range slots {
		binary.LittleEndian.PutUint32(table[16*j:], uint32(off[j]))
		binary.LittleEndian.PutUint32(table[16*j+4:], uint32(rank[j]))
		binary.LittleEndian.PutUint32(table[16*j+8:], math.Float32bits(scale[j]))
		c.maxRank = max(c.maxRank, int(rank[j]))
	}
	for _, w := range []struct {
		dst  *Buffer
		data []byte
	}{{&c.a, f32bytes(a)}, {&c.bt, f32bytes(bt)}, {&c.slots, table}} {
		if len(w.data) == 0 {
			continue
		}
		if int64(len(w.data)) > b.info.MaxStorageBufferBindingSize {
			return fmt.Errorf("gpu: adapters of a %d×%d weight (%s) exceed the storage binding limit", c.out, c.in, FormatBytes(int64(len(w.data))))
		}
		if *w.dst == nil || (*w.dst).Size() < int64(len(w.data)) {
			buf, err := b.buffer("lora", int64(len(w.data)), Storage|CopyDst)
			if err != nil {
				return err
			}
			*w.dst = buf
		}
		if err := b.dev.Write(*w.dst, 0, w.data); err != nil {
			return fmt.Errorf("gpu: upload lora: %w", err)
		}
	}
	c.n, c.ranks = len(slots), 0
	for _, r := range rank {
		c.ranks += int(r)
	}
	return b.loraScratch(c.maxRank)
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

func (b *Backend) AddLoRA(dst, x backend.Tensor, l backend.LoRA) {
	d, xs, c := dst.(*Tensor), x.(*Tensor), l.(*LoRA)
	if c.maxRank == 0 || c.n == 0 {
		return
	}
	h, rows := b.loraH, b.rowLoRA
	if d.out {
		h, rows = b.loraHOut, b.outLoRA
	}
	n := b.rows(d)
	consts := map[string]float64{"R": float64(c.maxRank), "MAXM": loraMaxRows}
	shrink, expand := loraShrinkOp, loraExpandOp
	shrink.consts, expand.consts = consts, consts
	blocks := uint32((n + loraMaxRows - 1) / loraMaxRows)
	b.record(shrink, params{uint32(c.in), uint32(d.rows), uint32(c.n), uint32(c.maxRank)},
		[]Binding{{Buffer: h}, {Buffer: xs.buf}, {Buffer: c.a}, {Buffer: rows}, {Buffer: c.slots}}, uint32((c.maxRank+63)/64), blocks, uint32(c.n))
	b.record(expand, params{uint32(d.cols), uint32(d.rows), uint32(c.n), uint32(c.maxRank)},
		[]Binding{{Buffer: d.buf}, {Buffer: h}, {Buffer: c.bt}, {Buffer: rows}, {Buffer: c.slots}}, uint32((d.cols+255)/256), blocks, uint32(c.n))
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
