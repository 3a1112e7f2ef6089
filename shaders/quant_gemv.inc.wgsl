{{define "quant_gemv"}}
{{- /* The GEMV of the grouped integer weights, int4 (matmul_int4_gemv) and
int8 (matmul_int8_gemv); see matmul_int4_gemv for the algorithm. A group
is one vec4<u32> of codes and one scale word; the kernel declares GV, the
vec4s of inputs a group holds (8 for int4, 4 for int8), and
fn expand(code: vec4<u32>, v: u32, sm: vec2<f32>) -> vec4<f32>, the
values of inputs 4v..4v+3 of the group (value = scale·q + min, the Go
reference's arithmetic). With Experts (the block template) block g.z is a
group of (row, slot) pairs that chose one expert, whose rows of the stacked
weight it reads: the experts' products of a mixture of experts. */}}
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, groups: u32, tpc: u32, maxm: u32, cpi: u32, wg: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> scales: array<u32>;
{{bindings . 6}}{{template "fusion" .}}{{template "xload" .}}{{template "block_decls" .}}

// TPC is the number of invocations per output column, a power of two ≤ WG;
// MAXM the rows of a block; CPI the columns of an invocation (TPC = 1
// only). Params repeat them, so that call sites of different constants
// never share a cached pipeline.
override TPC: u32 = 16u;
override MAXM: u32 = 1u;
override CPI: u32 = 1u;
override WG: u32 = 256u; // invocations per workgroup
const ACC = MAXM * CPI;
const GK = 4u * GV; // inputs a group
const WN = GV * CPI;

const NC = WG / TPC;

{{template "gemv_head" .}}
    let j = ((g.x + g.y * groups.x) * NC + t / TPC) * CPI; // first column within the part
    let full = p.k / GK; // whole groups; a short one may follow
{{template "norm" .}}

    var acc: array<f32, ACC>; // acc[m * CPI + c]: row m of the block, column j + c
    var w: array<vec4<f32>, WN>; // the expanded group of column j + c: w[c * GV + v]
    if (j < p.nrows{{template "live" .}}) {
        for (var gi = lane; gi < full; gi += TPC) {
            for (var c = 0u; c < CPI; c++) {
                var code = vec4<u32>(0u);
                var sm = vec2<f32>(0.0);
                if (j + c < p.nrows) {
                    code = codes[({{template "wrow" .}} + c) * p.groups + gi];
                    sm = unpack2x16float(scales[({{template "wrow" .}} + c) * p.groups + gi]);
                }
                for (var v = 0u; v < GV; v++) {
                    w[c * GV + v] = expand(code, v, sm);
                }
            }
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    let xr = {{template "xrow" .}} + gi * GV;
                    for (var v = 0u; v < GV; v++) {
                        let xv = xload(xr + v, gi * GV + v, m);
                        for (var c = 0u; c < CPI; c++) {
                            acc[m * CPI + c] += dot(w[c * GV + v], xv);
                        }
                    }
                }
            }
        }
        if (full < p.groups && lane == full % TPC) {
            // The short last group: (k % GK) / 4 vec4s of inputs.
            var code: array<vec4<u32>, CPI>;
            var sm: array<vec2<f32>, CPI>;
            for (var c = 0u; c < CPI; c++) {
                if (j + c < p.nrows) {
                    code[c] = codes[({{template "wrow" .}} + c) * p.groups + full];
                    sm[c] = unpack2x16float(scales[({{template "wrow" .}} + c) * p.groups + full]);
                }
            }
            for (var v = 0u; v < (p.k % GK) / 4u; v++) {
                for (var m = 0u; m < MAXM; m++) {
                    if (m < rows) {
                        let xv = xload({{template "xrow" .}} + full * GV + v, full * GV + v, m);
                        for (var c = 0u; c < CPI; c++) {
                            acc[m * CPI + c] += dot(expand(code[c], v, sm[c]), xv);
                        }
                    }
                }
            }
        }
    }
{{template "norm_end" .}}
    if (TPC == 1u) {
        for (var m = 0u; m < rows; m++) {
{{- if .Pairs}}
            for (var c = 0u; c + 1u < CPI; c += 2u) {
                if (j + c + 1u < p.nrows) {
                    emit_pair({{template "orow" .}}, p.col0 + j + c, acc[m * CPI + c] * rinv[m], acc[m * CPI + c + 1u] * rinv[m]);
                }
            }
{{- else}}
            for (var c = 0u; c < CPI; c++) {
                if (j + c < p.nrows) {
                    emit({{template "orow" .}}, p.col0 + j + c, acc[m * CPI + c] * rinv[m]);
                }
            }
{{- end}}
        }
        return;
    }
{{template "sum_tree" .}}
}
{{end}}
