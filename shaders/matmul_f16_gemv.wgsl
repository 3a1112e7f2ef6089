// matmul_f16_gemv: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of an f16 weight and a block of up to MAXM rows r of x (block
// g.z), as matmul_gemv does for f32 weights, reading half the bytes.
//
// The weight is halves packed two per u32, the lower index in the low half;
// with k % 4 == 0 (required, else matmul_f16_gemm) a row is k / 4 vec2<u32>
// chunks of four values, which unpack2x16float expands exactly (WGSL here
// has no f16 type). The TPC invocations of a column take chunks lane,
// lane + TPC, ...; partial sums per row of the block are added in a tree in
// workgroup memory, or not at all with TPC = 1 (CPU adapters).
// Twin: runtime/cpu MatMulQ (summed in another order).
// With Experts (fusion.inc.wgsl's block template) block g.z is instead a
// group of (row, slot) pairs that chose one expert, whose rows of the
// stacked weight it reads: the experts' products of a mixture of experts.
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, tpc: u32, maxm: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> w: array<vec2<u32>>;
{{bindings . 5}}{{template "fusion" .}}{{template "xload" .}}{{template "block_decls" .}}

override TPC: u32 = 16u;
override MAXM: u32 = 1u;

const WG = 256u;
const NC = WG / TPC;

fn half4(v: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y));
}

{{template "gemv_head" .}}
    let j = (g.x + g.y * groups.x) * NC + t / TPC;
{{template "norm" .}}
    var acc: array<f32, MAXM>;
    if (j < p.nrows{{template "live" .}}) {
        let wrow = {{template "wrow" .}} * k4;
        var i = lane;
        for (; i + TPC < k4; i += 2u * TPC) {
            let w0 = half4(w[wrow + i]);
            let w1 = half4(w[wrow + i + TPC]);
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    let xr = {{template "xrow" .}} + i;
                    acc[m] += dot(w0, xload(xr, i, m)) + dot(w1, xload(xr + TPC, i + TPC, m));
                }
            }
        }
        for (; i < k4; i += TPC) {
            let w0 = half4(w[wrow + i]);
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    acc[m] += dot(w0, xload({{template "xrow" .}} + i, i, m));
                }
            }
        }
    }

{{template "gemv_end" .}}
}
