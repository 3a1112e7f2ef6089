// moe_combine: dst[i, c] += scale · (Σ_s w[i,s] · es[e] · y[i·K+s, c] +
// sigmoid(g[i]) · sh[i, c]), the experts' outputs weighted by the routing
// (expert ids at word 0, weights at word p.wofs of routes), with
// p.has_scale by each expert e's own factor (Gemma 4), and with
// p.has_shared a shared expert gated by its own logit (Qwen2-MoE); the
// sum in slot order, the shared term last; p.overwrite writes dst instead of
// adding to it. A workgroup per row. Twin: runtime/cpu Backend.Combine.
struct Params { cols: u32, cap: u32, k: u32, scale: f32, has_shared: u32, wofs: u32, has_scale: u32, overwrite: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> y: array<f32>;
@group(0) @binding(4) var<storage, read> routes: array<u32>;
@group(0) @binding(5) var<storage, read> sh: array<f32>;
@group(0) @binding(6) var<storage, read> g_shared: array<f32>;
@group(0) @binding(7) var<storage, read> es: array<f32>;

const WG = 256u;

// Workgroup g.x takes row g.x, its invocations the columns in turn.
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) g: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let i = g.x;
    if (i >= min(p.cap, step.rows)) { return; } // uniform per workgroup
    var gate = 0.0;
    if (p.has_shared == 1u) {
        gate = 1.0 / (1.0 + exp(-g_shared[i]));
    }
    for (var c = t; c < p.cols; c += WG) {
        var sum = 0.0;
        for (var s = 0u; s < p.k; s++) {
            let pair = i * p.k + s;
            var w = bitcast<f32>(routes[p.wofs + pair]);
            if (p.has_scale == 1u) {
                w *= es[routes[pair]];
            }
            sum += w * y[pair * p.cols + c];
        }
        if (p.has_shared == 1u) {
            sum += gate * sh[i * p.cols + c];
        }
        if (p.overwrite == 1u) {
            dst[i * p.cols + c] = p.scale * sum;
        } else {
            dst[i * p.cols + c] += p.scale * sum;
        }
    }
}
