package eval

import (
	goruntime "runtime"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
)

// MemoryEstimate is what loading a model takes of a device, computed from
// its description alone (no weights read): what a page shows before it
// downloads a gigabyte.
type MemoryEstimate struct {
	// Quant is the weight storage: the one asked for, "mixed" where that
	// is the default, else (the file's own) the storage of most bytes.
	Quant   string
	Context int   // tokens of KV cache reserved
	Weights int64 // bytes of weights on the device
	// KV is the bytes of KV cache for Context tokens: of every layer, or
	// where the sliding-window layers keep their windows only (window.go)
	// of the global layers plus the rings of the sequences that run at
	// once (Window of it).
	KV      int64
	Window  int64
	Scratch int64 // activations and logits, roughly
	Total   int64
	// Largest is the biggest single weight buffer, which must fit the
	// device's maxStorageBufferBindingSize.
	Largest int64
}

// EstimateMemory says what runtime.LoadModel(m, Options{Quant: quant, Device:
// device, Context: context}) will allocate, with one sequence's KV cache of
// context tokens (0: the model's, up to runtime.DefaultContext) and the device's
// default budgets. device is "webgpu" or "cpu"; it matters for quant ""
// and the budgets.
func EstimateMemory(m *models.Model, quant, device string, context int) (MemoryEstimate, error) {
	c := m.Config
	if context <= 0 {
		context = min(c.Context, runtime.DefaultContext)
	}
	context = min(context, c.Context)
	ws := runtime.WeightStorage{}
	mixed := runtime.MixedDefault(m, quant, device)
	switch {
	case mixed:
		// The head and tables in int8; the layer matrices MixedInt8
		// would pick by measurement are counted below by their share.
		ws.Floats, ws.Int8 = backend.Int4, map[string]bool{models.Output: true, models.TokenEmbedding: true}
	case quant != "":
		s, err := backend.ParseStorage(quant)
		if err != nil {
			return MemoryEstimate{}, err
		}
		ws.Max, ws.Floats = s, s
	}
	e := MemoryEstimate{Quant: quant, Context: context}
	if mixed {
		e.Quant = runtime.Mixed
	}
	var layerFloats int64 // parameters of float layer matrices in int4
	for _, t := range m.Tensors {
		s := ws.For(t, c)
		b := runtime.StorageBytes(t, s)
		if s == backend.Int4 && floatType(t.Type) {
			layerFloats += int64(t.Elements())
		}
		e.Weights += b
		e.Largest = max(e.Largest, b)
	}
	if mixed { // int8 costs 10 bits a value against int4's 5
		e.Weights += int64(runtime.MixedShare*float64(layerFloats)) * 5 / 8
	}
	if mixed && layerFloats == 0 && !hasFloatMatrix(m) {
		e.Quant = "" // nothing for the policy to quantize
	}
	if e.Quant == "" { // the file's own: named by the storage of most bytes
		var most int64
		for _, u := range runtime.WeightMix(m, ws) {
			if u.Bytes > most {
				most, e.Quant = u.Bytes, u.Storage.String()
			}
		}
	}
	b := runtime.DefaultBudgets(runtime.Budgets{}, device, c)
	e.KV, e.Window = runtime.PoolKV(c, context, b) // with the sliding layers' rings where they pay
	rows, seqs := int64(b.MaxBatchTokens), int64(b.MaxSeqs)
	e.Scratch = 4 * (rows*int64(4*c.Dim+2*c.FFN+2*c.Heads*c.HeadDim) + seqs*int64(c.Vocab))
	e.Scratch += runtime.RecurrentStateBytes(c, b.MaxSeqs) // linear layers' states (Qwen3.5)
	if device == "cpu" {
		// The CPU's prompt attention puts a layer's f32 keys of the
		// positions a step attends to in its kernel's transposed layout
		// (cpu attendSpans): up to one layer's keys of the context, and
		// no more than cpu.SpanKeysBytes.
		e.Scratch += min(4*int64(context)*int64(c.KVHeads*c.HeadDim), cpu.SpanKeysBytes)
		// Each worker's wide kernel keeps its lanes for every row of a
		// step and block of weight rows it takes at once (cpu.WideBytes);
		// a worker a CPU unless told fewer.
		e.Scratch += cpu.WideBytes(int(rows)) * int64(goruntime.GOMAXPROCS(0))
	}
	e.Total = e.Weights + e.KV + e.Scratch
	return e, nil
}

// hasFloatMatrix reports whether m keeps any matrix in floats.
func hasFloatMatrix(m *models.Model) bool {
	for _, t := range m.Tensors {
		if len(t.Shape) == 2 && floatType(t.Type) {
			return true
		}
	}
	return false
}

// floatType reports whether t is a float type (the matrices the mixed
// policy and int4 quantize at load).
func floatType(t dtype.Type) bool {
	return t == dtype.F32 || t == dtype.F16 || t == dtype.BF16 || t == dtype.F64
}
