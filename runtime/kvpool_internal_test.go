package runtime

import (
	"errors"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// TestKVPoolHoldsTheContext: the default KV budget (four contexts, 1 GiB
// at most) never holds less than the context asked for, unless one
// context is more than the machine's memory, while a budget the caller
// sets still must hold it. The shape is Llama 3 8B's (32 layers, 8 kv
// heads of 128: 256 KiB a position in f32, so 1 GiB holds 4,096); the
// pool is sized, not allocated.
func TestKVPoolHoldsTheContext(t *testing.T) {
	c := models.Config{Arch: "llama", Dim: 4096, FFN: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 128256, NormEps: 1e-5, RopeTheta: 500000, RopeDim: 128, Rope: models.RopeHalves}
	b := Budgets{MaxBatchTokens: DefaultBatchTokensCPU, MaxSeqs: 4}
	for _, tc := range []struct {
		name    string
		context int
		kv      KVOptions
		mem     int64 // the machine's (0: unknown)
		blocks  int   // 0: ErrOutOfKV
	}{
		{"default, 2048 tokens: 1 GiB, two contexts", 2048, KVOptions{}, 0, 512},
		{"default, 512 tokens: four contexts and a block", 512, KVOptions{}, 0, 257},
		{"default, 8192 tokens: one context, over 1 GiB", 8192, KVOptions{}, 0, 1024},
		{"default, 8192 tokens on 16 GiB", 8192, KVOptions{}, 16 << 30, 1024},
		{"default, 8192 tokens on 1.5 GiB", 8192, KVOptions{}, 3 << 29, 0},
		{"default, 2048 tokens on 768 MiB: 1 GiB as before", 2048, KVOptions{}, 3 << 28, 512},
		{"default, 32768 tokens in int8", 32768, KVOptions{Type: backend.KVInt8}, 16 << 30, 4096},
		{"default, 8192 tokens in f16: 1 GiB is the context", 8192, KVOptions{Type: backend.KVF16}, 0, 1024},
		{"512 MiB asked for, 8192 tokens", 8192, KVOptions{Memory: 512 << 20}, 0, 0},
		{"4096 tokens asked for, a context of 8192", 8192, KVOptions{Tokens: 4096}, 0, 0},
		{"16384 tokens asked for, a context of 8192", 8192, KVOptions{Tokens: 16384}, 0, 2048},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := c
			cc.Context = tc.context
			kv := tc.kv
			kv.BlockSize = DefaultBlockSize
			blocks, _, err := kvPool(cc, kv, b, tc.mem)
			switch {
			case tc.blocks == 0 && !errors.Is(err, ErrOutOfKV):
				t.Fatalf("got %d blocks, %v; want ErrOutOfKV", blocks, err)
			case tc.blocks != 0 && (err != nil || blocks != tc.blocks):
				t.Fatalf("got %d blocks, %v; want %d", blocks, err, tc.blocks)
			}
		})
	}
}
