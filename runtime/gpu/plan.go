package gpu

import (
	"slices"

	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// Plan forces kernel choices that a Backend otherwise makes from the
// adapter and the shapes: for tests and benchmarks that compare the plans
// one adapter can run (a GPU's kernels on lavapipe, say). The zero value
// leaves every choice to the backend. A plan belongs to one Backend, so
// tests that force different plans can run side by side.
type Plan struct {
	// MatMul forces the kernel of f32 products: "naive", "gemm", "gemv"
	// (the GPU's GEMV, for any row count) or "gemv1" (the CPU adapters',
	// one invocation per cpuCPI columns). A forced GEMV still falls back to GEMM
	// where k % 4 != 0.
	MatMul string
	// Quant forces the kernel of compressed weights: "gemv" (this
	// adapter's GEMV for any row count), "gemv-gpu" (the GEMV as planned
	// for a GPU, several invocations a column and a tree sum, on any
	// adapter) or "gemm". A GEMV still needs k % 4 == 0.
	Quant string
	// Experts forces the kernel of the expert products: "gemm" (the
	// grouped GEMM, for any row count) or "gemv" (the expert GEMVs).
	Experts string
	// Attention forces the kernel of decode rows: "group" (attention_decode,
	// a workgroup per chunk, the GPUs' form) or "lane" (attention_lane, an
	// invocation per head and chunk, the CPU adapters' form).
	Attention string
	// NormPrologue forces whether projections take their RMSNorm as the
	// GEMV's prologue: "on" or "off" (see normPrologue).
	NormPrologue string
	// Fusion "off" runs every projection unfused: its norm, its product
	// and its epilogue (outputs, GLU, bias, residual add) each in a
	// dispatch of its own, as the plainest kernels do them.
	Fusion string
	// LoRA forces how a projection adds its adapters: "fused" (in the
	// product's epilogue, whatever the device's binding limit, h from
	// lora_shrink), "inline" (the product computes h itself wherever it
	// can, see shrinkInside; else as "") or "unfused" (a lora_expand per
	// weight after the product); see loraFused.
	LoRA string
	// Shrink forces lora_shrink's form: "whole" (an invocation streams
	// its columns' whole rows, the CPU adapters' form) or "split" (the
	// invocations of a workgroup split the width, the GPUs'); see
	// shrinkSplits.
	Shrink string
	// Subgroups "off" runs the plain kernels on a device that has
	// subgroups (see Backend.subgroups); else the kernels of
	// shaders.SubgroupKernels take their subgroup variants there.
	Subgroups string
	// F16 "off" runs the f32 forms of shaders.F16Kernels on a device
	// with shader-f16 (see Backend.f16).
	F16 string
	// Workgroups forces the workgroup size of rmsnorm, argmax and the CPU
	// adapters' GEMVs: "narrow" (narrowWG invocations, SwiftShader's
	// choice) or "wide" (256 for the reductions, cpuWorkgroup for the
	// GEMVs: every other adapter's); see narrow.go.
	Workgroups string
	// RopeAttend forces whether RopeAttend runs as one dispatch of
	// attention_lane composed with Rope where it can: "on" (wherever
	// decode rows take attention_lane) or "off" (RopeStore then Attend);
	// by default on SwiftShader only (see Backend.RopeAttend).
	RopeAttend string
	// Fault names a kernel variant, as Kernels lists them
	// ("matmul_gemv+norm"), whose output is perturbed after every
	// dispatch (the first faultValues values of its destination scaled
	// by 1.5): a test's stand-in for a driver that miscompiles that
	// kernel, which the engine's load-time self-check must catch.
	Fault string
}

// faultValues is how many values of its destination a faulty kernel
// (Plan.Fault) gets wrong.
const faultValues = 64

// SetPlan makes b use p from its next op on.
func (b *Backend) SetPlan(p Plan) { b.plan = p }

// Rung is one plan of the load-time self-check's ladder (Plainer), named
// for what it gives up.
type Rung struct {
	Name string
	Plan Plan
}

// Plainer is the ladder of kernel plans the engine's load-time self-check
// tries on an adapter described by i, from base: each rung adds its change
// to those above it, from the kernels the adapter would pick to the
// plainest the backend has (no fusion, tiled or naive products). A rung
// names what it gives up, which is what failed when the rung above it did
// not pass. The ladder lives here because its rungs are this backend's
// kernel choices; the engine only runs them (runtime/device.go).
func Plainer(base Plan, i webgpu.Info) []Rung {
	steps := []struct {
		name  string
		apply func(p *Plan)
	}{
		{"the adapter's kernels", func(*Plan) {}},
		{"no RMSNorm prologue in the GEMVs", func(p *Plan) { p.NormPrologue = "off" }},
		{"unfused projections", func(p *Plan) { p.Fusion = "off" }},
		{"unfused LoRA", func(p *Plan) { p.LoRA, p.Shrink = "unfused", "whole" }},
		{"tiled GEMM for compressed and expert products", func(p *Plan) { p.Quant, p.Experts = "gemm", "gemm" }},
		{"the other attention kernel", func(p *Plan) {
			p.Attention = "lane"
			if i.DeviceType == "cpu" { // lanes are the CPU adapters' own
				p.Attention = "group"
			}
		}},
		{"tiled GEMM for f32 products", func(p *Plan) { p.MatMul = "gemm" }},
		{"naive f32 products", func(p *Plan) { p.MatMul = "naive" }},
	}
	type step = struct {
		name  string
		apply func(p *Plan)
	}
	if swiftShader(i) {
		steps = slices.Insert(steps, 1, step{"wide workgroups", func(p *Plan) { p.Workgroups = "wide" }},
			step{"rope apart from attention", func(p *Plan) { p.RopeAttend = "off" }})
	}
	if i.Subgroups {
		steps = slices.Insert(steps, 1, step{"no subgroup kernels", func(p *Plan) { p.Subgroups = "off" }})
	}
	if i.ShaderF16 {
		steps = slices.Insert(steps, 1, step{"no f16 kernels", func(p *Plan) { p.F16 = "off" }})
	}
	rungs := make([]Rung, len(steps))
	plan := base
	for k, s := range steps {
		s.apply(&plan)
		rungs[k] = Rung{Name: s.name, Plan: plan}
	}
	return rungs
}
