package runtime_test

import (
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
)

// TestLegacyStorage: the block types the CPU multiplies only in its Go
// twin (WeightStorage.Legacy) whose legacy storage costs at most twice
// their file's bits take it (Q4_0 and Q4_K int4, the 5- to 8-bit types
// int8), and the rest keep their bits; without Legacy every block type
// stays Blocks but Q4_1 (int4's own groups). PlanStorage names on the CPU
// exactly the types this CPU has no block kernels for, on WebGPU none.
func TestLegacyStorage(t *testing.T) {
	legacy := map[dtype.Type]backend.Storage{
		dtype.Q4_0: backend.Int4, dtype.Q4_K: backend.Int4, dtype.Q4_1: backend.Int4,
		dtype.Q5_0: backend.Int8, dtype.Q5_1: backend.Int8, dtype.Q5_K: backend.Int8,
		dtype.Q6_K: backend.Int8, dtype.Q8_0: backend.Int8,
		dtype.Q2_K: backend.Blocks, dtype.Q3_K: backend.Blocks,
		dtype.IQ4_NL: backend.Blocks, dtype.IQ4_XS: backend.Blocks, dtype.MXFP4: backend.Blocks,
	}
	var c models.Config
	all := map[dtype.Type]bool{}
	for _, typ := range dtype.BlockTypes {
		all[typ] = true
	}
	for _, typ := range dtype.BlockTypes {
		mt := models.NewTensor("blk.0.attn_q.weight", []int{8, 512}, typ, nil)
		want := backend.Blocks
		if typ == dtype.Q4_1 {
			want = backend.Int4
		}
		if got := (runtime.WeightStorage{}).For(mt, c); got != want {
			t.Errorf("%v: %v, want %v", typ, got, want)
		}
		if got := (runtime.WeightStorage{Legacy: all}).For(mt, c); got != legacy[typ] {
			t.Errorf("%v with Legacy: %v, want %v", typ, got, legacy[typ])
		}
	}
	// Fused: q (Q4_K) and v (Q6_K) share the widest legacy storage.
	q := models.NewTensor("blk.0.attn_q.weight", []int{8, 512}, dtype.Q4_K, nil)
	v := models.NewTensor("blk.0.attn_v.weight", []int{8, 512}, dtype.Q6_K, nil)
	if got := (runtime.WeightStorage{Legacy: all}).Fused([]*models.Tensor{q, v}, c); got != backend.Int8 {
		t.Errorf("fused Q4_K and Q6_K with Legacy: %v, want int8", got)
	}
	m := &models.Model{Tensors: map[string]*models.Tensor{q.Name: q}}
	for _, device := range []string{"cpu", "webgpu"} {
		ws, err := runtime.PlanStorage(m, "", device, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range dtype.BlockTypes {
			if want := device == "cpu" && !cpu.BlockKernels(typ); ws.Legacy[typ] != want {
				t.Errorf("%s: Legacy[%v] %v, want %v", device, typ, ws.Legacy[typ], want)
			}
		}
		// One type's kernel decides for that type alone.
		q6 := models.NewTensor("blk.0.attn_v.weight", []int{8, 512}, dtype.Q6_K, nil)
		if got, want := ws.For(q6, c), backend.Blocks; (device == "webgpu" || cpu.BlockKernels(dtype.Q6_K)) && got != want {
			t.Errorf("%s: Q6_K with its kernel: %v, want %v", device, got, want)
		}
	}
}
