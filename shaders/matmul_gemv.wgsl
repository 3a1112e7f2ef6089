// matmul_gemv: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of one
// weight part and a block of up to MAXM rows r of x (block g.z: rows
// g.z·MAXM ..., of the first min(cap, step.rows)): the decode case (one
// token, or a few), where the whole of w is read once per step and the
// kernel is bound by memory bandwidth, not arithmetic.
//
// Algorithm: a workgroup of 256 invocations computes NC = 256 / TPC output
// columns; the TPC invocations of one column split its k inputs into vec4
// chunks, invocation `lane` taking chunks lane, lane + TPC, ... (so that on a
// GPU neighbouring invocations read neighbouring 16 bytes of w: coalesced),
// four loads in flight per iteration. Each keeps one partial sum per row of
// the block (every chunk of w is loaded once and used for all of them), and
// the TPC partial sums of a column are then added in a tree in workgroup
// memory. With TPC = 1 (for CPU adapters, whose invocations are SIMD lanes
// of one thread: a lane streaming a whole row is what they do best, and
// barriers are costly) each invocation owns a column and nothing is shared.
//
// Needs k % 4 == 0 (rows of w and x then start on vec4 boundaries); other
// widths go to matmul_gemm. Twin: runtime/cpu MatMul (summed in another
// order: chunk-strided partial sums, then a tree).
//
// Composed with a shaders.Fusion as matmul_int4_gemv is; with Pairs (a
// GLU's gate and up) a column's neighbour is in the same workgroup, and
// its sum comes through workgroup memory.
// With Experts (fusion.inc.wgsl's block template) block g.z is instead a
// group of (row, slot) pairs that chose one expert, whose rows of the
// stacked weight it reads: the experts' products of a mixture of experts.
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, tpc: u32, maxm: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> w: array<vec4<f32>>;
{{bindings . 5}}{{template "fusion" .}}{{template "xload" .}}{{template "block_decls" .}}

// TPC is the number of invocations per output column, a power of two ≤ WG;
// MAXM the rows of a block. Params repeat them, so that call sites of
// different constants never share a cached pipeline.
override TPC: u32 = 64u;
override MAXM: u32 = 1u;

const WG = 256u;
const NC = WG / TPC;

{{template "gemv_head" .}}
    let j = (g.x + g.y * groups.x) * NC + t / TPC; // column within the part
{{template "norm" .}}
    var acc: array<f32, MAXM>;
    if (j < p.nrows{{template "live" .}}) {
        let wrow = {{template "wrow" .}} * k4;
        var i = lane;
        for (; i + 3u * TPC < k4; i += 4u * TPC) {
            let w0 = w[wrow + i];
            let w1 = w[wrow + i + TPC];
            let w2 = w[wrow + i + 2u * TPC];
            let w3 = w[wrow + i + 3u * TPC];
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    let xr = {{template "xrow" .}} + i;
                    acc[m] += dot(w0, xload(xr, i, m)) + dot(w1, xload(xr + TPC, i + TPC, m)) + dot(w2, xload(xr + 2u * TPC, i + 2u * TPC, m)) + dot(w3, xload(xr + 3u * TPC, i + 3u * TPC, m));
                }
            }
        }
        for (; i < k4; i += TPC) {
            let w0 = w[wrow + i];
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    acc[m] += dot(w0, xload({{template "xrow" .}} + i, i, m));
                }
            }
        }
    }

{{template "gemv_end" .}}
}
