// rope_kv: RoPE of q and k and the store of k and v into the layer's cache,
// in one kernel (backend.RopeStore). One invocation per (row, pair of q's
// rotated dimensions) rotates q in place as rope does; one per (row, element
// of k) writes the element's rotated value (or its own value, past the
// rotated dimensions) and v's element to the row's slot, so that k itself
// is never written while its neighbours read it. The angles are rope's, to
// the bit. Twin: runtime/cpu Backend.RopeStore.
struct Params { q_cols: u32, kv_dim: u32, cap: u32, q_heads: u32, head_dim: u32, dim: u32, halves: u32, slots: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> q: array<f32>;
@group(0) @binding(3) var<storage, read_write> kc: array<f32>;
@group(0) @binding(4) var<storage, read_write> vc: array<f32>;
@group(0) @binding(5) var<storage, read> k: array<f32>;
@group(0) @binding(6) var<storage, read> v: array<f32>;
@group(0) @binding(7) var<storage, read> freqs: array<f32>;
@group(0) @binding(8) var<storage, read> pos: array<i32>;
@group(0) @binding(9) var<storage, read> slot: array<i32>;
{{template "rope"}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let half = p.dim / 2u;
    let qn = p.q_heads * half; // q's pairs a row
    let per = qn + p.kv_dim;
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * per) { return; }
    let row = i / per;
    let u = i % per;
    if (u < qn) {
        let ab = rope_pair(row * p.q_cols + (u / half) * p.head_dim, u % half, half, p.halves);
        let cs = rope_cos_sin(pos[row], u % half);
        let v0 = q[ab.x];
        let v1 = q[ab.y];
        q[ab.x] = v0 * cs.x - v1 * cs.y;
        q[ab.y] = v0 * cs.y + v1 * cs.x;
        return;
    }
    let at = u32(slot[row]);
    if (at >= p.slots) { return; }
    let e = u - qn;
    let d = e % p.head_dim;
    var val = k[row * p.kv_dim + e];
    if (d < p.dim) {
        var pair = d / 2u;
        var first = d % 2u == 0u;
        if (p.halves != 0u) {
            pair = d % half;
            first = d < half;
        }
        let ab = rope_pair(row * p.kv_dim + e - d, pair, half, p.halves);
        let cs = rope_cos_sin(pos[row], pair);
        let v0 = k[ab.x];
        let v1 = k[ab.y];
        if (first) {
            val = v0 * cs.x - v1 * cs.y;
        } else {
            val = v0 * cs.y + v1 * cs.x;
        }
    }
    kc[at * p.kv_dim + e] = val;
    vc[at * p.kv_dim + e] = v[row * p.kv_dim + e];
}
