package cpu

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
)

// LoRA is the adapters of weights that share an input: per slot, the A
// rows of all its weights stacked (one product gives x·Aᵀ for all of
// them), and per weight its B, rank, scale and columns in that product.
//
// A slot whose values are all IEEE halves (an adapter stored in F16, as
// llama.cpp's convert_lora_to_gguf writes them by default) is kept in
// halves: half the memory, and half the bytes a decode step streams, which
// bounds it (a step of 4 rank-64 adapters on SmolLM2-135M reads 312 MB in
// f32). The kernels widen each half exactly, so the results are those of
// the f32 values bit for bit; other slots stay in f32, losing nothing.
type LoRA struct {
	in      int
	outs    []int
	slots   []loraSlot
	maxRank int
}

type loraSlot struct {
	rank int // Σ of the weights' ranks: the columns of h
	// [rank, in]: weight 0's A rows, then weight 1's..., in f32 or in
	// halves (the other nil)
	a   []float32
	a16 []uint16
	w   []loraWeight
}

type loraWeight struct {
	rank, col int // col: the weight's first column in h
	// Bᵀ in panels (panels): a row of h times it is rank axpys of out
	// values; in f32 or in halves as the slot's A
	bt    []float32
	bt16  []uint16
	scale float32
}

// panel is the width of Bᵀ's column panels. Bᵀ [rank, out] row by row
// would have an axpy of 32 columns read rank cache lines out·4 bytes
// apart, more streams than a core's prefetcher follows; cut into panels of
// 32 columns (the axpy kernels' block), each panel's [rank, 32] (the last
// one narrower) lies in one stretch of 32·rank values that the axpys read
// front to back.
const panel = 32

// panels returns Bᵀ of b ([out, rank] row-major) cut into column panels:
// the panel of columns c0..c0+w holds Bᵀ[t, c0+i] at c0·rank + t·w + i.
func panels[T any](b []T, out, rank int) []T {
	bt := make([]T, rank*out)
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
			n += 4*int64(len(x.a)) + 2*int64(len(x.a16))
			for _, w := range x.w {
				n += 4*int64(len(w.bt)) + 2*int64(len(w.bt16))
			}
		}
		return n
	}
	kept := make([]loraSlot, len(slots))
	maxRank := 0
	for j, ws := range slots {
		s := &kept[j]
		var a, bs []float32 // all the slot's values, to find whether they are halves
		for _, w := range ws {
			a, bs = append(a, w.A...), append(bs, w.B...)
		}
		a16, b16 := dtype.Halves(a), dtype.Halves(bs)
		if a16 == nil || b16 == nil {
			s.a = a
		} else {
			s.a16 = a16
		}
		for k, w := range ws {
			lw := loraWeight{rank: w.Rank, col: s.rank, scale: w.Scale}
			if s.a16 != nil {
				lw.bt16, b16 = panels(b16[:len(w.B)], c.outs[k], w.Rank), b16[len(w.B):]
			} else {
				lw.bt = panels(w.B, c.outs[k], w.Rank)
			}
			s.w = append(s.w, lw)
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
	hoff        []int     // slot j's h starts at h[hoff[j]]
	x, h        []float32 // the rows of x in slot order, and their x·Aᵀ per slot, then scaled
	parts       []loraPart
}

// A loraPart is one piece of AddLoRA's work: in the shrink, row t of slot
// j's A against that slot's rows; in the expand, panel p of weight k of
// slot j for that slot's rows.
type loraPart struct{ j, k, t int }

// grow returns s resized to n, reallocated where too short, with room to
// double: a buffer that grows a little each time (a prompt's attention
// scores, one position longer each row) is then reallocated a few times,
// not at every use (which cost 5% of a prompt's attention in allocation
// and clearing alone).
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, max(n, 2*cap(s)))
	}
	return s[:n]
}

