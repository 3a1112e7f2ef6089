{{define "quant_embed"}}
{{- /* The embedding lookup of the grouped integer tables, int4 (embed_int4)
and int8 (embed_int8). The kernel declares GK, the inputs a group holds,
and fn code(grp: u32, i: u32) -> u32, the code of value i of group grp
(its codes: GK / 8 or GK / 4 words from grp · 4). */}}
struct Params { cols: u32, cap: u32, row0: u32, nrows: u32, groups: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> codes: array<u32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>;
@group(0) @binding(5) var<storage, read> tokens: array<i32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.cols) { return; }
    let r = i / p.cols;
    let c = i % p.cols;
    let t = u32(tokens[r]);
    if (t < p.row0 || t >= p.row0 + p.nrows) { return; }
    let grp = (t - p.row0) * p.groups + c / GK;
    let sm = unpack2x16float(scales[grp]);
    dst[i] = sm.x * f32(code(grp, c % GK)) + sm.y;
}
{{end}}
