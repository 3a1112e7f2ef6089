package runtime

import (
	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// The sizes of what loading allocates, from a model's description alone:
// exported so that runtime/eval's EstimateMemory adds up the same
// formulas the engine allocates by, and cannot drift from them.

// MixedDefault reports whether Options.Quant quant on device ("webgpu" or
// "cpu") puts m's float matrices in the mixed 4-bit policy: asked for, or
// the default on WebGPU for models that are not small.
func MixedDefault(m *models.Model, quant, device string) bool { return mixedFor(m, quant, device) }

// StorageBytes is the size of tensor t kept in storage s.
func StorageBytes(t *models.Tensor, s backend.Storage) int64 { return storageBytes(t, s) }

// KVBlockBytes is the size of one KV-cache block of blockSize positions
// of type t across all of c's layers that keep keys and values.
func KVBlockBytes(c models.Config, blockSize int, t backend.KVType) int64 {
	return kvBlockBytes(c, blockSize, t)
}

// DefaultBudgets are the budgets an engine on device ("webgpu" or "cpu")
// resolves b to for a model of config c: its zero fields filled with the
// device's defaults, the tokens capped by the context.
func DefaultBudgets(b Budgets, device string, c models.Config) Budgets {
	return b.resolve(device != "cpu", c)
}

// RecurrentStateBytes is the memory of the recurrent states of c's linear
// layers (Qwen3.5) for an engine running maxSeqs sequences at once; zero
// for a model without them.
func RecurrentStateBytes(c models.Config, maxSeqs int) int64 {
	return recurrentShape(c, maxSeqs).Bytes()
}
