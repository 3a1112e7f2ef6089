// matmul_int8_gemm: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of an int8 weight (layout: see matmul_int8_gemv) and the first
// min(cap, step.rows) rows r of x: the tiled GEMM of matmul_int4_gemm
// (quant_gemm.inc.wgsl), whose k step of 32 inputs is two int8 groups.
// Invocation t expands inputs 8(t % 4)..8(t % 4)+7 of column t / 4: two
// code words of group k0 / 16 + (t % 4) / 2, with that group's scale word.
// A step past the last group (k ≤ k0 + 16) reads nothing and expands
// zeros. Twin: runtime/cpu MatMulQ (kernel.DotQ8).
fn load_w(k0: u32, c0: u32, t: u32, wb: u32) {
    let c = t / 4u;
    let wi = t % 4u;
    let col = c0 + c;
    let gi = k0 / 16u + wi / 2u;
    var words = vec2<u32>(0u);
    var sm = vec2<f32>(0.0, 0.0);
    if (col < p.nrows && gi < p.groups) {
        let at = ((wb + col) * p.groups + gi) * 4u + (wi % 2u) * 2u;
        words = vec2<u32>(codes[at], codes[at + 1u]);
        sm = unpack2x16float(scales[(wb + col) * p.groups + gi]);
    }
    for (var i = 0u; i < 8u; i++) {
        ws[(wi * 8u + i) * WS + c] = sm.x * f32((words[i / 4u] >> (8u * (i % 4u))) & 255u) + sm.y;
    }
}
{{template "quant_gemm" .}}
