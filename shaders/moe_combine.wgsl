// moe_combine: dst[i, c] += scale · (Σ_s w[i,s] · y[i·K+s, c] +
// sigmoid(g[i]) · sh[i, c]), the experts' outputs weighted by the routing
// (weights at word p.wofs of routes) and, with p.has_shared, a shared expert
// gated by its own logit (Qwen2-MoE); the sum in slot order, the shared
// term last. One invocation per element. Twin: runtime/cpu Combine.
struct Params { cols: u32, cap: u32, k: u32, scale: f32, has_shared: u32, wofs: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> y: array<f32>;
@group(0) @binding(4) var<storage, read> routes: array<u32>;
@group(0) @binding(5) var<storage, read> sh: array<f32>;
@group(0) @binding(6) var<storage, read> g: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let at = id.x + id.y * groups.x * 256u;
    if (at >= min(p.cap, step.rows) * p.cols) { return; }
    let i = at / p.cols;
    let c = at % p.cols;
    var sum = 0.0;
    for (var s = 0u; s < p.k; s++) {
        let pair = i * p.k + s;
        sum += bitcast<f32>(routes[p.wofs + pair]) * y[pair * p.cols + c];
    }
    if (p.has_shared == 1u) {
        sum += (1.0 / (1.0 + exp(-g[i]))) * sh[i * p.cols + c];
    }
    dst[at] += p.scale * sum;
}
