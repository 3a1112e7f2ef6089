// rmsnorm: dst = x / sqrt(mean(x²) + eps) * w, one workgroup per row with a
// workgroup sum (reduce.inc.wgsl). Twin: runtime/cpu RMSNorm.
struct Params { cols: u32, cap: u32, eps: f32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<f32>;

// WG is 256, or 4 (SwiftShader's SIMD width: one coroutine a workgroup,
// see runtime/gpu's narrow.go); the reduction is the same for any power of two.
override WG: u32 = 256u;
{{template "rms" .}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32{{template "sg_ids" .}}) {
{{- template "sg_init" .}}
    let row = wid.x;
    if (row >= min(p.cap, step.rows)) { return; } // uniform per workgroup
    let base = row * p.cols;
    let inv = rms_inv(base, p.cols, lid, p.eps);
    for (var c = lid; c < p.cols; c += WG) {
        dst[base + c] = w[c] * (inv * x[base + c]);
    }
}
