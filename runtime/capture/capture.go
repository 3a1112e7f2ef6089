// Package capture gathers the statistics of a calibrated quantization
// (models/gptq) while a model runs: for chosen weight matrices, H = Σ xᵀx
// over the input rows x of every matrix product that reads them.
//
// It is a backend.Backend decorator: the engine's forward pass stays as it
// is, and every op goes to the wrapped backend; MatMul also reads its
// input rows back and adds them to the weight's Hessian. Weights are known
// by the name of the tensor they were uploaded from, so a tied embedding
// table is captured where it serves as the output head (Embed is not a
// product and has no input to weigh).
package capture

import (
	"fmt"

	"github.com/tessera-llm/tessera/models/gptq"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// Backend wraps a backend and captures the inputs of the weights asked for
// (see Capture). Like any backend it is used by one goroutine at a time.
type Backend struct {
	backend.Backend
	names   map[backend.Weight]string         // uploaded weights by tensor name
	outputs map[backend.Tensor]bool           // output tensors: one row per Batch.Out
	normed  map[backend.Tensor]backend.Tensor // a projection's normalised input, by its input
	batch   backend.Batch
	want    map[string]*gptq.Hessian
	err     error
}

// New wraps inner, capturing nothing until Capture says what.
func New(inner backend.Backend) *Backend {
	return &Backend{Backend: inner, names: map[backend.Weight]string{}, outputs: map[backend.Tensor]bool{}, normed: map[backend.Tensor]backend.Tensor{}}
}

// Capture sets the weights whose inputs MatMul adds up from now on, by
// tensor name; nil stops capturing. Each Hessian must be as wide as its
// weight's rows.
func (b *Backend) Capture(hs map[string]*gptq.Hessian) { b.want = hs }

// Err reports the first failure to read a matrix product's input back.
func (b *Backend) Err() error { return b.err }

func (b *Backend) Upload(t *tensor.Tensor) (backend.Weight, error) {
	w, err := b.Backend.Upload(t)
	if err == nil {
		b.names[w] = t.Name
	}
	return w, err
}

func (b *Backend) UploadAs(t *tensor.Tensor, s backend.Storage) (backend.Weight, error) {
	w, err := b.Backend.UploadAs(t, s)
	if err == nil {
		b.names[w] = t.Name
	}
	return w, err
}

func (b *Backend) NewOutputTensor(rows, cols int) (backend.Tensor, error) {
	t, err := b.Backend.NewOutputTensor(rows, cols)
	if err == nil {
		b.outputs[t] = true
	}
	return t, err
}

func (b *Backend) Begin(batch backend.Batch) error {
	b.batch = batch
	return b.Backend.Begin(batch)
}

func (b *Backend) BeginChained(batch backend.Batch) error {
	b.batch = batch
	return b.Backend.BeginChained(batch)
}

// MatMul runs the product, then adds the rows of x that the batch covers
// to w's Hessian if w is captured.
func (b *Backend) MatMul(dst, x backend.Tensor, w backend.Weight) {
	b.Backend.MatMul(dst, x, w)
	if h := b.want[b.names[w]]; h != nil && b.err == nil {
		b.add(h, x, b.names[w])
	}
}

// add adds the rows of x that the batch covers to h, the Hessian of the
// weight named name.
func (b *Backend) add(h *gptq.Hessian, x backend.Tensor, name string) {
	if h.N != x.Cols() {
		b.err = fmt.Errorf("capture %s: a Hessian of %d inputs for a product with %d", name, h.N, x.Cols())
		return
	}
	rows := b.batch.Len()
	if b.outputs[x] {
		rows = len(b.batch.Out)
	}
	data, err := b.Backend.Read(x, min(rows, x.Rows()))
	if err != nil {
		b.err = fmt.Errorf("capture %s: %w", name, err)
		return
	}
	h.Add(data)
}

// Fuse names the fused weight after its first tensor: q for q, k and v,
// gate for gate and up, the names under which calibration shares the
// Hessian of their one input.
func (b *Backend) Fuse(ts []*tensor.Tensor, s backend.Storage, glu bool) (backend.Weight, error) {
	w, err := b.Backend.Fuse(ts, s, glu)
	if err == nil && len(ts) > 0 {
		b.names[w] = ts[0].Name
	}
	return w, err
}

// Project runs the projection and captures its input, normalised first
// (through the wrapped backend's RMSNorm) when the projection normalises.
func (b *Backend) Project(p backend.Projection) {
	h := b.want[b.names[p.W]]
	if h == nil || b.err != nil {
		b.Backend.Project(p)
		return
	}
	if p.Norm != nil {
		if b.normed[p.X] == nil {
			t, err := b.newLike(p.X)
			if err != nil {
				b.err = fmt.Errorf("capture %s: %w", b.names[p.W], err)
				return
			}
			b.normed[p.X] = t
		}
		b.Backend.RMSNorm(b.normed[p.X], p.X, p.Norm, p.Eps)
		p.X, p.Norm = b.normed[p.X], nil
	}
	b.Backend.Project(p)
	b.add(h, p.X, b.names[p.W])
}

// newLike allocates a tensor of t's shape and kind.
func (b *Backend) newLike(t backend.Tensor) (backend.Tensor, error) {
	if b.outputs[t] {
		return b.NewOutputTensor(t.Rows(), t.Cols())
	}
	return b.Backend.NewTensor(t.Rows(), t.Cols())
}
