package gpu

import (
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/shaders"
)

// MatMul dispatches one of three kernels, once per part of a weight split
// across bindings (f16 and int4 weights go to matmulQ, which has kernels of
// its own on the same plan):
//
//   - matmul_gemv, bandwidth-bound: every weight read once with vec4 loads
//     into one partial sum per row of a block of up to gemvMaxRows rows
//     (more rows take one block after the other). It needs k % 4 == 0.
//   - matmul_gemm, tiled in workgroup memory with register blocks, for
//     arithmetic-bound shapes (and for widths k that are not a multiple of 4).
//   - matmul, the naive kernel (one invocation per output), kept as the
//     baseline the others are measured against, and used on CPU adapters
//     for a few rows of a width k % 4 != 0.
//
// On a GPU, decoding (up to gemvMaxRows rows) takes GEMV with a few dozen
// invocations per column and prompt chunks take GEMM. On a CPU adapter
// (lavapipe, SwiftShader), whose invocations are the SIMD lanes of one
// thread, every access to memory that differs between lanes costs a scalar
// load per lane and a barrier switches between lanes' coroutines; there GEMV
// with one invocation per cpuCPI columns wins at every row count: it loads
// each weight once per lane for up to gemvMaxRows multiply-adds, each x
// value (the same for all lanes, a gather all the same) once for cpuCPI
// columns, and needs no barrier. Measured on lavapipe, see
// BenchmarkMatMul.
//
// The plan, and the override constants chosen with it, depend on the host's
// row count, which is also the count the kernels read from the Step uniform
// (the batch, capped by dst's rows). The constants are repeated in the
// params, since a cached call site is keyed by kernel, params and operands.
var (
	matmulOp     = op{kernel: "matmul", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}
	matmulGEMVOp = op{kernel: "matmul_gemv", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}
	matmulGEMMOp = op{kernel: "matmul_gemm", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}
)

// gemvMaxRows is the largest row block of the GEMV kernel: its partial sums
// take 256·gemvMaxRows floats of workgroup memory (8 KiB).
const gemvMaxRows = 8

// cpuPromptRows is the row block of the f32 GEMV on CPU adapters for steps
// of at least that many rows (prompts, images), where each invocation then
// computes cpuPromptCPI columns: on llvmpipe every load is a loop over the
// SIMD lanes, so the multiply-adds per loaded vec4 decide the speed, and a
// 32×8 block does 256 for each 40 loads where the decode block (8×4) does
// 32 for each 12. CPU time of a 1024×1152 by 1152×1152 product on lavapipe
// (BenchmarkMatMul, one run alternating): 8 rows × 4 columns 680 ms, 32 ×
// 4 500 ms, 16 × 8 470 ms, 32 × 8 400 ms. Decoding keeps the narrow block:
// there the weights' bandwidth, not the loads' count, decides.
const (
	cpuPromptRows = 32
	cpuPromptCPI  = 8
)

// blockRows is a GEMV's rows a block for m rows: the least power of two
// that holds min(m, gemvMaxRows).
func blockRows(m int) int {
	maxm := 1
	for maxm < min(m, gemvMaxRows) {
		maxm *= 2
	}
	return maxm
}

// matmulPlan is a kernel and its constants.
type matmulPlan struct {
	kernel string // "naive", "gemv" or "gemm"
	tpc    int    // GEMV: invocations per column
	maxm   int    // GEMV: rows per block
	tm     int    // GEMM: rows of a thread's register block (tile of 16·tm rows)
}

// planMatMul chooses the kernel for m rows of width k on a CPU adapter or
// not, unless forced ("": no; else Plan.MatMul's names).
func planMatMul(m, k int, cpu bool, forced string) matmulPlan {
	kernel := forced
	if kernel == "" {
		switch {
		case cpu && k%4 != 0 && m <= gemvMaxRows:
			// A few rows of a width GEMV cannot take: on a CPU adapter the
			// naive kernel beats the tiled one, whose tile loads and
			// barriers cost more there than they save.
			kernel = "naive"
		case cpu:
			kernel = "gemv1"
		case m <= gemvMaxRows:
			kernel = "gemv"
		default:
			kernel = "gemm"
		}
	}
	if kernel == "naive" {
		return matmulPlan{kernel: "naive"}
	}
	if (kernel == "gemv" || kernel == "gemv1") && k%4 == 0 {
		maxm := blockRows(m)
		tpc := 1
		if kernel == "gemv" {
			tpc = gemvThreads(k)
		}
		return matmulPlan{kernel: "gemv", tpc: tpc, maxm: maxm}
	}
	tm := 4
	if m <= 32 {
		tm = 2
	}
	return matmulPlan{kernel: "gemm", tm: tm}
}

// gemvThreads is how many invocations of the GEMV kernel split one column
// of width k on a GPU: about four vec4 loads each, at least 4 and at most 64
// (two NVIDIA warps, one AMD wave).
func gemvThreads(k int) int {
	t := 4
	for t < 64 && 32*t <= k {
		t *= 2
	}
	return t
}

