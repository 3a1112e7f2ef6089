// matmul_f16_gemm: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of an f16 weight (halves packed two per u32, rows padded to an
// even length: row j starts at word j·((k + 1) / 2)) and the first
// min(cap, step.rows) rows r of x. The tiled GEMM of matmul_gemm: each
// 16-wide k step copies a BM×16 tile of x and expands a 64×16 tile of w
// (each word of w, two values, is unpacked once per step with
// unpack2x16float) into workgroup memory; zeros outside the matrices make
// any M, K and N work. Twin: runtime/cpu MatMulQ.
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, tm: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<u32>;

override TM: u32 = 4u;

const BM = 16u * TM;
const BN = 64u;
const BK = 16u;
const XS = BM + 1u;
const WS = BN + 1u;

const XSIZE = BK * XS;
const WSIZE = BK * WS;
var<workgroup> xs: array<f32, XSIZE>;
var<workgroup> ws: array<f32, WSIZE>;

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) t: u32,
        @builtin(workgroup_id) g: vec3<u32>) {
    let rows = min(p.cap, step.rows);
    let r0 = g.y * BM;
    let c0 = g.x * BN;
    let tx = lid.x;
    let ty = lid.y;
    let stride = (p.k + 1u) / 2u;

    var acc: array<vec4<f32>, TM>;
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        for (var e = t; e < BM * BK; e += 256u) {
            let r = r0 + e / BK;
            let k = k0 + e % BK;
            var v = 0.0;
            if (r < rows && k < p.k) { v = x[r * p.k + k]; }
            xs[(e % BK) * XS + e / BK] = v;
        }
        // 64 columns × 8 words of 2 halves: two words per invocation.
        for (var e = t; e < BN * BK / 2u; e += 256u) {
            let c = e / 8u;
            let wi = e % 8u;
            let col = c0 + c;
            let k = k0 + 2u * wi;
            var v = vec2<f32>(0.0, 0.0);
            if (col < p.nrows && k < p.k) {
                v = unpack2x16float(w[col * stride + k / 2u]);
                if (k + 1u >= p.k) { v.y = 0.0; }
            }
            ws[(2u * wi) * WS + c] = v.x;
            ws[(2u * wi + 1u) * WS + c] = v.y;
        }
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
