{{define "float_gemv"}}
{{- /* The GEMV of f32 and f16 weights (matmul_gemv, matmul_f16_gemv; see
matmul_gemv for the algorithm). The kernel declares WT, the element of w
(four values), fn wload(i: u32) -> vec4<f32>, which expands element i, U,
the loads in flight an iteration, and override TPC. */}}
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, tpc: u32, maxm: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> w: array<WT>;
{{bindings . 5}}{{template "fusion" .}}{{template "xload" .}}{{template "block_decls" .}}

// MAXM is the rows of a block (TPC, the kernel's, the invocations per
// output column, a power of two ≤ WG). Params repeat them, so that call
// sites of different constants never share a cached pipeline.
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
        for (; i + (U - 1u) * TPC < k4; i += U * TPC) {
            var wv: array<vec4<f32>, U>;
            for (var u = 0u; u < U; u++) {
                wv[u] = wload(wrow + i + u * TPC);
            }
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    let xr = {{template "xrow" .}} + i;
                    var s = dot(wv[0], xload(xr, i, m));
                    for (var u = 1u; u < U; u++) {
                        s += dot(wv[u], xload(xr + u * TPC, i + u * TPC, m));
                    }
                    acc[m] += s;
                }
            }
        }
        for (; i < k4; i += TPC) {
            let w0 = wload(wrow + i);
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    acc[m] += dot(w0, xload({{template "xrow" .}} + i, i, m));
                }
            }
        }
    }

{{template "gemv_end" .}}
}
{{end}}
