{{define "gemm"}}
{{- /* The tiled GEMM that matmul_gemm, matmul_f16_gemm, matmul_int4_gemm and int8
share (see matmul_gemm for the algorithm). The kernel declares Params (k,
n, cap, col0, nrows), the bindings (dst, x and its weight), TM, BK and
fn load_w(k0: u32, c0: u32, t: u32), which writes the BN×BK tile of its
weight at columns c0.., inputs k0.. into ws (transposed: ws[kk * WS + c]),
zeros outside the matrix. */}}
const BM = 16u * TM;
const BN = 64u;
const XS = BM + 1u; // row stride of xs
const WS = BN + 1u; // row stride of ws

const XSIZE = BK * XS;
const WSIZE = BK * WS;
var<workgroup> xs: array<f32, XSIZE>; // xs[kk * XS + r] = x[r0 + r, k0 + kk]
var<workgroup> ws: array<f32, WSIZE>; // ws[kk * WS + c] = w[c0 + c, k0 + kk]

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) t: u32,
        @builtin(workgroup_id) g: vec3<u32>) {
    let rows = min(p.cap, step.rows);
    let r0 = g.y * BM;
    let c0 = g.x * BN;
    let tx = lid.x;
    let ty = lid.y;

    var acc: array<vec4<f32>, TM>; // acc[i][c]: row r0 + ty + 16i, column c0 + tx + 16c
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        // Element e of a tile is (row e / BK, kk e % BK): 16 invocations read
        // 16 consecutive floats of one row.
        for (var e = t; e < BM * BK; e += 256u) {
            let r = r0 + e / BK;
            let k = k0 + e % BK;
            var v = 0.0;
            if (r < rows && k < p.k) { v = x[r * p.k + k]; }
            xs[(e % BK) * XS + e / BK] = v;
        }
        load_w(k0, c0, t);
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            let b = vec4(ws[kk * WS + tx], ws[kk * WS + tx + 16u], ws[kk * WS + tx + 32u], ws[kk * WS + tx + 48u]);
            for (var i = 0u; i < TM; i++) {
                acc[i] += xs[kk * XS + ty + 16u * i] * b;
            }
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < TM; i++) {
        let r = r0 + ty + 16u * i;
        if (r >= rows) { break; }
        for (var c = 0u; c < 4u; c++) {
            let j = c0 + tx + 16u * c;
            if (j < p.nrows) { dst[r * p.n + p.col0 + j] = acc[i][c]; }
        }
    }
}
{{end}}
