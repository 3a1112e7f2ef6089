{{/* The prologue and epilogue of a fused matrix product (shaders.Fusion).
A kernel that composes with them declares its own bindings, then
{{template "fusion" .}} with the first free binding in .First: here come the
Fuse uniform, the extra outputs, the bias and the norm's weights. The kernel
stores column c of row r (a row of its weight, across its parts) through
emit(r, c, v) or, for two adjacent columns, emit_pair(r, c, v0, v1) (c even);
a GLU needs the second. With LoRA these add the adapters' terms; the GEMVs
fold the terms into their sums (lora_fold) and call store and store_pair,
which do not. */}}
{{define "act"}}
// act is SiLU (act = 0), GELU's tanh approximation (act = 1) or the
// sigmoid (act = 5, Qwen3.5's attention gate). Past |t| = 10, tanh(t) is
// ±1 in f32; clamping keeps backends whose tanh goes through exp from
// overflowing to NaN. Twin: runtime/cpu Act.
fn act(kind: u32, g: f32) -> f32 {
    if (kind == 5u) {
        return 1.0 / (1.0 + exp(-g));
    }
    if (kind == 1u) {
        let t = clamp(0.7978845608028654 * (g + 0.044715 * g * g * g), -10.0, 10.0);
        return 0.5 * g * (1.0 + tanh(t));
    }
    return g * (1.0 / (1.0 + exp(-g)));
}
{{end}}

{{define "fusion_decls"}}
{{- if .Fused}}
// n0, n1, n2: the widths of dst, out1 and out2 (with Pairs: of gate and up
// each); eps: the norm's; act: the GLU's activation.
// With Experts: k, the slots of a row; e0 and ne, the experts of this
// weight part; slots, whether x has a row per pair; ord and tab, where the
// routing's pair order and block table start in routes.
// With LoRA: lr, h's stride (the largest Σ rank of a slot); ln, the slots;
// lw, the weight parts (the slot table's entries a slot).
struct Fuse { n0: u32, n1: u32, n2: u32, eps: f32, act: u32, k: u32, e0: u32, ne: u32, slots: u32, ord: u32, tab: u32, lr: u32, ln: u32, lw: u32 }
{{- if .LoRA}}
struct LoRARow { slot: i32, scale: f32 }
{{- end}}
{{end -}}
{{end}}

{{define "lora_emit"}}
{{- if .Shrink}}
// lwh holds a GEMV block's h (lora_h): MAXM·fz.lr values, at most LWH,
// as quads of four columns (fz.lr and a part's first column are
// multiples of 4), so that the fold reads a vec4 at a time.
const LWH = 1024u;
const LWH4 = LWH / 4u;
var<workgroup> lwh: array<vec4<f32>, LWH4>;

// lora_x is x's vec4 at as the product multiplies it, before 1/rms: the
// norm's weights on it with Norm (vec4 i of the row), xn as it is with
// Prescaled.
fn lora_x(at: u32, i: u32) -> vec4<f32> {
{{- if and .Norm (not .Prescaled)}}
    return x[at] * nw[i];
{{- else}}
    return x[at];
{{- end}}
}
{{- end}}
{{- template "lora_values" (values . "lbt")}}
{{- if .Shrink}}{{template "lora_values" (values . "la")}}{{end}}
// lora_part is the weight part of column c of the fused weight and the
// column within it: by the split (Outs) or the alternation (Pairs).
fn lora_part(c: u32) -> vec2<u32> {
{{- if .Pairs}}
    return vec2<u32>(c % 2u, c / 2u);
{{- else if gt .Outs 1}}
    if (c < fz.n0) { return vec2<u32>(0u, c); }
{{- if gt .Outs 2}}
    if (c >= fz.n0 + fz.n1) { return vec2<u32>(2u, c - fz.n0 - fz.n1); }
{{- end}}
    return vec2<u32>(1u, c - fz.n0);
{{- else}}
    return vec2<u32>(0u, c);
{{- end}}
}

// lora_slot is the slot of row r's adapter, -1 for a row without one or
// of a slot out of range.
fn lora_slot(r: u32) -> i32 {
    let s = lrows[r].slot;
    if (s < 0 || u32(s) >= fz.ln) { return -1; }
    return s;
}

