// act: x = act(x), in place: SiLU (p.act = 0), GELU's tanh approximation
// (1), exact GELU (2), tanh (3) or quick GELU, x·σ(1.702x) (6), numbered
// as models.Activation. Twin:
// runtime/cpu Activation.
struct Params { cols: u32, cap: u32, act: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;

// erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7, about
// f32's rounding near 1); WGSL has no erf.
fn erf(v: f32) -> f32 {
    let a = abs(v);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
    return sign(v) * y;
}

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.cols) { return; }
    let g = x[i];
    var a: f32;
    switch p.act {
        case 1u: {
            // Past |t| = 10, tanh(t) is ±1 in f32; clamping keeps backends
            // whose tanh goes through exp from overflowing to NaN.
            let t = clamp(0.7978845608028654 * (g + 0.044715 * g * g * g), -10.0, 10.0);
            a = 0.5 * g * (1.0 + tanh(t));
        }
        case 2u: {
            a = 0.5 * g * (1.0 + erf(g * 0.7071067811865476));
        }
        case 3u: {
            a = tanh(clamp(g, -10.0, 10.0));
        }
        case 6u: {
            a = g * (1.0 / (1.0 + exp(-1.702 * g)));
        }
        default: {
            a = g * (1.0 / (1.0 + exp(-g)));
        }
    }
    x[i] = a;
}
