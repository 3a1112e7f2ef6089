// mask: x[row, c] = -Inf where bit c of the token mask is clear, in place,
// so that argmax and top-k see only the tokens a grammar allows. One
// invocation per column. Twin: runtime/cpu MaskRow.
struct Params { cols: u32, row: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read> mask: array<u32>; // (cols+31)/32 words per row

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let c = id.x + id.y * groups.x * 256u;
    if (c >= p.cols) { return; }
    let words = (p.cols + 31u) / 32u;
    // -Inf as bits; WGSL has no infinite constants, so the value is built
    // from a uniform (0u for every row) rather than folded at compile time.
    let neg_inf = bitcast<f32>(0xff800000u | (p.row & 0u));
    if (((mask[p.row * words + c / 32u] >> (c % 32u)) & 1u) == 0u) {
        x[p.row * p.cols + c] = neg_inf;
    }
}
