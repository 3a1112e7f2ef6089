package cpu

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
)

// The fused ops are, on the reference, the compositions of plain ops that
// backend.Projection and RopeStore define: what the GPU's fused kernels are
// tested against.

// Fused is a weight made of matrices of one width (Fuse), kept as the
// separate matrices: Project multiplies by each in turn.
type Fused struct {
	shape []int
	Parts []backend.Weight
}

func (w *Fused) Shape() []int { return w.shape }

func (w *Fused) Bytes() int64 {
	var n int64
	for _, p := range w.Parts {
		n += p.Bytes()
	}
	return n
}

func (b *Backend) Fuse(ts []*tensor.Tensor, s backend.Storage, glu bool) (backend.Weight, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("cpu: fuse of no tensors")
	}
	if len(ts[0].Shape) == 1 { // vectors (biases) are joined
		var data []float32
		for _, t := range ts {
			if len(t.Shape) != 1 {
				return nil, fmt.Errorf("cpu: fuse of vector %s with %s of shape %v", ts[0].Name, t.Name, t.Shape)
			}
			v, err := t.Float32()
			if err != nil {
				return nil, err
			}
			data = append(data, v...)
		}
		b.stats.Memory += 4 * int64(len(data))
		return NewWeight([]int{len(data)}, data), nil
	}
	w := &Fused{shape: []int{0, ts[0].Shape[1]}}
	for _, t := range ts {
		if len(t.Shape) != 2 || t.Shape[1] != w.shape[1] {
			return nil, fmt.Errorf("cpu: fuse of %s (shape %v) with matrices %d wide", t.Name, t.Shape, w.shape[1])
		}
		p, err := b.UploadAs(t, s)
		if err != nil {
			return nil, err
		}
		w.Parts = append(w.Parts, p)
		w.shape[0] += t.Shape[0]
	}
	return w, nil
}

// weightParts returns the matrices of w and their row counts.
func weightParts(w backend.Weight) ([]backend.Weight, []int) {
	ws := []backend.Weight{w}
	if f, ok := w.(*Fused); ok {
		ws = f.Parts
	}
	rows := make([]int, len(ws))
	for i, p := range ws {
		rows[i] = p.Shape()[0]
	}
	return ws, rows
}

func (b *Backend) Project(p backend.Projection) {
	ws, rows := weightParts(p.W)
	if err := p.Check(rows); err != nil {
		panic(fmt.Sprintf("cpu: %v", err)) // a forward pass that does not fit its weights
	}
	if bw := blocksWeights(ws); bw != nil && p.LoRA == nil {
		b.projectBlocks(p, bw, rows)
		return
	}
	x := p.X
	if p.Norm != nil {
		h := b.scratch(x, x.Cols(), scratchNorm)
		b.RMSNorm(h, x, p.Norm, p.Eps)
		x = h
	}
	// The products first, so that an int4 run quantizes x once (MatMul),
	// then the epilogue.
	dsts := make([]backend.Tensor, len(ws))
	for i, w := range ws {
		dsts[i] = p.Out[min(i, len(p.Out)-1)]
		if p.Add || p.GLU && i == 1 {
			dsts[i] = b.scratch(p.Out[0], rows[i], scratchProduct)
		}
		b.MatMul(dsts[i], x, w)
	}
	if p.Bias != nil {
		off := 0
		for i, dst := range dsts {
			b.AddBias(dst, NewWeight([]int{rows[i]}, p.Bias.(*Weight).Data[off:off+rows[i]]))
			off += rows[i]
		}
	}
	if p.LoRA != nil {
		b.AddLoRA(x, p.LoRA, dsts...)
	}
	switch {
	case p.Add:
		b.Add(p.Out[0], dsts[0])
	case p.GLU:
		b.GLU(p.Out[0], dsts[1], p.Act)
	}
}

// blocksWeights returns the parts of a weight as blocks if every part is
// kept so (a quantized GGUF's matrices), nil otherwise.
func blocksWeights(ws []backend.Weight) []*dtype.Blocks {
	bw := make([]*dtype.Blocks, len(ws))
	for i, w := range ws {
		q, ok := w.(*QWeight)
		if !ok || q.Blocks == nil {
			return nil
		}
		bw[i] = q.Blocks
	}
	return bw
}

