package cpu

import (
	"fmt"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
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
	rank, col int       // col: the weight's first column in h
	bt        []float32 // Bᵀ, [rank, out]: a row of h times it is rank axpys of out values
	scale     float32
}

func (l *LoRA) Slots() int   { return len(l.slots) }
func (l *LoRA) MaxRank() int { return l.maxRank }
func (l *LoRA) Outs() []int  { return l.outs }

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
				n += 4 * int64(len(w.bt))
			}
		}
		return n
	}
	kept := make([]loraSlot, len(slots))
	maxRank := 0
	for j, ws := range slots {
		s := &kept[j]
		for k, w := range ws {
			out := c.outs[k]
			bt := make([]float32, w.Rank*out)
			for o := range out {
				for r := range w.Rank {
					bt[r*out+o] = w.B[o*w.Rank+r]
				}
			}
			s.w = append(s.w, loraWeight{rank: w.Rank, col: s.rank, bt: bt, scale: w.Scale})
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
	x, h, hw    []float32 // one slot's rows of x, their x·Aᵀ, and one row's columns of a weight in it, scaled
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// AddLoRA groups the rows by adapter slot (a counting sort), then for each
// slot computes x·Aᵀ for all the weights at once with the matmul helper,
// so that the rows of one adapter share each read of its A, and adds each
// weight's s·(x·Aᵀ)·Bᵀ to the outputs, s the row's scale times the
// slot's: per row one kernel.AxpyRows of its scaled h over Bᵀ. Rows
// without an adapter cost nothing. The sums are the WGSL kernels' up to
// rounding: x·A row by row, then each output plus Σ_t (s·h_t)·B[o, t]
// term by term, where lora_expand sums the terms before it scales and adds.
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
			// Each row adds Σ_r (scale·h_r)·Bᵀ[r, :] to its output: one
			// AxpyRows over the out values, not out dot products of rank
			// values (8 for a rank-8 adapter, shorter than a call costs).
			d, dout := dsts[k].(*Tensor), c.outs[k]
			sc.hw = grow(sc.hw, w.rank)
			for r, i := range rows {
				scale := b.batch.AdapterScale[batchRow(i)] * w.scale
				for q, v := range sc.h[r*s.rank+w.col : r*s.rank+w.col+w.rank] {
					sc.hw[q] = scale * v
				}
				kernel.AxpyRows(d.Data[i*dout:(i+1)*dout], sc.hw, w.bt, dout)
			}
		}
	}
}
