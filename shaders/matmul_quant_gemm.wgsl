// matmul_quant_gemm: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of a grouped integer weight (the formats of matmul_quant_gemv,
// quant_formats.inc.wgsl) and the first min(cap, step.rows) rows r of x:
// the prompt case, where enough rows share each weight for the arithmetic
// to matter.
//
// Algorithm: the tiled GEMM of matmul_gemm with a k step of 32 inputs
// (BK = 32: one group, or two of int8). A workgroup of 16×16 invocations
// computes a BM×BN = (16·TM)×64 tile of dst. Per step, all invocations
// copy a BM×32 tile of x into workgroup memory (zeros outside x, so any M
// and K work) and expand a 64×32 tile of w there: invocation t takes
// inputs 8(t % 4)..8(t % 4)+7 of the step of column t / 4, loads their
// group (grp) and writes the eight values scale·q + min (the Go
// reference's values bit for bit). Then each invocation adds the products
// of its TM×4 register block, as in matmul_gemm. The padding values of a
// short last group, and the groups past k, meet zeros of x and add nothing.
//
// Workgroup memory: 32·(BM+1) + 32·(BN+1) floats (16.4 KiB at TM = 4).
// The declarations and the GEMM are quant_gemm.inc.wgsl. Twin:
// runtime/cpu MatMulQ (summed in the same order within each output: k
// ascending).
fn load_w(k0: u32, c0: u32, t: u32, wb: u32) {
    let c = t / 4u;
    let col = c0 + c;
    let first = k0 + 8u * (t % 4u); // the step's inputs of this invocation
    let gi = first / GK;
    let v = (first % GK) / 4u; // its two vec4s in the group: v, v + 1
    var a = vec4<f32>(0.0);
    var b = vec4<f32>(0.0);
    if (col < p.nrows && gi < p.groups) {
        let g = grp(wb + col, gi);
        var s = g.s.x;
        var m = g.s.z;
        if (HALVES && v >= GV / 2u) {
            s = g.s.y;
            m = g.s.w;
        }
        if (!MINS) {
            m = 0.0;
        }
        a = s * (codes4(g, v) * QS) + m;
        b = s * (codes4(g, v + 1u) * QS) + m;
    }
    let wi = 8u * (t % 4u);
    for (var i = 0u; i < 4u; i++) {
        ws[(wi + i) * WS + c] = a[i];
        ws[(wi + 4u + i) * WS + c] = b[i];
    }
}
{{template "quant_gemm" .}}
