// embed_int4: row r of dst = row tokens[r] of an int4 table (layout: see
// matmul_int4_gemv), expanded as value = scale·q + min, the Go reference's
// arithmetic, so the result is bit for bit the reference's. A table split
// into parts is dispatched once per part; each part writes the rows whose
// token it holds. Twin: runtime/cpu Backend.Embed of a QWeight.
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
    let grp = (t - p.row0) * p.groups + c / 32u;
    let q = (codes[grp * 4u + (c % 32u) / 8u] >> (4u * (c % 8u))) & 15u;
    let sm = unpack2x16float(scales[grp]);
    dst[i] = sm.x * f32(q) + sm.y;
}
