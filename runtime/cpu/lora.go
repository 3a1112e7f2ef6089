package cpu

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// LoRA is the adapters of weights that share an input: per slot, the A
// rows of all its weights stacked (one product gives x·Aᵀ for all of
// them), and per weight its B, rank, scale and columns in that product.
type LoRA struct {
	in      int
	outs    []int
	slots   []loraSlot
	maxRank int
}

type loraSlot struct {
	rank int       // Σ of the weights' ranks: the columns of h
	a    []float32 // [rank, in]: weight 0's A rows, then weight 1's...
	w    []loraWeight
}

type loraWeight struct {
	rank, col int // col: the weight's first column in h
	b         []float32
	scale     float32
}

func (l *LoRA) Slots() int   { return len(l.slots) }
func (l *LoRA) MaxRank() int { return l.maxRank }

func (b *Backend) NewLoRA(in int, outs ...int) (backend.LoRA, error) {
	if in <= 0 || len(outs) == 0 || slices.Min(outs) <= 0 {
		return nil, fmt.Errorf("cpu: lora of %v×%d", outs, in)
	}
	return &LoRA{in: in, outs: slices.Clone(outs)}, nil
}

func (b *Backend) SetLoRA(l backend.LoRA, slots [][]backend.LoRASlot) error {
	c := l.(*LoRA)
	if err := backend.CheckLoRA(slots, c.in, c.outs); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	size := func(s []loraSlot) (n int64) {
		for _, x := range s {
			n += 4 * int64(len(x.a))
			for _, w := range x.w {
				n += 4 * int64(len(w.b))
			}
		}
		return n
	}
	kept := make([]loraSlot, len(slots))
	maxRank := 0
	for j, ws := range slots {
		s := &kept[j]
		for _, w := range ws {
			s.w = append(s.w, loraWeight{rank: w.Rank, col: s.rank, b: slices.Clone(w.B), scale: w.Scale})
			s.a = append(s.a, w.A...)
			s.rank += w.Rank
		}
		maxRank = max(maxRank, s.rank)
	}
	b.stats.Memory += size(kept) - size(c.slots)
	c.slots, c.maxRank = kept, maxRank
	return nil
}

// loraBufs holds AddLoRA's buffers, grown to the largest call and reused,
// so that a step allocates nothing.
type loraBufs struct {
	start, next []int // rows grouped by slot: slot j's are rows[start[j]:start[j+1]]
	rows        []int
	x, h, hw, y []float32 // one slot's rows of x, x·Aᵀ, one weight's columns of it, and its (x·Aᵀ)·Bᵀ
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// AddLoRA groups the rows by adapter slot (a counting sort), then for each
// slot computes x·Aᵀ for all the weights at once and each weight's
// (x·Aᵀ)·Bᵀ as matrix products with the matmul helper, so that the rows
// of one adapter share each read of its A and B, and adds them scaled by
// each row's scale. Rows without an adapter cost nothing. The sums run in
// the order of the WGSL kernels': x·A row by row, then each output as
// Σ_t h_t·B[o, t], times (row scale · slot scale).
func (b *Backend) AddLoRA(x backend.Tensor, l backend.LoRA, dsts ...backend.Tensor) {
	b.op()
	xs, c := x.(*Tensor), l.(*LoRA)
	if c.maxRank == 0 || b.batch.Adapter == nil || len(dsts) != len(c.outs) {
		return
	}
	if b.lora == nil {
		b.lora = new(loraBufs)
	}
	out := dsts[0].(*Tensor).out
	n, sc := b.rows(dsts[0]), b.lora
	batchRow := func(i int) int { // row i of the dsts is this row of the batch
		if out {
			return int(b.batch.Out[i])
		}
		return i
	}
	slot := func(i int) int {
		if j := int(b.batch.Adapter[batchRow(i)]); j >= 0 && j < len(c.slots) && c.slots[j].rank > 0 {
			return j
		}
		return -1
	}
	sc.start = slices.Grow(sc.start[:0], len(c.slots)+1)[:len(c.slots)+1]
	clear(sc.start)
	for i := range n {
		if j := slot(i); j >= 0 {
			sc.start[j+1]++
		}
	}
	for j := range c.slots {
		sc.start[j+1] += sc.start[j]
	}
	sc.rows = slices.Grow(sc.rows[:0], n)[:sc.start[len(c.slots)]]
	sc.next = append(sc.next[:0], sc.start[:len(c.slots)]...)
	for i := range n {
		if j := slot(i); j >= 0 {
			sc.rows[sc.next[j]] = i
			sc.next[j]++
		}
	}
	for j, s := range c.slots {
		rows := sc.rows[sc.start[j]:sc.start[j+1]]
		m := len(rows)
		if m == 0 {
			continue
		}
		sc.x, sc.h = grow(sc.x, m*c.in), grow(sc.h, m*s.rank)
		for k, i := range rows {
			copy(sc.x[k*c.in:(k+1)*c.in], xs.Data[i*c.in:(i+1)*c.in])
		}
		matMul(sc.h, sc.x, s.a, m, c.in, s.rank, b.team)
		for k, w := range s.w {
			if w.rank == 0 {
				continue
			}
			h := sc.h
			if w.rank != s.rank { // this weight's columns of h, contiguous
				sc.hw = grow(sc.hw, m*w.rank)
				for r := range m {
					copy(sc.hw[r*w.rank:(r+1)*w.rank], sc.h[r*s.rank+w.col:])
				}
				h = sc.hw
			}
			d, dout := dsts[k].(*Tensor), c.outs[k]
			sc.y = grow(sc.y, m*dout)
			matMul(sc.y, h, w.b, m, w.rank, dout, b.team)
			for r, i := range rows {
				scale := b.batch.AdapterScale[batchRow(i)] * w.scale
				row, y := d.Data[i*dout:(i+1)*dout], sc.y[r*dout:(r+1)*dout]
				for o, v := range y {
					row[o] += scale * v
				}
			}
		}
	}
}
