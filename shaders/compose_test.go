package shaders_test

import (
	"strings"
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
		{"rmsnorm", shaders.Fusion{Solo: true}}, // the solo form is a GEMV's
		{"matmul_gemm", shaders.Fusion{Solo: true}},
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

// TestSoloShares checks the GEMVs' solo forms (Fusion.Solo, the CPU
// adapters' TPC = 1) for what they are for: no workgroup memory and no
// barrier, which a browser's WebGPU would zero-fill behind a barrier at
// every workgroup's start (issue 49), in every composition but the one
// that computes the adapters' h in workgroup memory (Shrink); and that the
// other forms keep their tree sum.
func TestSoloShares(t *testing.T) {
	for _, name := range shaders.GEMVs {
		for _, f := range []shaders.Fusion{
			{},
			{Norm: true},
			{Norm: true, Prescaled: true, Outs: 3},
			{Norm: true, Prescaled: true, Pairs: true, GLU: true},
			{Add: true, Next: true},
			{Experts: true, Pairs: true, GLU: true},
			{LoRA: true, Norm: true, Prescaled: true},
		} {
			if name == "matmul_quant_gemv" {
				f.Weight = "q4_k"
			}
			if name == "matmul_f16_gemv" {
				f.F16 = true
			}
			for _, solo := range []bool{false, true} {
				f.Solo = solo
				src, err := shaders.Compose(name, f)
				if err != nil {
					t.Fatalf("Compose(%s, %+v): %v", name, f, err)
				}
				shares := strings.Contains(src, "var<workgroup>") || strings.Contains(src, "workgroupBarrier")
				if shares == solo {
					t.Errorf("%s%s solo %v: workgroup memory or barriers %v, want %v", name, f, solo, shares, !solo)
				}
			}
		}
	}
}
