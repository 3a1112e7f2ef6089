package runtime

import (
	"fmt"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// WeightStorage chooses how the engine keeps its weights on the backend.
// The matrices (attention, feed-forward, the output head) and the token
// embedding table take Matrices; norm weights and other vectors stay f32.
// Its zero value keeps everything in f32.
type WeightStorage struct {
	Matrices backend.Storage
	// HeadFloat keeps the output head in f32 whatever Matrices says (and
	// so the embedding table too when the head is tied to it): the head
	// turns the last hidden state into every logit, the one place where a
	// quantization error reaches the sampler undiluted.
	HeadFloat bool
	// Native keeps each matrix as the file stores it, where a storage
	// holds its values exactly: Q4_0, Q4_1 and Q4_K codes as Int4, F16 as
	// F16, everything else (F32, BF16, the other block types) as F32;
	// Matrices is then not consulted. Memory stays about the file's size
	// and nothing is re-rounded.
	Native bool
}

// For returns the storage of tensor t of a model with config c.
func (s WeightStorage) For(t *models.Tensor, c models.Config) backend.Storage {
	switch {
	case len(t.Shape) != 2:
		return backend.F32
	case s.HeadFloat && (t.Name == models.Output || t.Name == models.TokenEmbedding && c.TiedEmbeddings):
		return backend.F32
	case s.Native:
		switch {
		case dtype.Int4Exact(t.Type) && t.Shape[1]%t.Type.BlockSize() == 0:
			return backend.Int4
		case t.Type == dtype.F16:
			return backend.F16
		}
		return backend.F32
	}
	return s.Matrices
}

// smallModel is the size of weights under which "" keeps them f32 even on
// WebGPU: a model that small decodes at the speed of the dispatches, not of
// its bytes, so 4-bit storage would cost quality and gain nothing.
const smallModel = 32 << 20

// weightStorage reads Options.Quant and HeadFloat for a backend and model:
// "" picks int4 on WebGPU, where weight bytes bound decoding (f32 for models
// under smallModel), and the file's own storage on the CPU (Native), whose
// kernels read int4 and f16 directly: a 4-bit file stays 4-bit in memory.
func weightStorage(opts Options, be backend.Backend, m *models.Model) (WeightStorage, error) {
	ws := WeightStorage{HeadFloat: opts.HeadFloat}
	if opts.Quant == "" {
		var bytes int64
		for _, t := range m.Tensors {
			bytes += 4 * int64(t.Elements())
		}
		switch {
		case be.Name() == "cpu":
			ws.Native = true
		case be.Name() == "webgpu" && bytes >= smallModel:
			ws.Matrices = backend.Int4
		}
		return ws, nil
	}
	s, err := backend.ParseStorage(opts.Quant)
	if err != nil {
		return ws, fmt.Errorf("--quant: %w", err)
	}
	ws.Matrices = s
	return ws, nil
}