// AddLoRA groups the rows by adapter slot (a counting sort), computes x·Aᵀ
// for each slot's rows and all its weights at once (the shrink), scales
// each row's columns of it by the row's scale times the weight's, and adds
// each weight's s·(x·Aᵀ)·Bᵀ to the outputs (the expand). Rows without an
// adapter cost nothing. The rows of one adapter share each read of its A
// and B; the shrinks of all slots are one team operation and their
// expands another, not one per slot and weight: each operation costs a
// wake-up and a wait (microseconds), and a layer of 4 adapters had 44.
// The sums are the WGSL kernels' up to rounding: x·A row by row, then
// each output plus Σ_t (s·h_t)·B[o, t] term by term, where lora_expand
// sums the terms before it scales and adds.
func (b *Backend) AddLoRA(x backend.Tensor, l backend.LoRA, dsts ...backend.Tensor) {
	xs := x.(*Tensor)
	b.applyLoRA(l.(*LoRA), dsts, func(c *LoRA, sc *loraBufs) {
		sc.x = grow(sc.x, len(sc.rows)*c.in)
		for r, i := range sc.rows {
			copy(sc.x[r*c.in:(r+1)*c.in], xs.Data[i*c.in:(i+1)*c.in])
		}
		sc.parts = sc.parts[:0]
		macs := 0
		for j, s := range c.slots {
			m := sc.start[j+1] - sc.start[j]
			macs += m * s.rank * c.in
			if m > 0 {
				for t := range s.rank {
					sc.parts = append(sc.parts, loraPart{j: j, t: t})
				}
			}
		}
		// h = x·Aᵀ, per slot an [m, rank] block.
		b.team.over(macs, len(sc.parts), func(lo, hi int) {
			for _, p := range sc.parts[lo:hi] {
				s, r0, m := &c.slots[p.j], sc.start[p.j], sc.start[p.j+1]-sc.start[p.j]
				h, x := sc.h[sc.hoff[p.j]+p.t:], sc.x[r0*c.in:]
				if s.a16 != nil {
					kernel.DotF16Rows(h, s.rank, s.a16[p.t*c.in:(p.t+1)*c.in], x, m)
				} else {
					kernel.DotF32Rows(h, s.rank, s.a[p.t*c.in:(p.t+1)*c.in], x, m)
				}
			}
		})
	})
}

// EmbedLoRA is AddLoRA for the token embeddings, whose input is the
// one-hot token: h is a gather of the token's column of A, no product.
// Twin of lora_gather.wgsl.
func (b *Backend) EmbedLoRA(dst backend.Tensor, l backend.LoRA) {
	b.applyLoRA(l.(*LoRA), []backend.Tensor{dst}, func(c *LoRA, sc *loraBufs) {
		for j, s := range c.slots {
			for r := sc.start[j]; r < sc.start[j+1]; r++ {
				h := sc.h[sc.hoff[j]+(r-sc.start[j])*s.rank:][:s.rank]
				tok := int(b.batch.Tokens[sc.rows[r]])
				for t := range h {
					if s.a16 != nil {
						h[t] = dtype.HalfValue(s.a16[t*c.in+tok])
					} else {
						h[t] = s.a[t*c.in+tok]
					}
				}
			}
		}
	})
}

