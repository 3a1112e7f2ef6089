// topk: the k largest values of one row of x, largest first (ties: lower index
// first), as the candidate set the sampler draws from. One workgroup; round
// r finds the largest element ordered after round r-1's winner, so the
// result is exact with ties and needs no sort (wg_best, reduce.inc.wgsl).
// Twin: runtime/cpu TopK.
struct Params { cols: u32, k: u32, row: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>; // ids[0..k), then bits of the values

const WG = 256u;
{{template "reduce" .}}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32{{template "sg_ids" .}}) {
{{- template "sg_init" .}}
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
        let b = wg_best(bv, bi, lid);
        prev_v = b.v;
        prev_i = b.i;
        if (lid == 0u) {
            out[r] = prev_i;
            out[p.k + r] = bitcast<u32>(prev_v);
        }
    }
}
