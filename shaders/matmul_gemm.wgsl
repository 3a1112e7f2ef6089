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
{{bindings . 5}}
// TM is the rows of the register block (Params.tm repeats it so that call
// sites with different TM never share a cached pipeline).
override TM: u32 = 4u;
const BK = 16u;

fn load_w(k0: u32, c0: u32, t: u32, wb: u32) {
    for (var e = t; e < BN * BK; e += 256u) {
        let c = c0 + e / BK;
        let k = k0 + e % BK;
        var v = 0.0;
        if (c < p.nrows && k < p.k) { v = w[(wb + c) * p.k + k]; }
        ws[(e % BK) * WS + e / BK] = v;
    }
}
{{template "gemm" .}}