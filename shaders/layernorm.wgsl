// layernorm: dst = (x - mean(x)) / sqrt(var(x) + eps) * w + b, one workgroup
// per row: a workgroup sum (reduce.inc.wgsl) for the mean, then another
// for the variance about it (two passes, as ggml_norm computes it). Twin:
// runtime/cpu LayerNorm.
struct Params { cols: u32, cap: u32, eps: f32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<f32>;
@group(0) @binding(5) var<storage, read> b: array<f32>;

const WG = 256u;
{{template "reduce" .}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32{{template "sg_ids" .}}) {
{{- template "sg_init" .}}
    let row = wid.x;
    if (row >= min(p.cap, step.rows)) { return; } // uniform per workgroup
    let base = row * p.cols;
    var sum = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        sum += x[base + c];
    }
    let mean = wg_sum(sum, lid) / f32(p.cols);
    var ss = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        let d = x[base + c] - mean;
        ss += d * d;
    }
    let inv = 1.0 / sqrt(wg_sum(ss, lid) / f32(p.cols) + p.eps);
    for (var c = lid; c < p.cols; c += WG) {
        dst[base + c] = (x[base + c] - mean) * inv * w[c] + b[c];
    }
}
