// argmax: the index of each row's largest value (the lowest among equals),
// one workgroup per row (wg_best, reduce.inc.wgsl). Twin: runtime/cpu Argmax.
struct Params { cols: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> result: array<i32>;

// WG is 256, or 4 (SwiftShader's SIMD width: one coroutine a workgroup,
// see runtime/gpu's narrow.go); the reduction is the same for any power of two.
override WG: u32 = 256u;
{{template "reduce" .}}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32{{template "sg_ids" .}}) {
{{- template "sg_init" .}}
    let base = wid.x * p.cols;
    var bv = -3.4028234663852886e38;
    var bi = NONE;
    for (var c = lid; c < p.cols; c += WG) {
        let v = x[base + c];
        if (v > bv || bi == NONE) { bv = v; bi = c; }
    }
    let b = wg_best(bv, bi, lid);
    if (lid == 0u) { result[wid.x] = i32(b.i); }
}
