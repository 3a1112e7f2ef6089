// matmul_int4_gemm: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of an int4 weight (layout: see matmul_int4_gemv) and the first
// min(cap, step.rows) rows r of x: the prompt case, where enough rows share
// each weight for the arithmetic to matter.
//
// Algorithm: the tiled GEMM of matmul_gemm with the k step set to one group
// (BK = 32). A workgroup of 16×16 invocations computes a BM×BN =
// (16·TM)×64 tile of dst. Per group, all invocations copy a BM×32 tile of x
// into workgroup memory (zeros outside x, so any M and K work) and expand a
// 64×32 tile of w there: invocation t takes word t % 4 of column t / 4,
// loads it and the column's scale word once, and writes its eight values
// (scale·q + min, the Go reference's arithmetic). Then each invocation adds
// the products of its TM×4 register block, as in matmul_gemm. The padding
// values of a short last group meet zeros of x and add nothing.
//
// Workgroup memory: 32·(BM+1) + 32·(BN+1) floats (16.4 KiB at TM = 4).
// The declarations and the GEMM are quant_gemm.inc.wgsl, shared with
// matmul_int8_gemm. Twin: runtime/cpu MatMulQ (summed in the same order
// within each output: k ascending).
// load_w: invocation t takes word t % 4 of column t / 4 of group k0 / 32.
fn load_w(k0: u32, c0: u32, t: u32, wb: u32) {
    let gi = k0 / BK;
    let c = t / 4u;
    let wi = t % 4u;
    let col = c0 + c;
    var word = 0u;
    var sm = vec2<f32>(0.0, 0.0);
    if (col < p.nrows) {
        word = codes[((wb + col) * p.groups + gi) * 4u + wi];
        sm = unpack2x16float(scales[(wb + col) * p.groups + gi]);
    }
    for (var i = 0u; i < 8u; i++) {
        ws[(wi * 8u + i) * WS + c] = sm.x * f32((word >> (4u * i)) & 15u) + sm.y;
    }
}
{{template "quant_gemm" .}}