package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// The mixture-of-experts ops. Experts are kept stacked, one matrix of E·rows
// rows per kind, and multiplied through views of one expert's rows; the
// pairs of a step are grouped by expert, so that each chosen expert's
// weights are read once for all the rows that chose it, as the GPU does.

// Experts is a stacked expert weight: Parts[0] (and Parts[1], up, for a
// GLU) of E·rows rows.
type Experts struct {
	E, RowsPer int
	Parts      []backend.Weight
}

func (w *Experts) Shape() []int { return []int{w.E, w.RowsPer, w.Parts[0].Shape()[1]} }

func (w *Experts) Bytes() int64 {
	var n int64
	for _, p := range w.Parts {
		n += p.Bytes()
	}
	return n
}

// Routes holds each row's experts and weights: IDs[i·K+s], W[i·K+s].
type Routes struct {
	rows, k int
	IDs     []int32
	W       []float32
}

func (r *Routes) Rows() int { return r.rows }
func (r *Routes) K() int    { return r.k }

func (b *Backend) UploadExperts(ts []*tensor.Tensor, s backend.Storage) (backend.Weight, error) {
	parts, e, rows, err := backend.ExpertMatrices(ts)
	if err != nil {
		return nil, fmt.Errorf("cpu: %w", err)
	}
	w := &Experts{E: e, RowsPer: rows}
	for _, t := range parts {
		p, err := b.UploadAs(t, s)
		if err != nil {
			return nil, err
		}
		w.Parts = append(w.Parts, p)
	}
	return w, nil
}

func (b *Backend) NewRoutes(rows, k int) (backend.Routes, error) {
	if rows <= 0 || k <= 0 {
		return nil, fmt.Errorf("cpu: routes of %d rows × %d slots", rows, k)
	}
	return &Routes{rows: rows, k: k, IDs: make([]int32, rows*k), W: make([]float32, rows*k)}, nil
}

func (b *Backend) Route(r backend.Routes, logits backend.Tensor, norm bool) {
	b.op()
	rs, l := r.(*Routes), logits.(*Tensor)
	for i := range min(b.rows(l), rs.rows) {
		Route(rs.IDs[i*rs.k:(i+1)*rs.k], rs.W[i*rs.k:(i+1)*rs.k], l.Row(i), norm)
	}
}

// Route chooses len(ids) experts for one row of router logits: those of
// the largest logits, in order, the lower index first among equal ones;
// w[s] = softmax(logits)[ids[s]], divided by the sum of the chosen when
// norm. A NaN logit ranks as -Inf, so it is chosen only when nothing else
// is left. The twin of moe_route.wgsl (whose NaNs are the GPU's own, its
// ids in range all the same).
func Route(ids []int32, w []float32, logits []float32, norm bool) {
	inf := float32(math.Inf(-1))
	rank := func(j int) float32 {
		if v := logits[j]; v == v {
			return v
		}
		return inf
	}
	mx := inf
	for j := range logits {
		mx = max(mx, rank(j))
	}
	var sum float32
	for _, v := range logits {
		sum += expf(v - mx)
	}
	prev, pv := -1, float32(0)
	var total float32
	for s := range ids {
		best := -1
		for j := range logits {
			v := rank(j)
			after := prev < 0 || v < pv || v == pv && j > prev
			if after && (best < 0 || v > rank(best)) {
				best = j
			}
		}
		if best < 0 { // k > E: never out of range
			best = s % len(logits)
		}
		prev, pv = best, rank(best)
		ids[s] = int32(best)
		w[s] = expf(logits[best]-mx) / sum
		total += w[s]
	}
	if norm {
		for s := range w {
			w[s] /= total
		}
	}
}

// pairs is how many (row, slot) pairs of r the step covers.
func (b *Backend) pairs(r *Routes) int { return min(b.batch.Len(), r.rows) * r.k }

func (b *Backend) ExpertProject(p backend.ExpertProjection) {
	b.op()
	w, r, xs, out := p.W.(*Experts), p.R.(*Routes), p.X.(*Tensor), p.Out.(*Tensor)
	if p.GLU != (len(w.Parts) == 2) || out.cols != w.RowsPer || xs.cols != w.Parts[0].Shape()[1] {
		panic(fmt.Sprintf("cpu: expert projection (GLU %v) of %d columns into %d with experts of %d parts %v",
			p.GLU, xs.cols, out.cols, len(w.Parts), w.Shape())) // a forward pass that does not fit its weights
	}
	n := b.pairs(r)
	k, in, rows := r.k, xs.cols, w.RowsPer
	// Group the pairs by expert; each expert's rows are gathered, multiplied
	// by its matrices once and scattered to their pairs.
	byExpert := make([][]int, w.E)
	for pair, e := range r.IDs[:n] {
		byExpert[e] = append(byExpert[e], pair)
	}
	x := make([]float32, 0, n*in)
	ys := make([][]float32, len(w.Parts))
	for e, pairs := range byExpert {
		if len(pairs) == 0 {
			continue
		}
		x = x[:0]
		for _, pair := range pairs {
			src := pair / k
			if p.Slots {
				src = pair
			}
			x = append(x, xs.Row(src)...)
		}
		for i, part := range w.Parts {
			ys[i] = slices.Grow(ys[i][:0], len(pairs)*rows)[:len(pairs)*rows]
			b.product(ys[i], x, len(pairs), expertView(part, e, rows))
		}
		for j, pair := range pairs {
			dst := out.Row(pair)
			copy(dst, ys[0][j*rows:(j+1)*rows])
			if p.GLU {
				for c, u := range ys[1][j*rows : (j+1)*rows] {
					dst[c] = Act(p.Act, dst[c]) * u
				}
			}
		}
	}
}

