{{define "quant_gemv"}}
{{- /* The GEMV of the grouped integer weights (matmul_quant_gemv, one
kernel for every format of quant_formats.inc.wgsl; see it for the
algorithm). A group is loaded once (the format's grp: its code words and
scales), expanded four inputs at a time (codes4) and multiplied with x for
every row of the block: per group and row, Σ q·x of each half (one unless
HALVES) and, with MINS, Σ x, then scale·Σ q·x + min·Σ x (grp_sum). With
Experts (the block template) block g.z is a group of (row, slot) pairs
that chose one expert, whose rows of the stacked weight it reads: the
experts' products of a mixture of experts. */}}
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, groups: u32, tpc: u32, maxm: u32, cpi: u32, wg: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
{{template "quant_format" .}}
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
const HV = GV / 2u; // the vec4s of a half group

// grp_sum is a group's share of a product: the scales s (grp) times its
// halves' Σ q·x (qa, qb: codes4's lanes, QS undoes their factors) and the
// mins times their Σ x (sa, sb). Without HALVES qb and sb are unused, and
// without MINS the mins.
fn grp_sum(s: vec4<f32>, qa: vec4<f32>, qb: vec4<f32>, sa: f32, sb: f32) -> f32 {
    var r = s.x * dot(qa, QS);
    if (HALVES) {
        r += s.y * dot(qb, QS);
    }
    if (MINS) {
        r += s.z * sa;
        if (HALVES) {
            r += s.w * sb;
        }
    }
    return r;
}

const NC = WG / TPC;

{{template "gemv_head" .}}
    let j = ((g.x + g.y * groups.x) * NC + t / TPC) * CPI; // first column within the part
    let full = p.k / GK; // whole groups; a short one may follow
{{template "norm" .}}
{{template "lora_h" .}}

    var acc: array<f32, ACC>; // acc[m * CPI + c]: row m of the block, column j + c
    if (j < p.nrows{{template "live" .}}) {
        for (var gi = lane; gi < full; gi += TPC) {
            var gw: array<Grp, CPI>;
            for (var c = 0u; c < CPI; c++) {
                if (j + c < p.nrows) {
                    gw[c] = grp({{template "wrow" .}} + c, gi);
                }
            }
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    let xr = {{template "xrow" .}} + gi * GV;
                    // qa[c], qb[c]: Σ codes4·x of column j + c over each half,
                    // per lane of the vec4; sa, sb: Σ x. Zeroed by assignment:
                    // naga gives a var declared in a loop its initial value
                    // only once.
                    var qa: array<vec4<f32>, CPI>;
                    var qb: array<vec4<f32>, CPI>;
                    var sa: vec4<f32>;
                    var sb: vec4<f32>;
                    sa = vec4<f32>(0.0);
                    sb = vec4<f32>(0.0);
                    for (var c = 0u; c < CPI; c++) {
                        qa[c] = vec4<f32>(0.0);
                        qb[c] = vec4<f32>(0.0);
                    }
                    for (var v = 0u; v < GV; v++) {
                        let xv = xload(xr + v, gi * GV + v, m);
                        if (HALVES && v >= HV) {
                            sb += xv;
                            for (var c = 0u; c < CPI; c++) {
                                qb[c] += codes4(gw[c], v) * xv;
                            }
                        } else {
                            sa += xv;
                            for (var c = 0u; c < CPI; c++) {
                                qa[c] += codes4(gw[c], v) * xv;
                            }
                        }
                    }
                    let ta = dot(sa, vec4<f32>(1.0));
                    let tb = dot(sb, vec4<f32>(1.0));
                    for (var c = 0u; c < CPI; c++) {
                        acc[m * CPI + c] += grp_sum(gw[c].s, qa[c], qb[c], ta, tb);
                    }
                }
            }
        }
        if (full < p.groups && lane == full % TPC) {
            // The short last group of int4 and int8 (block types are whole
            // groups): (k % GK) / 4 vec4s of inputs, in its first half.
            var gw: array<Grp, CPI>;
            for (var c = 0u; c < CPI; c++) {
                if (j + c < p.nrows) {
                    gw[c] = grp({{template "wrow" .}} + c, full);
                }
            }
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    var qa: array<vec4<f32>, CPI>;
                    var sa: vec4<f32>;
                    sa = vec4<f32>(0.0);
                    for (var c = 0u; c < CPI; c++) {
                        qa[c] = vec4<f32>(0.0);
                    }
                    for (var v = 0u; v < (p.k % GK) / 4u; v++) {
                        let xv = xload({{template "xrow" .}} + full * GV + v, full * GV + v, m);
                        sa += xv;
                        for (var c = 0u; c < CPI; c++) {
                            qa[c] += codes4(gw[c], v) * xv;
                        }
                    }
                    let ta = dot(sa, vec4<f32>(1.0));
                    for (var c = 0u; c < CPI; c++) {
                        acc[m * CPI + c] += grp_sum(gw[c].s, qa[c], vec4<f32>(0.0), ta, 0.0);
                    }
                }
            }
        }
    }
{{template "gemv_end" .}}
}
{{end}}
