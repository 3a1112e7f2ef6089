package cpu

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
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
	bt        []float32 // Bᵀ in panels (panels): a row of h times it is rank axpys of out values
	scale     float32
}

// panel is the width of Bᵀ's column panels. Bᵀ [rank, out] row by row
// would have an axpy of 8 columns read rank cache lines out·4 bytes apart,
// more streams than a core's prefetcher follows; cut into panels of 64
// columns, each panel's [rank, 64] (the last one narrower) lies in one
// stretch of 64·rank values that the axpys read front to back.
const panel = 64

// panels returns Bᵀ of b ([out, rank] row-major) cut into column panels:
// the panel of columns c0..c0+w holds Bᵀ[t, c0+i] at c0·rank + t·w + i.
func panels(b []float32, out, rank int) []float32 {
	bt := make([]float32, rank*out)
	for c0 := 0; c0 < out; c0 += panel {
		w, p := min(panel, out-c0), bt[c0*rank:]
		for i := range w {
			for t := range rank {
				p[t*w+i] = b[(c0+i)*rank+t]
			}
		}
	}
	return bt
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
			bt := panels(w.B, c.outs[k], w.Rank)
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
	x, h, hw    []float32 // one slot's rows of x, their x·Aᵀ, and their columns of one weight in it, scaled
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
// slot's (expand). Rows without an adapter cost nothing. The sums are the
// WGSL kernels' up to rounding: x·A row by row, then each output plus
// Σ_t (s·h_t)·B[o, t] term by term, where lora_expand sums the terms
// before it scales and adds.
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
			d, dout := dsts[k].(*Tensor), c.outs[k]
			sc.hw = grow(sc.hw, m*w.rank)
			for r, i := range rows {
				scale := b.batch.AdapterScale[batchRow(i)] * w.scale
				hw := sc.hw[r*w.rank : (r+1)*w.rank]
				for q, v := range sc.h[r*s.rank+w.col : r*s.rank+w.col+w.rank] {
					hw[q] = scale * v
				}
			}
			expand(d.Data, sc.hw, w.bt, rows, w.rank, dout, b.team)
		}
	}
}

// expand adds to each output row rows[r] of dst (dout wide) the sum over
// t of hw[r·rank+t]·Bᵀ[t, :], Bᵀ in panels: per row and panel one
// kernel.AxpyRows over the panel's columns, not a dot product of rank
// values per column (8 for a rank-8 adapter, shorter than a call costs).
// Rows go two at a time (AxpyRows2 reads the panel once for both), and
// the team splits the panels. Each element is the same sum whatever the
// split, the pairing or the panel width.
func expand(dst, hw, bt []float32, rows []int, rank, dout int, t *team) {
	m := len(rows)
	if m*rank*dout < 1<<15 {
		t = nil
	}
	t.run((dout+panel-1)/panel, func(lo, hi int) {
		for c0 := lo * panel; c0 < min(hi*panel, dout); c0 += panel {
			w, p := min(panel, dout-c0), bt[c0*rank:]
			out := func(r int) []float32 { return dst[rows[r]*dout+c0 : rows[r]*dout+c0+w] }
			r := 0
			for ; r+2 <= m; r += 2 {
				kernel.AxpyRows2(out(r), out(r+1), hw[r*rank:(r+1)*rank], hw[(r+1)*rank:(r+2)*rank], p, w)
			}
			if r < m {
				kernel.AxpyRows(out(r), hw[r*rank:(r+1)*rank], p, w)
			}
		}
	})
}