// lora_share is the share of lanes first, first + stride, ... of the
// adapter term of column c of row r (row m of a GEMV's block): lrows[r].scale · scale · h[r, hcol
// ...] · B[col, :] over the padded rank of the row's slot's adapter of c's
// weight part (lora_part), as quads, the quads t of the rank with t %
// stride = first. lbt starts with the slot table, an entry per (slot,
// part): off (lbt's element of the part's B row 0), q (quads a row: the
// rank padded to a multiple of 4), scale (f32 bits) and hcol (the part's
// first column in h, a multiple of 4); the rows of B (zero past the rank)
// follow, a quad an element, f32 or halves (lora_values). So a column
// reads its row of B and the row's h as a GEMV reads its weight row and x.
fn lora_share(r: u32, m: u32, c: u32, first: u32, stride: u32) -> f32 {
    let s = lora_slot(r);
    if (s < 0) { return 0.0; }
    let pc = lora_part(c);
    let sl = lbt_entry(u32(s) * fz.lw + pc.x);
    let q = min(sl.y, fz.lr / 4u);
    let b0 = sl.x + pc.y * q;
    var sum = vec4<f32>(0.0);
{{- if .Shrink}}
    let h0 = (m * fz.lr + sl.w) / 4u; // block row m's h, in workgroup memory (lora_h)
    for (var t = first; t < q; t += stride) {
        sum += lbt_quad(b0 + t) * lwh[h0 + t];
    }
{{- else}}
    let h0 = (r * fz.lr + sl.w) / 4u;
    for (var t = first; t < q; t += stride) {
        sum += lbt_quad(b0 + t) * lh[h0 + t];
    }
{{- end}}
    return lrows[r].scale * bitcast<f32>(sl.z) * dot(sum, vec4<f32>(1.0));
}

// lora_term is the adapter term of column c of row r, whole: what the
// epilogues of the GEMMs and fuse_epilogue add a column at a time. The
// GEMVs fold the terms into their sums instead (lora_fold).
fn lora_term(r: u32, c: u32) -> f32 {
    return lora_share(r, 0u, c, 0u, 1u);
}
{{end}}

{{define "fusion"}}
{{- if .LoRA}}{{template "lora_emit" .}}{{end}}
{{if .GLU}}{{template "act"}}{{else}}
// store stores v, the value of column c of row r with its adapters' terms
// (if any) in.
fn store(r: u32, c: u32, v: f32) {
{{- if .Fused}}
    var y = v;
{{- if .Bias}}
    y += bias[c];
{{- end}}
{{- if .Pairs}}
    if (c % 2u == 0u) { dst[r * fz.n0 + c / 2u] = y; } else { out1[r * fz.n1 + c / 2u] = y; }
{{- else if gt .Outs 1}}
    if (c < fz.n0) {
        dst[r * fz.n0 + c] = y;
    } else if (c < fz.n0 + fz.n1) {
        out1[r * fz.n1 + c - fz.n0] = y;
    }{{if gt .Outs 2}} else {
        out2[r * fz.n2 + c - fz.n0 - fz.n1] = y;
    }{{end}}
{{- else if .Next}}
    let sum = dst[r * fz.n0 + c] + y;
    dst[r * fz.n0 + c] = sum;
    xn[r * fz.n0 + c] = sum * nwn[c];
{{- else if .Add}}
    dst[r * fz.n0 + c] += y;
{{- else}}
    dst[r * fz.n0 + c] = y;
{{- end}}
{{- else}}
    dst[r * p.n + c] = v;
{{- end}}
}

// emit stores the product v of column c of row r, adding its adapters'
// terms.
fn emit(r: u32, c: u32, v: f32) {
    store(r, c, v{{if .LoRA}} + lora_term(r, c){{end}});
}
{{end}}
// store_pair stores columns c and c + 1 of row r (c even), their
// adapters' terms in: with a GLU, the one output act(gate)·up of pair
// c / 2. emit_pair is it for the products, adding the terms.
fn store_pair(r: u32, c: u32, y0: f32, y1: f32) {
{{- if .GLU}}
    dst[r * fz.n0 + c / 2u] = act(fz.act, y0) * y1;
{{- else}}
    store(r, c, y0);
    store(r, c + 1u, y1);
{{- end}}
}

fn emit_pair(r: u32, c: u32, v0: f32, v1: f32) {
{{- if .LoRA}}
    store_pair(r, c, v0 + lora_term(r, c), v1 + lora_term(r, c + 1u));
{{- else}}
    store_pair(r, c, v0, v1);
{{- end}}
}
{{end}}

