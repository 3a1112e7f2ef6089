package runtime

import (
	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// MemoryEstimate is what loading a model takes of a device, computed from
// its description alone (no weights read): what a page shows before it
// downloads a gigabyte.
type MemoryEstimate struct {
	Quant   string // the weight storage chosen: "int4", "f16" or "f32"
	Context int    // tokens of KV cache reserved
	Weights int64  // bytes of weights on the device
	KV      int64  // bytes of KV cache for Context tokens
	Scratch int64  // activations and logits, roughly
	Total   int64
	// Largest is the biggest single weight buffer, which must fit the
	// device's maxStorageBufferBindingSize.
	Largest int64
}

// EstimateMemory says what LoadModel(m, Options{Quant: quant, Device:
// device, Context: context}) will allocate, with one sequence's KV cache of
// context tokens (0: the model's, up to DefaultContext). device is
// "webgpu" or "cpu"; it matters only for quant "".
func EstimateMemory(m *models.Model, quant, device string, context int) (MemoryEstimate, error) {
	c := m.Config
	if context <= 0 {
		context = min(c.Context, DefaultContext)
	}
	context = min(context, c.Context)
	be := backend.F32
	if quant == "" {
		var bytes int64
		for _, t := range m.Tensors {
			bytes += 4 * int64(t.Elements())
		}
		if device != "cpu" && bytes >= smallModel {
			be = backend.Int4
		}
	} else {
		s, err := backend.ParseStorage(quant)
		if err != nil {
			return MemoryEstimate{}, err
		}
		be = s
	}
	e := MemoryEstimate{Quant: be.String(), Context: context}
	ws := WeightStorage{Matrices: be}
	for _, t := range m.Tensors {
		n := int64(t.Elements())
		var b int64
		switch ws.For(t, c) {
		case backend.Int4:
			b = dtype.Int4Bytes(t.Shape[0], t.Shape[1])
		case backend.F16:
			b = 2 * n
		default:
			b = 4 * n
		}
		e.Weights += b
		e.Largest = max(e.Largest, b)
	}
	blocks := int64((context + DefaultBlockSize - 1) / DefaultBlockSize)
	e.KV = blocks * kvBlockBytes(c, DefaultBlockSize, backend.KVF32)
	rows := int64(batchRows(c))
	e.Scratch = 4 * rows * int64(c.Vocab+4*c.Dim+2*c.FFN+2*c.Heads*c.HeadDim)
	e.Total = e.Weights + e.KV + e.Scratch
	return e, nil
}