// applyLoRA is AddLoRA and EmbedLoRA around their shrink, which fills
// sc.h, x·Aᵀ of each slot's rows (sc.rows[sc.start[j]:sc.start[j+1]], an
// [m, rank] block at sc.hoff[j]).
func (b *Backend) applyLoRA(c *LoRA, dsts []backend.Tensor, shrink func(c *LoRA, sc *loraBufs)) {
	b.op()
	if c.maxRank == 0 || b.batch.Adapter == nil || len(dsts) != len(c.outs) {
		return
	}
	if b.lora == nil {
		b.lora = new(loraBufs)
	}
	out := dsts[0].(*Tensor).out
	n, sc, ns := b.rows(dsts[0]), b.lora, len(c.slots)
	batchRow := func(i int) int { // row i of the dsts is this row of the batch
		if out {
			return int(b.batch.Out[i])
		}
		return i
	}
	slot := func(i int) int {
		if j := int(b.batch.Adapter[batchRow(i)]); j >= 0 && j < ns && c.slots[j].rank > 0 {
			return j
		}
		return -1
	}
	sc.start = grow(sc.start, ns+1)
	clear(sc.start)
	for i := range n {
		if j := slot(i); j >= 0 {
			sc.start[j+1]++
		}
	}
	for j := range ns {
		sc.start[j+1] += sc.start[j]
	}
	if sc.start[ns] == 0 {
		return
	}
	sc.rows = grow(sc.rows, sc.start[ns])
	sc.next = append(sc.next[:0], sc.start[:ns]...)
	for i := range n {
		if j := slot(i); j >= 0 {
			sc.rows[sc.next[j]] = i
			sc.next[j]++
		}
	}
	sc.hoff = grow(sc.hoff, ns)
	hn := 0
	for j, s := range c.slots {
		sc.hoff[j] = hn
		hn += (sc.start[j+1] - sc.start[j]) * s.rank
	}
	sc.h = grow(sc.h, hn)
	shrink(c, sc)

	// Scaled in place: each row's columns of each weight by its scale.
	sc.parts = sc.parts[:0]
	macs := 0
	for j, s := range c.slots {
		r0, r1 := sc.start[j], sc.start[j+1]
		if r0 == r1 {
			continue
		}
		for k, w := range s.w {
			if w.rank == 0 {
				continue
			}
			for r := r0; r < r1; r++ {
				scale := b.batch.AdapterScale[batchRow(sc.rows[r])] * w.scale
				h := sc.h[sc.hoff[j]+(r-r0)*s.rank+w.col:][:w.rank]
				for q, v := range h {
					h[q] = scale * v
				}
			}
			for p := range (c.outs[k] + panel - 1) / panel {
				sc.parts = append(sc.parts, loraPart{j: j, k: k, t: p})
			}
			macs += (r1 - r0) * w.rank * c.outs[k]
		}
	}

	// The expand: per slot, weight and panel of Bᵀ, its rows two at a time.
	b.team.over(macs, len(sc.parts), func(lo, hi int) {
		for _, p := range sc.parts[lo:hi] {
			s := &c.slots[p.j]
			w, dout := &s.w[p.k], c.outs[p.k]
			expand(dsts[p.k].(*Tensor).Data, sc.h[sc.hoff[p.j]+w.col:], s.rank, w, sc.rows[sc.start[p.j]:sc.start[p.j+1]], p.t*panel, dout)
		}
	})
}

// expand adds to each output row rows[r] of dst (dout wide), in the panel
// of columns c0..c0+panel, the sum over t of h[r·stride+t]·Bᵀ[t, :], Bᵀ
// in panels: one kernel.AxpyRows over the panel's columns, not a dot
// product of rank values per column (8 for a rank-8 adapter, shorter than
// a call costs). Rows go two at a time (AxpyRows2 reads the panel once
// for both). Each element is the same sum whatever the split, the pairing
// or the panel width.
func expand(dst, h []float32, stride int, w *loraWeight, rows []int, c0, dout int) {
	m, rank := len(rows), w.rank
	width := min(panel, dout-c0)
	out := func(r int) []float32 { return dst[rows[r]*dout+c0 : rows[r]*dout+c0+width] }
	hr := func(r int) []float32 { return h[r*stride : r*stride+rank] }
	r := 0
	if w.bt16 != nil {
		p := w.bt16[c0*rank:]
		for ; r+2 <= m; r += 2 {
			kernel.AxpyRows2F16(out(r), out(r+1), hr(r), hr(r+1), p, width)
		}
		if r < m {
			kernel.AxpyRowsF16(out(r), hr(r), p, width)
		}
		return
	}
	p := w.bt[c0*rank:]
	for ; r+2 <= m; r += 2 {
		kernel.AxpyRows2(out(r), out(r+1), hr(r), hr(r+1), p, width)
	}
	if r < m {
		kernel.AxpyRows(out(r), hr(r), p, width)
	}
}