{{define "norm"}}
{{- /* The RMSNorm prologue: rinv[m], the 1/rms of row r0 + m of the block;
without Norm, ones. The WG invocations of the workgroup add up the squares
of all its rows together (two barriers), reading x or, Prescaled, xraw;
with Subgroups each subgroup adds its own first (subgroupAdd), so the
total adds num_subgroups values, not WG.
With TPC = 1 (CPU adapters, where a barrier costs more than the kernel's
own loads and every invocation reads whole rows of x) and not Prescaled
there is no prologue: xload adds up each row's squares as the product
reads it, and norm_end turns them into rinv. Needs x (vec4s), t, TPC, WG,
MAXM, rows, xbase, k4, partial. */}}
    var rinv: array<f32, MAXM>;
    for (var m = 0u; m < MAXM; m++) {
        rinv[m] = 1.0;
    }
{{- if .Norm}}
    if (TPC > 1u || PRESCALED) {
        for (var m = 0u; m < MAXM; m++) {
            var ss = 0.0;
            if (m < rows) {
                for (var i = t; i < k4; i += WG) {
                    let v = {{if .Prescaled}}xraw{{else}}x{{end}}[{{template "xrow" .}} + i];
                    ss += dot(v, v);
                }
            }
{{- if .Subgroups}}
            // A subgroup's sum in the slot of its subgroup_id: the total
            // below adds num_subgroups values, not WG.
            let sub = subgroupAdd(ss);
            if (sg_rank == 0u) { partial[m * WG + sg_id] = sub; }
{{- else}}
            partial[m * WG + t] = ss;
{{- end}}
        }
        workgroupBarrier();
        if (t < MAXM) {
            var total = 0.0;
            for (var i = 0u; i < {{if .Subgroups}}sg_n{{else}}WG{{end}}; i++) {
                total += partial[t * WG + i];
            }
            norm_total[t] = total;
        }
        workgroupBarrier();
        for (var m = 0u; m < MAXM; m++) {
            rinv[m] = 1.0 / sqrt(norm_total[m] / f32(p.k) + fz.eps);
        }
    }
{{- end}}
{{end}}

{{define "norm_end"}}
{{- if and .Norm (not .Prescaled)}}
    if (TPC == 1u) {
        for (var m = 0u; m < MAXM; m++) {
            rinv[m] = 1.0 / sqrt(squares[m] / f32(p.k) + fz.eps);
        }
    }
{{- end}}
{{end}}

{{define "xload"}}
// xload reads vec4 at of x, which is vec4 i of row m of the block: times
// the norm's weights with Norm (the row's 1/rms comes at the end, in
// rinv), adding up the row's squares when an invocation reads whole rows;
// as it is when Prescaled, whose x already holds that product.
fn xload(at: u32, i: u32, m: u32) -> vec4<f32> {
{{- if .Prescaled}}
    return x[at];
{{- else if .Norm}}
    let v = x[at];
    if (TPC == 1u) {
        squares[m] += dot(v, v);
    }
    return v * nw[i];
{{- else}}
    return x[at];
{{- end}}
}
{{- if .Norm}}
const PRESCALED = {{.Prescaled}};
var<workgroup> norm_total: array<f32, MAXM>;
{{- if not .Prescaled}}
var<private> squares: array<f32, MAXM>;
{{- end}}
{{- end}}
{{end}}

