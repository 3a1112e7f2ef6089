{{define "float_gemv"}}
{{- /* The GEMV of f32 and f16 weights (matmul_gemv, matmul_f16_gemv; see
matmul_gemv for the algorithm). The kernel declares WT, the element of w
(four values), fn wload(i: u32) -> WV (vec4<f32>, or vec4<f16> with F16),
which expands element i, U, the loads in flight an iteration, and override
TPC. With F16 (matmul_f16_gemv) x is rounded to f16 (clamped to its
range) and each dot of four is in f16, the sums in f32. */}}
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, tpc: u32, maxm: u32, cpi: u32, wg: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> w: array<WT>;
{{bindings . 5}}{{template "fusion" .}}{{template "xload" .}}{{template "block_decls" .}}

// MAXM is the rows of a block, CPI the columns of an invocation (TPC = 1
// only: on CPU adapters, where every x load is a gather across the SIMD
// lanes, an x value is loaded once for CPI columns), WG the invocations of
// a workgroup (TPC, the kernel's, the invocations per output column, a
// power of two ≤ WG). Params repeat them, so that call sites of different
// constants never share a cached pipeline.
// xval is x's vec4 as the products take it.
{{- if .F16}}
alias WV = vec4<f16>;
fn xval(v: vec4<f32>) -> WV { return WV(clamp(v, vec4<f32>(-65504.0), vec4<f32>(65504.0))); }
{{- else}}
alias WV = vec4<f32>;
fn xval(v: vec4<f32>) -> WV { return v; }
{{- end}}

override MAXM: u32 = 1u;
override CPI: u32 = 1u;
override WG: u32 = 256u;
const NC = WG / TPC;
const ACC = MAXM * CPI;
const UC = U * CPI;

{{template "gemv_head" .}}
    let j = ((g.x + g.y * groups.x) * NC + t / TPC) * CPI; // first column within the part
{{template "norm" .}}
{{template "lora_h" .}}
    var acc: array<f32, ACC>; // acc[m * CPI + c]: row m of the block, column j + c
    if (j < p.nrows{{template "live" .}}) {
        var i = lane;
        for (; i + (U - 1u) * TPC < k4; i += U * TPC) {
            var wv: array<WV, UC>; // wv[c * U + u]: column j + c
            for (var c = 0u; c < CPI; c++) {
                let wrow = ({{template "wrow" .}} + min(c, p.nrows - 1u - j)) * k4;
                for (var u = 0u; u < U; u++) {
                    wv[c * U + u] = wload(wrow + i + u * TPC);
                }
            }
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    let xr = {{template "xrow" .}} + i;
                    for (var u = 0u; u < U; u++) {
                        let xv = xval(xload(xr + u * TPC, i + u * TPC, m));
                        for (var c = 0u; c < CPI; c++) {
                            acc[m * CPI + c] += f32(dot(wv[c * U + u], xv));
                        }
                    }
                }
            }
        }
        for (; i < k4; i += TPC) {
            var w0: array<WV, CPI>;
            for (var c = 0u; c < CPI; c++) {
                w0[c] = wload(({{template "wrow" .}} + min(c, p.nrows - 1u - j)) * k4 + i);
            }
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    let xv = xval(xload({{template "xrow" .}} + i, i, m));
                    for (var c = 0u; c < CPI; c++) {
                        acc[m * CPI + c] += f32(dot(w0[c], xv));
                    }
                }
            }
        }
    }
{{template "gemv_end" .}}
}
{{end}}
