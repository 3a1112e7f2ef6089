package shaders_test

import (
	"testing"

	"github.com/tessera-llm/tessera/shaders"
)

// TestComposeRefuses: compositions no kernel is written for are errors,
// not kernels that read bindings nobody binds.
func TestComposeRefuses(t *testing.T) {
	for _, tc := range []struct {
		kernel string
		f      shaders.Fusion
	}{
		{"no_such_kernel", shaders.Fusion{}},
		{"lora.inc", shaders.Fusion{}},
		{"attention_decode", shaders.Fusion{KV: "f8"}},
		{"matmul_gemv", shaders.Fusion{Pairs: true}},
		{"matmul_gemv", shaders.Fusion{Next: true}},
		{"matmul_gemv", shaders.Fusion{Experts: true, Norm: true}},
		{"matmul_gemv", shaders.Fusion{LoRA: true, Experts: true, Pairs: true, GLU: true}},
		{"fuse_epilogue", shaders.Fusion{LoRA: true, Shrink: true}},
		{"matmul_gemv", shaders.Fusion{Shrink: true}},
		{"matmul_gemv", shaders.Fusion{Half: true}},             // halves are adapters' values
		{"rmsnorm", shaders.Fusion{Half: true}},                 // ditto
		{"lora_expand", shaders.Fusion{Half: true, Norm: true}}, // only the shrink applies a norm
		{"matmul_quant_gemv", shaders.Fusion{}},                 // the grouped kernels need a format
		{"matmul_quant_gemv", shaders.Fusion{Weight: "q7_k"}},
		{"matmul_gemv", shaders.Fusion{Weight: "int4"}}, // and the others take none
		{"rope", shaders.Fusion{Subgroups: 4}},          // no reduction, no subgroup variant
		{"rmsnorm", shaders.Fusion{Subgroups: 6}},       // sizes are powers of two, 4 to 128
		{"rmsnorm", shaders.Fusion{Subgroups: 2}},
		{"matmul_gemv", shaders.Fusion{F16: true}},      // f16 forms are the f16 weights' and caches'
		{"attention_decode", shaders.Fusion{F16: true}}, // a cache kernel's needs an f16 cache
		{"store_kv", shaders.Fusion{KV: "int8", F16: true}},
	} {
		if src, err := shaders.Compose(tc.kernel, tc.f); err == nil {
			t.Errorf("Compose(%s, %+v) = %d bytes of WGSL, want an error", tc.kernel, tc.f, len(src))
		}
	}
	for _, tc := range []struct {
		kernel string
		f      shaders.Fusion
	}{
		{"lora_shrink", shaders.Fusion{Half: true, Norm: true}},
		{"lora_gather", shaders.Fusion{Half: true}},
		{"matmul_quant_gemv", shaders.Fusion{Outs: 3, LoRA: true, Shrink: true, Half: true, Weight: "int4"}},
		{"matmul_quant_gemm", shaders.Fusion{Weight: "q6_k"}},
		{"embed_quant", shaders.Fusion{Weight: "mxfp4"}},
		{"fuse_epilogue", shaders.Fusion{Pairs: true, GLU: true, LoRA: true, Half: true}},
		{"attention_decode", shaders.Fusion{KV: "int8", Subgroups: 32}},
		{"attention_decode", shaders.Fusion{KV: "f16", F16: true, Subgroups: 4}},
		{"matmul_f16_gemm", shaders.Fusion{Experts: true, Pairs: true, GLU: true, F16: true}},
		{"matmul_quant_gemv", shaders.Fusion{Pairs: true, GLU: true, Norm: true, Weight: "q4_k", Subgroups: 4}},
	} {
		if _, err := shaders.Compose(tc.kernel, tc.f); err != nil {
			t.Errorf("Compose(%s, %+v): %v", tc.kernel, tc.f, err)
		}
	}
}