{{define "gemv_head"}}
{{- /* The start of a GEMV (matmul_gemv, matmul_f16_gemv, quant_gemv): its
tree sum's workgroup memory, and main up to k4 (vec4s a row), the block's
rows (the block template) and lane (of the column's TPC invocations).
Needs WG, MAXM, TPC. */}}
// partial[m * WG + t] is invocation t's sum for row m of the block.
const PARTIALS = WG * MAXM;
var<workgroup> partial: array<f32, PARTIALS>;
{{- if .Subgroups}}
{{template "sg_vars" .}}
{{- end}}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32,
        @builtin(workgroup_id) g: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>{{template "sg_ids" .}}) {
{{- template "sg_init" .}}
    let k4 = p.k / 4u;
{{template "block" .}}
    let lane = t % TPC;
{{- end}}

{{define "sum_tree"}}
{{- /* The end of a GEMV whose TPC invocations a column split its inputs:
their sums acc[m] are added in a tree in workgroup memory, then lane 0
stores (partial[m * WG + t] holds row m's sum), with Subgroups after
shuffles for the levels below SG; with Pairs, the even
column's lane 0 takes its neighbour's sum too; the sums hold their
adapters' terms (lora_fold). Needs acc, lane, j, rows,
r0, t, TPC, WG, partial, rinv. */}}
{{- if .Subgroups}}
    // With subgroups the levels below SG are shuffles, no barrier: the TPC
    // invocations of a column are consecutive, and consecutive invocations
    // are consecutive lanes of a subgroup (local_invocation_index =
    // subgroup_id · subgroup_size + subgroup_invocation_id, as Chrome
    // documents for subgroup_id), so lane ^ s (s < SG) is the same
    // column's. Each invocation then holds the sum of its SG-aligned group
    // of lanes, and the tree adds the groups.
    for (var m = 0u; m < MAXM; m++) {
        var v = acc[m];
        for (var s = 1u; s < min(TPC, SG); s <<= 1u) {
            v += subgroupShuffleXor(v, s);
        }
        partial[m * WG + t] = v;
    }
    workgroupBarrier();
    for (var s = TPC / 2u; s >= SG; s >>= 1u) {
{{- else}}
    for (var m = 0u; m < MAXM; m++) {
        partial[m * WG + t] = acc[m];
    }
    workgroupBarrier();
    for (var s = TPC / 2u; s > 0u; s >>= 1u) {
{{- end}}
        if (lane < s) {
            for (var m = 0u; m < MAXM; m++) {
                partial[m * WG + t] += partial[m * WG + t + s];
            }
        }
        workgroupBarrier();
    }

{{- if .Pairs}}
    if (lane == 0u && j % 2u == 0u && j + 1u < p.nrows) {
        for (var m = 0u; m < rows; m++) {
            store_pair({{template "orow" .}}, p.col0 + j, partial[m * WG + t] * rinv[m], partial[m * WG + t + TPC] * rinv[m]);
        }
    }
{{- else}}
    if (lane == 0u && j < p.nrows) {
        for (var m = 0u; m < rows; m++) {
            store({{template "orow" .}}, p.col0 + j, partial[m * WG + t] * rinv[m]);
        }
    }
{{- end}}
{{end}}

{{define "gemv_end"}}
{{- /* The end of a GEMV (matmul_gemv, matmul_f16_gemv, quant_gemv): with
TPC = 1 (CPU adapters) each invocation stores its CPI columns (a GLU's
pairs among them: CPI even), else sum_tree. Needs acc (acc[m·CPI + c]:
row m, column j + c), lane, j, rows, r0, t, TPC, CPI, WG, partial, rinv. */}}
{{template "norm_end" .}}
{{- if .LoRA}}
{{template "lora_fold" .}}
{{- end}}
    if (TPC == 1u) {
        for (var m = 0u; m < rows; m++) {
{{- if .Pairs}}
            for (var c = 0u; c + 1u < CPI; c += 2u) {
                if (j + c + 1u < p.nrows) {
                    store_pair({{template "orow" .}}, p.col0 + j + c, acc[m * CPI + c] * rinv[m], acc[m * CPI + c + 1u] * rinv[m]);
                }
            }
{{- else}}
            for (var c = 0u; c < CPI; c++) {
                if (j + c < p.nrows) {
                    store({{template "orow" .}}, p.col0 + j + c, acc[m * CPI + c] * rinv[m]);
                }
            }
{{- end}}
        }
        return;
    }
{{template "sum_tree" .}}
{{end}}

{{define "lora_fold"}}
{{- /* The adapters' terms of a GEMV's columns (lora_share), folded into
its sums: acc[m·CPI + c] becomes rinv[m]·acc plus the term (with Shrink,
rinv[m]·(acc plus the term): lora_h's h is of the rows before 1/rms), and
rinv 1.
On a GPU the TPC invocations of a column split the rank, lane l taking
vec4s l, l + TPC, ..., and the tree sum adds their shares with the rest,
so that no invocation loops over the rank alone while the others wait.
(Grouping the block's rows by adapter, so that rows of one adapter share
its loads of B, made lavapipe slower: there masked-off rows cost as much
as live ones.) Needs acc, rinv, rows, j, lane, TPC, CPI, MAXM and the
block (orow). */}}
    for (var m = 0u; m < MAXM; m++) {
        for (var c = 0u; c < CPI; c++) {
            var term = 0.0;
            if (m < rows && j + c < p.nrows) {
                term = lora_share({{template "orow" .}}, m, p.col0 + j + c, lane, TPC);
            }
{{- if .Shrink}}
            acc[m * CPI + c] = (acc[m * CPI + c] + term) * rinv[m]; // h is of the rows before their 1/rms
{{- else}}
            acc[m * CPI + c] = acc[m * CPI + c] * rinv[m] + term;
{{- end}}
        }
        rinv[m] = 1.0;
    }
{{end}}

{{define "lora_h"}}
{{- /* With Shrink: the block's h, computed by the workgroup into lwh
instead of read from lora_shrink's: h[m, c] = Σ_k x[m, k]·nw[k]·Aᵀ[k, c]
over the Σ padded rank of row m's slot (zero past it and for rows without
an adapter), of the rows as the product reads them (xn with Prescaled,
the norm's weights on x with Norm) but before their 1/rms, which the fold
applies to the sum with the term. Each invocation takes the values i =
t, t + WG, ... of the MAXM·fz.lr / 4 quads of four columns (at most LWH
values), reading Aᵀ a quad at a time as lora_shrink does; a barrier, then
every column reads them. For a product of few
workgroups the work is done a few times over, and a dispatch is saved.
Needs t, WG, MAXM, rows, k4, the block (xrow, orow). */}}
{{- if .Shrink}}
    let quads = fz.lr / 4u; // of h's columns, a row
    for (var i = t; i < MAXM * quads; i += WG) {
        let m = i / quads;
        let cq = i % quads;
        // la starts with an entry per slot: the element where its Aᵀ
        // starts and Σ padded rank; Aᵀ of slot s, [k, Σ padded rank],
        // four columns a quad, follows the table (lora_values). A quad
        // past the rank of the row's slot, or of a row without one, loops
        // over no inputs: no loop inside a branch, which costs a CPU
        // adapter the loop's bound in iterations whatever the lanes it
        // leaves.
        var s = -1;
        if (m < rows) {
            s = lora_slot({{template "orow" .}});
        }
        let sl = la_entry(u32(max(s, 0)));
        let live = s >= 0 && 4u * cq < sl.y;
        let q = sl.y / 4u;
        var ai = sl.x + cq;
        let xr = {{template "xrow" .}};
        var v = vec4<f32>(0.0); // h's columns 4·cq .. + 3 of block row m
        for (var i4 = 0u; i4 < select(0u, k4, live); i4++) {
            let xv = lora_x(xr + i4, i4);
            v += xv.x * la_quad(ai) + xv.y * la_quad(ai + q) + xv.z * la_quad(ai + 2u * q) + xv.w * la_quad(ai + 3u * q);
            ai += 4u * q;
        }
        lwh[i] = v;
    }
    workgroupBarrier();
{{- end}}
{{end}}

{{define "block"}}
{{- /* The rows of a GEMV's block g.z (needs k4, g, MAXM): rows, and the
inputs and outputs of each, read by the xrow and orow templates. Plain: rows
r0 = g.z·MAXM ... of the first min(cap, step.rows). With Experts (a
mixture-of-experts product, backend.ExpertProjection) the block is entry g.z
of the routing's block table (moe_route.wgsl): up to MAXM (row, slot) pairs
that chose one expert e, whose matrix starts at row wbase of this weight
part (none of the part's experts: no rows). A pair's input is its token's
row (or its own with fz.slots), its output its own row. */}}
{{- if .Experts}}
    let tab = fz.tab + 3u * g.z;
    let e = routes[tab];
    var rows = min(routes[tab + 2u], MAXM);
    if (e < fz.e0 || e >= fz.e0 + fz.ne) {
        rows = 0u;
    }
    let wbase = (e - fz.e0) * p.nrows;
    for (var m = 0u; m < MAXM; m++) {
        if (m < rows) {
            let pair = routes[fz.ord + routes[tab + 1u] + m];
            xrows[m] = select(pair / fz.k, pair, fz.slots == 1u) * k4;
            orows[m] = pair;
        }
    }
{{- else}}
    let r0 = g.z * MAXM;
    let rows = min(min(p.cap, step.rows) - r0, MAXM); // rows of this block
    let xbase = r0 * k4;
{{- end}}
{{end}}

{{define "block_decls"}}
{{- if .Experts}}
var<private> xrows: array<u32, MAXM>; // the first x index of each row of the block
var<private> orows: array<u32, MAXM>; // the output row of each
{{- end}}
{{end}}

{{- /* xrow: the index in x of vec4 0 of the block's row m; orow: its
output row; wrow: the weight row of column j (all need block). */}}
{{define "xrow"}}{{if .Experts}}xrows[m]{{else}}(xbase + m * k4){{end}}{{end}}
{{define "orow"}}{{if .Experts}}orows[m]{{else}}(r0 + m){{end}}{{end}}
{{define "wrow"}}{{if .Experts}}(wbase + j){{else}}j{{end}}{{end}}
{{define "live"}}{{if .Experts}} && rows > 0u{{end}}{{end}}
