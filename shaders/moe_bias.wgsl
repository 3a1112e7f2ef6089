// moe_bias: x[p, c] += b[e, c] for each pair row p of an expert product,
// e = routes[p] its expert (gpt-oss's expert biases). One invocation per
// value. Twin: runtime/cpu Backend.ExpertBias.
struct Params { cols: u32, cap: u32, k: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read> routes: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.k * p.cols) { return; }
    let pair = i / p.cols;
    x[i] += b[routes[pair] * p.cols + i % p.cols];
}
