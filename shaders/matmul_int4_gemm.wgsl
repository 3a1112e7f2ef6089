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
// Twin: runtime/cpu MatMulQ (summed in the same order within each output:
// k ascending).
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, groups: u32, tm: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> codes: array<u32>;
@group(0) @binding(5) var<storage, read> scales: array<u32>;

// TM is the rows of the register block (Params.tm repeats it so that call
// sites with different TM never share a cached pipeline).
override TM: u32 = 4u;

const BM = 16u * TM;
const BN = 64u;
const BK = 32u;
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
    for (var gi = 0u; gi < p.groups; gi++) {
        let k0 = gi * BK;
        for (var e = t; e < BM * BK; e += 256u) {
            let r = r0 + e / BK;
            let k = k0 + e % BK;
            var v = 0.0;
            if (r < rows && k < p.k) { v = x[r * p.k + k]; }
            xs[(e % BK) * XS + e / BK] = v;
        }
        {
            let c = t / 4u;
            let wi = t % 4u;
            let col = c0 + c;
            var word = 0u;
            var sm = vec2<f32>(0.0, 0.0);
            if (col < p.nrows) {
                word = codes[(col * p.groups + gi) * 4u + wi];
                sm = unpack2x16float(scales[col * p.groups + gi]);
            }
            for (var i = 0u; i < 8u; i++) {
                ws[(wi * 8u + i) * WS + c] = sm.x * f32((word >> (4u * i)) & 15u) + sm.y;
            }
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
