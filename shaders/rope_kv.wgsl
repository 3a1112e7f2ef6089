// rope_kv: RoPE of q and k and the store of k and v into the layer's cache,
// in one kernel (backend.RopeStore). One invocation per (row, pair of q's
// rotated dimensions) rotates q in place as rope does; one per (row, kv
// head) rotates that head of k in place (the head is its own: no other
// invocation reads it) and stores the head's keys and values to the row's
// slot in the cache's type (kv.inc.wgsl), as store_kv does. The angles are
// rope's, to the bit. Twin: runtime/cpu Backend.RopeStore.
struct Params { q_cols: u32, kv_heads: u32, cap: u32, q_heads: u32, head_dim: u32, dim: u32, halves: u32, slots: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> q: array<f32>;
@group(0) @binding(3) var<storage, read_write> kc: array<{{template "kv_elem" .}}>;
@group(0) @binding(4) var<storage, read_write> vc: array<{{template "kv_elem" .}}>;
@group(0) @binding(5) var<storage, read_write> k: array<f32>;
@group(0) @binding(6) var<storage, read> v: array<f32>;
@group(0) @binding(7) var<storage, read> freqs: array<f32>;
@group(0) @binding(8) var<storage, read> pos: array<i32>;
@group(0) @binding(9) var<storage, read> slot: array<i32>;
{{template "rope" "storage"}}{{template "rope_rotate" "q"}}{{template "rope_rotate" "k"}}{{template "kv_rec" .}}{{template "kv_put" (kvbuf . "kc" "k")}}{{template "kv_put" (kvbuf . "vc" "v")}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let half = p.dim / 2u;
    let qn = p.q_heads * half; // q's pairs a row
    let per = qn + p.kv_heads;
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * per) { return; }
    let row = i / per;
    let u = i % per;
    if (u < qn) {
        rotate_q(row * p.q_cols + (u / half) * p.head_dim, u % half, half, p.halves, pos[row]);
        return;
    }
    let at = u32(slot[row]);
    if (at >= p.slots) { return; }
    let h = u - qn;
    let src = (row * p.kv_heads + h) * p.head_dim;
    for (var j = 0u; j < half; j++) {
        rotate_k(src, j, half, p.halves, pos[row]);
    }
    let rec = kv_rec(at, h, p.kv_heads, (p.head_dim + 3u) / 4u);
    kc_put(rec, src, p.head_dim);
    vc_put(rec, src, p.head_dim);
}
