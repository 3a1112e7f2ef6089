{{define "quant_gemv"}}
{{- /* The GEMV of the grouped integer weights, int4 (matmul_int4_gemv) and
int8 (matmul_int8_gemv); see matmul_int4_gemv for the algorithm. A group
is one vec4<u32> of codes and one scale word; the kernel declares GV, the
vec4s of inputs a group holds (8 for int4, 4 for int8),
fn codes4(code: vec4<u32>, v: u32) -> vec4<f32>, the codes q of inputs
4v..4v+3 of the group, lane i possibly times a power of two that the
constant vec4 QS divides out again (value = scale·q + min; the sum of a
group is scale·Σ q·x + min·Σ x). With Experts (the block template) block g.z is a
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

const NC = WG / TPC;

{{template "gemv_head" .}}
    let j = ((g.x + g.y * groups.x) * NC + t / TPC) * CPI; // first column within the part
    let full = p.k / GK; // whole groups; a short one may follow
{{template "norm" .}}
{{template "lora_h" .}}

    var acc: array<f32, ACC>; // acc[m * CPI + c]: row m of the block, column j + c
    if (j < p.nrows{{template "live" .}}) {
        for (var gi = lane; gi < full; gi += TPC) {
            var code: array<vec4<u32>, CPI>;
            var sm: array<vec2<f32>, CPI>;
            for (var c = 0u; c < CPI; c++) {
                if (j + c < p.nrows) {
                    code[c] = codes[({{template "wrow" .}} + c) * p.groups + gi];
                    sm[c] = unpack2x16float(scales[({{template "wrow" .}} + c) * p.groups + gi]);
                }
            }
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    let xr = {{template "xrow" .}} + gi * GV;
                    // q[c]: Σ codes4·x of column j + c, per lane of the vec4; sx:
                    // Σ x. Zeroed by assignment: naga gives a var declared in a
                    // loop its initial value only once.
                    var q: array<vec4<f32>, CPI>;
                    var sx: vec4<f32>;
                    sx = vec4<f32>(0.0);
                    for (var c = 0u; c < CPI; c++) {
                        q[c] = vec4<f32>(0.0);
                    }
                    for (var v = 0u; v < GV; v++) {
                        let xv = xload(xr + v, gi * GV + v, m);
                        sx += xv;
                        for (var c = 0u; c < CPI; c++) {
                            q[c] += codes4(code[c], v) * xv;
                        }
                    }
                    let s = dot(sx, vec4<f32>(1.0));
                    for (var c = 0u; c < CPI; c++) {
                        acc[m * CPI + c] += sm[c].x * dot(q[c], QS) + sm[c].y * s;
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
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    var q: array<vec4<f32>, CPI>;
                    var sx: vec4<f32>;
                    sx = vec4<f32>(0.0);
                    for (var c = 0u; c < CPI; c++) {
                        q[c] = vec4<f32>(0.0);
                    }
                    for (var v = 0u; v < (p.k % GK) / 4u; v++) {
                        let xv = xload({{template "xrow" .}} + full * GV + v, full * GV + v, m);
                        sx += xv;
                        for (var c = 0u; c < CPI; c++) {
                            q[c] += codes4(code[c], v) * xv;
                        }
                    }
                    let s = dot(sx, vec4<f32>(1.0));
                    for (var c = 0u; c < CPI; c++) {
                        acc[m * CPI + c] += sm[c].x * dot(q[c], QS) + sm[c].y * s;
                    }
                }
            }
        }
    }
{{template "gemv_end" .}}
}
{{end}}
