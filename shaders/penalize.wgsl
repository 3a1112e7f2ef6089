// penalize: a sampled row's logit bias and repetition, frequency and
// presence penalties, in place, before the sample kernel draws from it.
// One invocation per entry; the host merges a row's entries so that each
// (row, token) appears once and applies the CPU sampler's steps in its
// order: + bias, then the repetition penalty (divide a positive logit,
// multiply a negative one), then - (count·frequency + presence), the last
// computed on the host as the CPU computes it. Twin: runtime Sampler.Dist.
struct Params { count: u32, cols: u32 }
struct Entry { row: u32, token: u32, bias: f32, repeat: f32, sub: f32 } // repeat 0: off

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read> entries: array<Entry>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x >= p.count) { return; }
    let e = entries[id.x];
    let at = e.row * p.cols + e.token;
    var l = x[at] + e.bias;
    if (e.repeat != 0.0) {
        if (l > 0.0) { l = l / e.repeat; } else { l = l * e.repeat; }
    }
    x[at] = l - e.sub;
}
