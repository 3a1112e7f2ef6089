// argmax: the index of each row's largest value (the lowest among equals),
// one workgroup per row. Twin: runtime/cpu Argmax.
struct Params { cols: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> result: array<i32>;

const WG = 256u;
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let base = wid.x * p.cols;
    var bv = -3.4028234663852886e38;
    var bi = 0xffffffffu;
    for (var c = lid; c < p.cols; c += WG) {
        let v = x[base + c];
        if (v > bv || bi == 0xffffffffu) { bv = v; bi = c; }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let ov = best_v[lid + s];
            let oi = best_i[lid + s];
            if (oi != 0xffffffffu && (best_i[lid] == 0xffffffffu || ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid]))) {
                best_v[lid] = ov;
                best_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) { result[wid.x] = i32(best_i[0]); }
}