func (b *Backend) MatMul(dst, x backend.Tensor, w backend.Weight) {
	b.matmul(dst.(*Tensor), x.(*Tensor), w.(*Weight), shaders.Fusion{}, nil)
}

// matmul records d = x·wᵀ composed with f, whose extra bindings follow
// the kernel's own. Only the GEMV kernels compose: for a fusion that the
// planned kernel cannot take it records nothing and returns false.
func (b *Backend) matmul(d, xs *Tensor, ws *Weight, f shaders.Fusion, extra []webgpu.Binding) bool {
	if ws.storage != backend.F32 {
		return b.matmulQ(d, xs, ws, f, extra) // compressed weights: quant.go, on the same plan
	}
	m, k := b.rows(d), xs.cols
	pl := planMatMul(m, k, b.info.DeviceType == "cpu", b.plan.MatMul)
	if f.Fused() && pl.kernel != "gemv" {
		return false
	}
	if pl.kernel == "gemv" && pl.tpc == 1 && m >= cpuPromptRows && !f.LoRA {
		// Prompt rows on a CPU adapter: wider blocks (see cpuPromptRows).
		// LoRA's inline h holds gemvMaxRows rows at most (lora.go).
		pl.maxm = cpuPromptRows
	}
	var pa [paramsSize / 4]uint32 // the parameters and operands of a dispatch, on the stack
	var oa [maxBindings]webgpu.Binding
	for _, pt := range ws.parts {
		operands := append(oa[:0], webgpu.Binding{Buffer: d.buf}, webgpu.Binding{Buffer: xs.buf}, webgpu.Binding{Buffer: pt.buf})
		p := append(params(pa[:0]), uint32(k), uint32(d.cols), uint32(d.rows), uint32(pt.row0), uint32(pt.rows))
		switch pl.kernel {
		case "naive":
			gx, gy := b.grid(m*pt.rows, elementWG)
			b.record(matmulOp, p, operands, gx, gy, 1)
		case "gemv":
			o, tail, cpi, perWG := b.gemv(formatF32, pl.maxm, pl.tpc, f)
			gx, gy := b.grid((pt.rows+cpi-1)/cpi, perWG)
			b.record(o, append(p, tail...), append(operands, extra...), gx, gy, uint32((m+pl.maxm-1)/pl.maxm))
		default:
			o := matmulGEMMOp
			o.consts = map[string]float64{"TM": float64(pl.tm)}
			b.record(o, append(p, uint32(pl.tm)), operands, uint32((pt.rows+63)/64), uint32((m+16*pl.tm-1)/(16*pl.tm)), 1)
		}
	}
	return true
}

// composes reports whether the product of w for the rows of d and x's
// width runs a GEMV, the kernels that compose with a shaders.Fusion.
func (b *Backend) composes(d, xs *Tensor, w *Weight) bool {
	if w.storage != backend.F32 {
		gemv, _ := b.planQuant(b.rows(d), xs.cols)
		return gemv
	}
	return planMatMul(b.rows(d), xs.cols, b.info.DeviceType == "cpu", b.plan.MatMul).kernel == "gemv"
}

// newGemv is gemv without the cache.
func (c *opCache) newGemv(format string, maxm, tpc, cpuWG int, f shaders.Fusion) (o op, tail params, cpi, perWG int) {
	switch format {
	case formatF32:
		o = c.fused(matmulGEMVOp, f)
	case formatF16:
		o = c.fused(matmulF16GEMVOp, f)
	default:
		o = quantOp(c.fused(matmulQuantGEMVOp, f), format)
	}
	cpi, wg := 1, 256
	if tpc == 1 {
		cpi, wg = cpuCPI, cpuWG
		if format == formatF32 && maxm == cpuPromptRows {
			cpi = cpuPromptCPI
		}
	}
	o.consts = map[string]float64{"TPC": float64(tpc), "MAXM": float64(maxm), "CPI": float64(cpi), "WG": float64(wg)}
	return o, params{uint32(tpc), uint32(maxm), uint32(cpi), uint32(wg)}, cpi, wg / tpc
}

// gemm is the tiled GEMM of format with tiles of 16·tm rows, composed
// with f (the grouped GEMM of the experts, or nothing), and the parameters
// after the kernel's own (TM).
func (c *opCache) gemm(format string, tm int, f shaders.Fusion) (op, params) {
	var o op
	switch format {
	case formatF32:
		o = c.fused(matmulGEMMOp, f)
	case formatF16:
		o = c.fused(matmulF16GEMMOp, f)
	default:
		o = quantOp(c.fused(matmulQuantGEMMOp, f), format)
	}
	o.consts = map[string]float64{"TM": float64(tm)}
	return o, params{uint32(tm)}
}
