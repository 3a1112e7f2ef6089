// matmul_int4_gemv (its body: quant_gemv.inc.wgsl, shared with
// matmul_int8_gemv): dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of an int4 weight (models/dtype Int4) and a block of up to MAXM
// rows r of x (block g.z: rows g.z·MAXM ..., of the first min(cap,
// step.rows)). The decode case: the weight is read once per step, 5 bits a
// value instead of 32, and the kernel is bound by memory bandwidth.
//
// The weight is two arrays: codes, one vec4<u32> (32 nibbles) per group of
// 32 inputs, and scales, one u32 per group holding the f16 scale (low half)
// and min (high half). Word w of a group holds inputs 8w..8w+7, input 8w+i
// in bits 4i..4i+3. Row j's groups are j·groups ... j·groups + groups − 1.
//
// Algorithm (as matmul_gemv): a workgroup of WG invocations computes
// NC = WG / TPC columns (CPI times that with TPC = 1); the TPC invocations of a column take its groups
// lane, lane + TPC, ... (neighbouring invocations read neighbouring 16-byte
// code vectors and 4-byte scale words: coalesced). For each group an
// invocation loads the codes and the scale word once and adds
// scale·Σ q·x + min·Σ x to one partial sum per row of the block (the
// value scale·q + min factored out, as llama.cpp's Q4_1 dot does: per
// value a mask, a conversion and a multiply-add, the scale and min once a
// group; 17% less CPU a token than expanding each value on lavapipe); the
// partial sums of a column are then added in a tree in workgroup memory. With TPC = 1 (CPU adapters) each invocation owns CPI adjacent
// columns and there is no barrier: there, where invocations are the SIMD
// lanes of a thread, every x load is a gather across lanes and costs more
// than the expansion, so the x values of a group are loaded once for CPI
// columns. (On GPUs CPI is 1: x is cached and the columns of a workgroup
// should stay many.)
//
// k need not be a multiple of 32: the last, short group of a row reads only
// the x values below k. It must be a multiple of 4 (x is read as vec4);
// other widths go to matmul_int4_gemm. Twin: runtime/cpu MatMulQ (summed in
// another order).
//
// Composed with a shaders.Fusion (fusion.inc.wgsl) it also normalises the
// input rows (the norm's weights on each x load, the row's 1/rms on each
// sum) and stores through the fusion's epilogue; with Pairs, two adjacent
// columns reach emit_pair together: from one invocation with CPI ≥ 2, or
// through workgroup memory after the tree sum (NC ≥ 2 columns a workgroup).
const GV = 8u; // a group: 32 inputs, 8 vec4s

// MASK keeps the four nibbles of a half word in place: codes4's lane i
// holds 16^i times its code, which QS undoes once a group, so that a value
// costs an and, a conversion and a multiply-add (the shift of the high half
// aside), not a shift and the scale's multiply-add besides.
const MASK = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
const QS = vec4<f32>(1.0, 1.0 / 16.0, 1.0 / 256.0, 1.0 / 4096.0);

// codes4 returns the codes of inputs 4v..4v+3 of a group (nibbles of word
// v / 2, the high half when v is odd), lane i times 16^i.
fn codes4(code: vec4<u32>, v: u32) -> vec4<f32> {
    return vec4<f32>(vec4<u32>(code[v / 2u] >> (16u * (v % 2u))) & MASK);
}
{{template "quant_gemv" .}}
