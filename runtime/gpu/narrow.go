package gpu

import (
	"strings"

	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/shaders"
)

// Narrow workgroups: SwiftShader's.
//
// SwiftShader runs a workgroup on one thread, SIMD::Width (4) invocations
// at a time; a kernel with a barrier runs each group of 4 as a coroutine
// and a barrier resumes every one of them, and WebGPU's zero-fill of
// workgroup memory (Dawn writes it into every shader that declares any:
// the browser's path) adds a barrier of its own. A workgroup of 4 is one
// coroutine, so its barriers and zero-fill cost next to nothing, and the
// GEMVs' workgroups become many small ones for the threads to share.
// Measured on stories260K's decode step, dispatch by dispatch
// (BenchmarkStepKernels, natively and in Chromium on the same
// SwiftShader): rmsnorm 245 → 15 µs natively and 467 → 57 in the browser,
// argmax 358 → 19 and 577 → 72, the GEMVs of a step 2.9 → 1.6–2.5 ms
// natively and 3.4 → 2.4 in the browser. lavapipe (llvmpipe, 8-wide
// vectors) keeps the wide workgroups it was tuned with (cpuWorkgroup, 256
// for the reductions): there the narrow forms gained nothing (the same
// step, one run: 1220 µs wide, 1258 narrow with the prologue, 1325
// without), and GPUs do not take the TPC 1 GEMV at all.

// narrowWG is the workgroup size of the narrow forms: SwiftShader's
// SIMD width, the smallest subgroup WGSL allows.
const narrowWG = 4

// reduceWG is the workgroup size of rmsnorm and argmax in their wide
// form (their kernels' default).
const reduceWG = 256

// swiftShader reports whether i describes SwiftShader: natively its
// adapter is "SwiftShader Device (...)", in Chromium its architecture is
// "swiftshader".
func swiftShader(i webgpu.Info) bool {
	for _, s := range []string{i.Adapter, i.Architecture, i.Driver} {
		if strings.Contains(strings.ToLower(s), "swiftshader") {
			return true
		}
	}
	return false
}

// narrow reports whether the single-row reductions and the CPU adapters'
// GEMVs take narrowWG invocations a workgroup: on SwiftShader, unless
// Plan.Workgroups says otherwise.
func (b *Backend) narrow() bool {
	switch b.plan.Workgroups {
	case "narrow":
		return true
	case "wide":
		return false
	}
	return b.onSwiftShader
}

// cpuWG is the workgroup size of the GEMVs' TPC 1 form (CPU adapters).
func (b *Backend) cpuWG() int {
	if b.narrow() {
		return narrowWG
	}
	return cpuWorkgroup
}

// gemv is the opCache's GEMV at this backend's workgroup size.
func (b *Backend) gemv(format string, maxm, tpc int, f shaders.Fusion) (o op, tail params, cpi, perWG int) {
	return b.ops.gemv(format, maxm, tpc, b.cpuWG(), f)
}

// reduce returns o (rmsnorm, argmax: a workgroup a row) at this backend's
// workgroup size, and the size, which goes into the parameters after the
// kernel's own so that the two forms never share a cached call.
func (b *Backend) reduce(o op) (op, uint32) {
	if !b.narrow() {
		return o, reduceWG
	}
	if b.ops.narrowConsts == nil {
		b.ops.narrowConsts = map[string]float64{"WG": narrowWG}
	}
	o.consts = b.ops.narrowConsts
	return o, narrowWG
}