// product sets dst = x[m rows] · wᵀ for a plain or compressed matrix.
func (b *Backend) product(dst, x []float32, m int, w backend.Weight) {
	k, n := w.Shape()[1], w.Shape()[0]
	switch w := w.(type) {
	case *QWeight:
		matMulQ(dst, x, w, m, k, n, b.team)
	case *Weight:
		matMul(dst, x, w.Data, m, k, n, b.team)
	}
}

// expertView is expert e's rows of a stacked matrix w, without a copy.
func expertView(w backend.Weight, e, rows int) backend.Weight {
	in := w.Shape()[1]
	shape := []int{rows, in}
	switch w := w.(type) {
	case *Weight:
		return NewWeight(shape, w.Data[e*rows*in:(e+1)*rows*in])
	case *QWeight:
		v := &QWeight{shape: shape, storage: w.storage}
		switch {
		case w.Int4 != nil:
			q, g := w.Int4, w.Int4.Groups()
			v.Int4 = &dtype.Int4{Rows: rows, Cols: q.Cols, Codes: q.Codes[e*rows*g*4 : (e+1)*rows*g*4], Scales: q.Scales[e*rows*g : (e+1)*rows*g]}
		case w.Int8 != nil:
			q, g := w.Int8, w.Int8.Groups()
			v.Int8 = &dtype.Int8{Rows: rows, Cols: q.Cols, Codes: q.Codes[e*rows*g*4 : (e+1)*rows*g*4], Scales: q.Scales[e*rows*g : (e+1)*rows*g]}
		case w.Blocks != nil:
			q := w.Blocks
			cw, sw := q.Groups()*q.Layout().CodeWords, q.RowScaleWords()
			v.Blocks = &dtype.Blocks{Type: q.Type, Rows: rows, Cols: q.Cols, Codes: q.Codes[e*rows*cw : (e+1)*rows*cw], Scales: q.Scales[e*rows*sw : (e+1)*rows*sw]}
		default:
			v.F16 = w.F16[e*rows*in : (e+1)*rows*in]
		}
		return v
	}
	panic(fmt.Sprintf("cpu: experts of weight type %T", w))
}

func (b *Backend) Combine(c backend.MoECombine) {
	b.op()
	d, y, r := c.Dst.(*Tensor), c.Y.(*Tensor), c.R.(*Routes)
	scale := c.Scale
	if scale == 0 {
		scale = 1
	}
	acc := make([]float32, d.cols)
	var ws []float32 // the weights times the experts' scales
	if c.ExpertScale != nil {
		ws = make([]float32, r.k)
	}
	for i := range min(b.rows(d), r.rows) {
		var shared []float32
		var gate float32
		if c.Shared != nil {
			shared, gate = c.Shared.(*Tensor).Row(i), c.SharedGate.(*Tensor).Row(i)[0]
		}
		w := r.W[i*r.k : (i+1)*r.k]
		if ws != nil {
			es := c.ExpertScale.(*Weight).Data
			for s := range ws {
				ws[s] = w[s] * es[r.IDs[i*r.k+s]]
			}
			w = ws
		}
		row := d.Row(i)
		if c.Set {
			clear(row)
		}
		Combine(row, acc, y.Data[i*r.k*y.cols:(i+1)*r.k*y.cols], w, scale, shared, gate)
	}
}

// Combine adds scale · (Σ_s w[s]·ys[s] + sigmoid(gate)·shared) to dst,
// ys holding the len(w) slots' rows one after the other (without the
// shared term when shared is nil); acc is scratch. The twin of
// moe_combine.wgsl (whose Set writes what Combine adds to a zeroed dst).
func Combine(dst, acc, ys, w []float32, scale float32, shared []float32, gate float32) {
	cols := len(dst)
	for c := range acc {
		var sum float32
		for s, ws := range w {
			sum += float32(ws * ys[s*cols+c])
		}
		acc[c] = sum
	}
	if shared != nil {
		sg := 1 / (1 + expf(-gate))
		for c, v := range shared {
			acc[c] += float32(sg * v)
		}
	}
	for c, v := range acc {
		dst[c] += float32(scale * v)
	}
}
