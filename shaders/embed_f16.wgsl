// embed_f16: row r of dst = row tokens[r] of an f16 table (halves packed
// two per u32, rows padded to an even length), widened exactly by
// unpack2x16float. A table split into parts is dispatched once per part.
// Twin: runtime/cpu Backend.Embed of a QWeight.
struct Params { cols: u32, cap: u32, row0: u32, nrows: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<u32>;
@group(0) @binding(4) var<storage, read> tokens: array<i32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.cols) { return; }
    let r = i / p.cols;
    let c = i % p.cols;
    let t = u32(tokens[r]);
    if (t < p.row0 || t >= p.row0 + p.nrows) { return; }
    let v = unpack2x16float(table[(t - p.row0) * ((p.cols + 1u) / 2u) + c / 2u]);
    dst[i] = select(v.x, v.y, c % 2u == 1u);
}