// projectBlocks is Project for weights kept as blocks: the composition's
// ops with the same bits, in fewer jobs of the team. Each job ends in a
// wait for its slowest worker, and a 32-row decode step ran about fifteen
// a layer, most of them a few microseconds of work (a norm, quantizing,
// packing, the k and v products, a residual add): so the norm, the
// quantizing and the packing of a tile of rows are one job (readyRows),
// every part's products one job over all their rows, and a residual add
// or a GLU joins the products, each worker finishing the columns it made
// (a GLU's worker takes the same columns of the gate and the up part).
func (b *Backend) projectBlocks(p backend.Projection, ws []*dtype.Blocks, rows []int) {
	xs := p.X.(*Tensor)
	m := b.rows(p.Out[0])
	x := xs
	var norm *Weight
	if p.Norm != nil {
		x = b.scratch(xs, xs.cols, scratchNorm)
		if b.rows(x) == m {
			b.op()
			norm = p.Norm.(*Weight)
		} else { // the norm covers rows the products do not: its own job
			b.RMSNorm(x, xs, p.Norm, p.Eps)
		}
	}
	if norm != nil || !b.qvalid || b.qsrc != x || b.qm != m {
		b.readyRows(x, xs, m, norm, p.Eps, ws)
	}
	q := b.qrows[:m]
	dsts := make([]*Tensor, len(ws))
	tss := make([][]kernel.QTile, len(ws))
	total := 0
	for i, w := range ws {
		dsts[i] = p.Out[min(i, len(p.Out)-1)].(*Tensor)
		if p.Add || p.GLU && i == 1 {
			dsts[i] = b.scratch(p.Out[0], rows[i], scratchProduct)
		}
		tss[i] = blocksReady(x.Data, q, &b.qtiles, w, b.team)
		total += rows[i]
	}
	b.stats.Dispatches += len(ws)
	// The residual add joins the products where no bias comes between.
	var sum *Tensor
	if p.Add && p.Bias == nil {
		sum = p.Out[0].(*Tensor)
	}
	b.qvalid = true // as after MatMul: q holds x until another op runs
	if p.GLU && p.Bias == nil {
		// Each worker takes columns of the gate and the up product
		// alike and applies the GLU to the columns it made.
		n, gate, up := rows[0], dsts[0].Data, dsts[1].Data
		b.exps = grow(b.exps, m*n)
		overBlocks(b.team, m*total*xs.cols, n, func(lo, hi int) {
			blocksRows(gate, q, tss[0], ws[0], lo, hi, &b.qtiles.wide)
			blocksRows(up, q, tss[1], ws[1], lo, hi, &b.qtiles.wide)
			for r := range m {
				glu(gate[r*n+lo:r*n+hi], up[r*n+lo:r*n+hi], b.exps[r*n+lo:r*n+hi], p.Act)
			}
		})
		b.op() // the GLU, done
		return
	}
	overBlocks(b.team, m*total*xs.cols, total, func(lo, hi int) {
		off := 0
		for i, w := range ws {
			if a, c := max(lo, off)-off, min(hi, off+rows[i])-off; a < c {
				blocksRows(dsts[i].Data, q, tss[i], w, a, c, &b.qtiles.wide)
				if sum != nil {
					n := rows[i]
					for r := range m { // += 1·s: the plain sum's bits, in vectors
						kernel.Axpy(sum.Data[r*n+a:r*n+c], 1, dsts[i].Data[r*n+a:r*n+c])
					}
				}
			}
			off += rows[i]
		}
	})
	if p.Bias != nil {
		off := 0
		for i, dst := range dsts {
			b.AddBias(dst, NewWeight([]int{rows[i]}, p.Bias.(*Weight).Data[off:off+rows[i]]))
			off += rows[i]
		}
	}
	switch {
	case sum != nil:
		b.op() // the add, done
	case p.Add:
		b.Add(p.Out[0], dsts[0])
	case p.GLU:
		b.GLU(p.Out[0], dsts[1], p.Act)
	}
}

// RopeStore rotates q and k and stores k and v in one job of the team,
// a row at a time, where q and k rotate by the same angles (a
// single-axis rope of one set of frequencies: every family but the
// multi-axis ones): three small ops of a decode step, two with a wait for
// the slowest worker and one on this goroutine alone, become one job; a
// rotation costs about four multiply-adds.
func (b *Backend) RopeStore(q, k, v backend.Tensor, kv backend.KV, l int, rq, rk backend.Rope) {
	qs, ks := q.(*Tensor), k.(*Tensor)
	n := b.rows(qs)
	multi := (rq.Multi() || rk.Multi()) && b.batch.RopePos != nil
	b.ropeF = RopeFreqs(b.ropeF, rq)
	b.ropeK = RopeFreqs(b.ropeK, rk)
	if multi || b.rows(ks) != n || rq.Mscale() != rk.Mscale() || !slices.Equal(b.ropeF, b.ropeK) {
		b.Rope(q, rq)
		b.Rope(k, rk)
		b.StoreKV(kv, l, k, v)
		return
	}
	b.op()
	b.op()
	b.op()
	cs := b.rope.of(b.ropeF, rq.Mscale(), b.batch.Pos[:n])
	w := len(b.ropeF) * 2
	c, vs := kv.(*KV), v.(*Tensor)
	b.team.over(4*n*(qs.cols+ks.cols), n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			RopeWith(qs.Row(i), cs[i*w:(i+1)*w], rq)
			RopeWith(ks.Row(i), cs[i*w:(i+1)*w], rk)
			b.storeRow(c, l, i, ks.Row(i), vs.Row(i))
		}
	})
}

// RopeAttend is the composition it stands for: the twin of runtime/gpu's
// attention_lane composed with Rope.
func (b *Backend) RopeAttend(dst, q, k, v backend.Tensor, kv backend.KV, l int, rq, rk backend.Rope, a backend.Attention) {
	b.RopeStore(q, k, v, kv, l, rq, rk)
	b.Attend(dst, q, kv, l, a)
}

// The roles of a fused op's scratch tensors: a normalised input and a
// product that the epilogue combines. Each has its own, so that a product
// never writes over the input it reads when both are of one shape (a GLU
// whose FFN width equals the model's, whose normalised input and up
// product would otherwise share one tensor).
const (
	scratchNorm = iota
	scratchProduct
)

// scratch returns a tensor of like's rows (and kind: one row per token or
// per output) and cols columns, for the intermediate values of a fused op
// in the given role.
func (b *Backend) scratch(like backend.Tensor, cols, role int) *Tensor {
	t := like.(*Tensor)
	key := scratchKey{t.rows, cols, t.out, role}
	s := b.scratches[key]
	if s == nil {
		s = NewTensor(t.rows, cols, make([]float32, t.rows*cols))
		s.out = t.out
		if b.scratches == nil {
			b.scratches = map[scratchKey]*Tensor{}
		}
		b.scratches[key] = s
	}
	return s
}

type scratchKey struct {
	rows, cols int
	out        bool
	role       int
}
