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

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/gptq"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// Backend wraps a backend and captures the inputs of the weights asked for
// (see Capture). Like any backend it is used by one goroutine at a time.
type Backend struct {
	backend.Backend
	names   map[backend.Weight]string // uploaded weights by tensor name
	outputs map[backend.Tensor]bool   // output tensors: one row per Batch.Out
	batch   backend.Batch
	want    map[string]*gptq.Hessian
	err     error
}

// New wraps inner, capturing nothing until Capture says what.
func New(inner backend.Backend) *Backend {
	return &Backend{Backend: inner, names: map[backend.Weight]string{}, outputs: map[backend.Tensor]bool{}}
}

// Capture sets the weights whose inputs MatMul adds up from now on, by
// tensor name; nil stops capturing. Each Hessian must be as wide as its
// weight's rows.
func (b *Backend) Capture(hs map[string]*gptq.Hessian) { b.want = hs }

// Err reports the first failure to read a matrix product's input back.
func (b *Backend) Err() error { return b.err }

func (b *Backend) Upload(t *models.Tensor) (backend.Weight, error) {
	w, err := b.Backend.Upload(t)
	if err == nil {
		b.names[w] = t.Name
	}
	return w, err
}

func (b *Backend) UploadAs(t *models.Tensor, s backend.Storage) (backend.Weight, error) {
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
	h := b.want[b.names[w]]
	if h == nil || b.err != nil {
		return
	}
	if h.N != x.Cols() {
		b.err = fmt.Errorf("capture %s: a Hessian of %d inputs for a product with %d", b.names[w], h.N, x.Cols())
		return
	}
	rows := b.batch.Len()
	if b.outputs[x] {
		rows = len(b.batch.Out)
	}
	data, err := b.Backend.Read(x, min(rows, x.Rows()))
	if err != nil {
		b.err = fmt.Errorf("capture %s: %w", b.names[w], err)
		return
	}
	h.Add(data)
}
