// topk: the k largest values of one row of x, largest first (ties: lower index
// first), as the candidate set the sampler draws from. One workgroup; round
// r finds the largest element ordered after round r-1's winner, so the
// result is exact with ties and needs no sort. Twin: runtime/cpu TopK.
struct Params { cols: u32, k: u32, row: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>; // ids[0..k), then bits of the values

const WG = 256u;
const NONE = 0xffffffffu;
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

// before reports whether (v, i) comes before (w, j): larger value first,
// lower index among equals.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
    return j == NONE || (i != NONE && (v > w || (v == w && i < j)));
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    var prev_v = 0.0;
    var prev_i = NONE; // NONE: no winner yet, every element qualifies
    for (var r = 0u; r < p.k; r++) {
        var bv = 0.0;
        var bi = NONE;
        for (var c = lid; c < p.cols; c += WG) {
            let v = x[p.row * p.cols + c];
            let after_prev = prev_i == NONE || before(prev_v, prev_i, v, c);
            if (after_prev && before(v, c, bv, bi)) { bv = v; bi = c; }
        }
        best_v[lid] = bv;
        best_i[lid] = bi;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if (lid < s && before(best_v[lid + s], best_i[lid + s], best_v[lid], best_i[lid])) {
                best_v[lid] = best_v[lid + s];
                best_i[lid] = best_i[lid + s];
            }
            workgroupBarrier();
        }
        prev_v = best_v[0];
        prev_i = best_i[0];
        if (lid == 0u) {
            out[r] = prev_i;
            out[p.k + r] = bitcast<u32>(prev_v);
        }
        workgroupBarrier();
    }
}
