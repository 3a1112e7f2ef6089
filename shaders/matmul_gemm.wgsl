// matmul_gemm: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of one
// weight part and the first min(cap, step.rows) rows r of x: the prompt
// case, where enough rows share each weight for the arithmetic to matter.
//
// Algorithm: the classic tiled GEMM. A workgroup of 16×16 invocations
// computes a BM×BN = (16·TM)×64 tile of dst. It walks k in steps of BK = 16:
// all invocations copy a BM×BK tile of x and a BN×BK tile of w into
// workgroup memory (zeros outside the matrices, so that any M, K, N work),
// then each invocation adds the products of its TM×4 register block: rows
// ty + 16·i and columns tx + 16·c, strided so that neighbouring invocations
// read neighbouring words of the tiles and write neighbouring words of dst.
// Every output is summed over k in order, like the twin.
//
// Loads are scalar, so k need not be a multiple of 4. Workgroup memory is
// BK·(BM+1) + BK·(BN+1) floats (8.3 KiB at TM = 4); the +1 pads the tiles,
// stored transposed, against bank conflicts. Twin: runtime/cpu MatMul.
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, tm: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<f32>;

// TM is the rows of the register block (Params.tm repeats it so that call
// sites with different TM never share a cached pipeline).
override TM: u32 = 4u;

const BM = 16u * TM;
const BN = 64u;
const BK = 16u;
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
        for (var e = t; e < BN * BK; e += 256u) {
            let c = c0 + e / BK;
            let k = k0 + e % BK;
            var v = 0.0;
            if (c < p.nrows && k < p.k) { v = w[c * p.k + k]; }
            ws[(e % BK) * WS + e / BK] = v;
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
