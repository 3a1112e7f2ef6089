package cpu

import (
	"fmt"

	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
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

func (b *Backend) RopeStore(q, k, v backend.Tensor, kv backend.KV, l int, rq, rk backend.Rope) {
	b.Rope(q, rq)
	b.Rope(k, rk)
	b.StoreKV(kv, l, k, v)
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
