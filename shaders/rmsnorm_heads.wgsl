// rmsnorm_heads: RMS-normalise each head of each row in place, with one
// weight per head dimension (Qwen3's q and k norms). One workgroup per
// (head, row), a workgroup sum (reduce.inc.wgsl). Twin: runtime/cpu
// Backend.HeadNorm.
struct Params { cols: u32, cap: u32, head_dim: u32, eps: f32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;

const WG = 64u;
{{template "rms" .}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32{{template "sg_ids" .}}) {
{{- template "sg_init" .}}
    let row = wid.y;
    if (row >= min(p.cap, step.rows)) { return; } // uniform per workgroup
    let base = row * p.cols + wid.x * p.head_dim;
    let inv = rms_inv(base, p.head_dim, lid, p.eps);
    for (var c = lid; c < p.head_dim; c += WG) {
        x[base + c] = w[c] * (inv * x[base + c]);
    }
}
