// matmul_int4_gemv: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of an int4 weight (models/dtype Int4) and a block of up to MAXM
// rows r of x (block g.z: rows g.z·MAXM ..., of the first min(cap,
// step.rows)). The decode case: the weight is read once per step, 5 bits a
// value instead of 32, and the kernel is bound by memory bandwidth.
//
// The weight is two arrays: codes, one vec4<u32> (32 nibbles) per group of
// 32 inputs, and scales, one u32 per group holding the f16 scale (low half)
// and min (high half). Word w of a group holds inputs 8w..8w+7, input 8w+i
// in bits 4i..4i+3. Row j's groups are j·groups ... j·groups + groups − 1.
//
// Algorithm (as matmul_gemv): a workgroup of WG invocations computes
// NC = WG / TPC columns (CPI times that with TPC = 1); the TPC invocations of a column take its groups
// lane, lane + TPC, ... (neighbouring invocations read neighbouring 16-byte
// code vectors and 4-byte scale words: coalesced). For each group an
// invocation loads the codes and the scale word once, expands the 32 values
// (value = scale·q + min, exactly the Go reference's arithmetic: the
// product is exact, so a fused multiply-add rounds the same) and adds their
// products with the matching x values to one partial sum per row of the
// block; the partial sums of a column are then added in a tree in workgroup
// memory. With TPC = 1 (CPU adapters) each invocation owns CPI adjacent
// columns and there is no barrier: there, where invocations are the SIMD
// lanes of a thread, every x load is a gather across lanes and costs more
// than the expansion, so the x values of a group are loaded once for CPI
// columns. (On GPUs CPI is 1: x is cached and the columns of a workgroup
// should stay many.)
//
// k need not be a multiple of 32: the last, short group of a row reads only
// the x values below k. It must be a multiple of 4 (x is read as vec4);
// other widths go to matmul_int4_gemm. Twin: runtime/cpu MatMulQ (summed in
// another order).
//
// Composed with a shaders.Fusion (fusion.inc.wgsl) it also normalises the
// input rows (the norm's weights on each x load, the row's 1/rms on each
// sum) and stores through the fusion's epilogue; with Pairs, two adjacent
// columns reach emit_pair together: from one invocation with CPI ≥ 2, or
// through workgroup memory after the tree sum (NC ≥ 2 columns a workgroup).
// With Experts (fusion.inc.wgsl's block template) block g.z is instead a
// group of (row, slot) pairs that chose one expert, whose rows of the
// stacked weight it reads: the experts' products of a mixture of experts.
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
const WN = 8u * CPI;

const NC = WG / TPC;

// partial[m * WG + t] is invocation t's sum for row m of the block.
const PARTIALS = WG * MAXM;
var<workgroup> partial: array<f32, PARTIALS>;

const LO = vec4<u32>(0u, 4u, 8u, 12u);
const HI = vec4<u32>(16u, 20u, 24u, 28u);

// dq expands four nibbles of word (at shifts sh) with scale s and min mn.
fn dq(word: u32, sh: vec4<u32>, s: f32, mn: f32) -> vec4<f32> {
    return s * vec4<f32>((vec4<u32>(word) >> sh) & vec4<u32>(15u)) + mn;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32,
        @builtin(workgroup_id) g: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    let k4 = p.k / 4u;
{{template "block" .}}
    let lane = t % TPC;
    let j = ((g.x + g.y * groups.x) * NC + t / TPC) * CPI; // first column within the part
    let full = p.k / 32u; // whole groups; a short one may follow
{{template "norm" .}}

    var acc: array<f32, ACC>; // acc[m * CPI + c]: row r0 + m, column j + c
    var w: array<vec4<f32>, WN>; // the expanded group of column j + c: w[c * 8 + v]
    if (j < p.nrows{{template "live" .}}) {
        for (var gi = lane; gi < full; gi += TPC) {
            for (var c = 0u; c < CPI; c++) {
                var code = vec4<u32>(0u);
                var sm = vec2<f32>(0.0);
                if (j + c < p.nrows) {
                    code = codes[({{template "wrow" .}} + c) * p.groups + gi];
                    sm = unpack2x16float(scales[({{template "wrow" .}} + c) * p.groups + gi]);
                }
                w[c * 8u] = dq(code.x, LO, sm.x, sm.y);
                w[c * 8u + 1u] = dq(code.x, HI, sm.x, sm.y);
                w[c * 8u + 2u] = dq(code.y, LO, sm.x, sm.y);
                w[c * 8u + 3u] = dq(code.y, HI, sm.x, sm.y);
                w[c * 8u + 4u] = dq(code.z, LO, sm.x, sm.y);
                w[c * 8u + 5u] = dq(code.z, HI, sm.x, sm.y);
                w[c * 8u + 6u] = dq(code.w, LO, sm.x, sm.y);
                w[c * 8u + 7u] = dq(code.w, HI, sm.x, sm.y);
            }
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    let xr = {{template "xrow" .}} + gi * 8u;
                    for (var v = 0u; v < 8u; v++) {
                        let xv = xload(xr + v, gi * 8u + v, m);
                        for (var c = 0u; c < CPI; c++) {
                            acc[m * CPI + c] += dot(w[c * 8u + v], xv);
                        }
                    }
                }
            }
        }
        if (full < p.groups && lane == full % TPC) {
            // The short last group: (k % 32) / 4 vec4s of inputs.
            var code: array<vec4<u32>, CPI>;
            var sm: array<vec2<f32>, CPI>;
            for (var c = 0u; c < CPI; c++) {
                if (j + c < p.nrows) {
                    code[c] = codes[({{template "wrow" .}} + c) * p.groups + full];
                    sm[c] = unpack2x16float(scales[({{template "wrow" .}} + c) * p.groups + full]);
                }
            }
            for (var v = 0u; v < (p.k % 32u) / 4u; v++) {
                var sh = LO;
                if (v % 2u == 1u) { sh = HI; }
                for (var m = 0u; m < MAXM; m++) {
                    if (m < rows) {
                        let xv = xload({{template "xrow" .}} + full * 8u + v, full * 8u + v, m);
                        for (var c = 0u; c < CPI; c++) {
                            acc[m * CPI + c] += dot(dq(code[c][v / 2u], sh, sm[c].x, sm[c].y), xv);
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
