// bias: x[r, c] += b[c] over the batch's rows, in place. Twin: runtime/cpu
// Backend.AddBias.
struct Params { cols: u32, cap: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.cols) { return; }
    x[i] = x[i] + b[i % p.cols];
}
