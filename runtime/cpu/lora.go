package cpu

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// LoRA is a weight's adapters, slot by slot as SetLoRA was given them.
type LoRA struct {
	in, out int
	slots   []backend.LoRASlot
	maxRank int
}

func (l *LoRA) Slots() int   { return len(l.slots) }
func (l *LoRA) MaxRank() int { return l.maxRank }

func (b *Backend) NewLoRA(in, out int) (backend.LoRA, error) {
	if in <= 0 || out <= 0 {
		return nil, fmt.Errorf("cpu: lora of %d×%d", out, in)
	}
	return &LoRA{in: in, out: out}, nil
}

func (b *Backend) SetLoRA(l backend.LoRA, slots []backend.LoRASlot) error {
	c := l.(*LoRA)
	size := func(s []backend.LoRASlot) (n int64) {
		for _, x := range s {
			n += 4 * int64(len(x.A)+len(x.B))
		}
		return n
	}
	kept := make([]backend.LoRASlot, len(slots))
	maxRank := 0
	for j, s := range slots {
		if s.Rank < 0 || len(s.A) != s.Rank*c.in || len(s.B) != c.out*s.Rank {
			return fmt.Errorf("cpu: lora slot %d: rank %d with A of %d and B of %d values for %d×%d", j, s.Rank, len(s.A), len(s.B), c.out, c.in)
		}
		kept[j] = backend.LoRASlot{Rank: s.Rank, A: slices.Clone(s.A), B: slices.Clone(s.B), Scale: s.Scale}
		maxRank = max(maxRank, s.Rank)
	}
	b.stats.Memory += size(kept) - size(c.slots)
	c.slots, c.maxRank = kept, maxRank
	return nil
}

// loraBufs holds AddLoRA's buffers, grown to the largest call and
// reused, so that a step allocates nothing.
type loraBufs struct {
	start, next []int // rows grouped by slot: slot j's are rows[start[j]:start[j+1]]
	rows        []int
	x, h, y     []float32 // one slot's rows of x, x·Aᵀ and (x·Aᵀ)·Bᵀ
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// AddLoRA groups the rows by adapter slot (a counting sort), then for each
// slot computes its rows' two products as matrix products with the
// matmul helper (so the rows of one adapter share each read of its A and
// B), and adds them scaled by each row's scale. Rows without an adapter,
// or of a slot that does not adapt this weight, cost nothing. The sums
// run in the order of the WGSL kernels': x·A row by row, then each output
// as Σ_t h_t·B[o, t], times (row scale · slot scale).
func (b *Backend) AddLoRA(dst, x backend.Tensor, l backend.LoRA) {
	b.op()
	d, xs, c := dst.(*Tensor), x.(*Tensor), l.(*LoRA)
	if c.maxRank == 0 || b.batch.Adapter == nil {
		return
	}
	if b.lora == nil {
		b.lora = new(loraBufs)
	}
	n, sc := b.rows(d), b.lora
	batchRow := func(i int) int { // row i of dst is this row of the batch
		if d.out {
			return int(b.batch.Out[i])
		}
		return i
	}
	slot := func(i int) int {
		if j := int(b.batch.Adapter[batchRow(i)]); j >= 0 && j < len(c.slots) && c.slots[j].Rank > 0 {
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
		sc.x, sc.h, sc.y = grow(sc.x, m*c.in), grow(sc.h, m*s.Rank), grow(sc.y, m*c.out)
		for k, i := range rows {
			copy(sc.x[k*c.in:(k+1)*c.in], xs.Data[i*c.in:(i+1)*c.in])
		}
		MatMul(sc.h, sc.x, s.A, m, c.in, s.Rank, b.workers)
		MatMul(sc.y, sc.h, s.B, m, s.Rank, c.out, b.workers)
		for k, i := range rows {
			scale := b.batch.AdapterScale[batchRow(i)] * s.Scale
			row, y := d.Data[i*c.out:(i+1)*c.out], sc.y[k*c.out:(k+1)*c.out]
			for o, v := range y {
				row[o] += scale * v
			}
		}
	}
}
