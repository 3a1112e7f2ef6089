// store_kv: write each row's keys and values into the layer's cache at the
// row's slot (its position through its sequence's block table, computed on
// the host), in the cache's type (kv.inc.wgsl). One invocation per (row,
// kv head) stores that head's record of keys and of values. Twin:
// runtime/cpu Backend.StoreKV.
struct Params { kv_heads: u32, head_dim: u32, cap: u32, slots: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> kc: array<{{template "kv_elem" .}}>;
@group(0) @binding(3) var<storage, read_write> vc: array<{{template "kv_elem" .}}>;
@group(0) @binding(4) var<storage, read> k: array<f32>;
@group(0) @binding(5) var<storage, read> v: array<f32>;
@group(0) @binding(6) var<storage, read> slot: array<i32>;
{{template "kv_rec" .}}{{template "kv_put" (kvbuf . "kc" "k")}}{{template "kv_put" (kvbuf . "vc" "v")}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.kv_heads) { return; }
    let row = i / p.kv_heads;
    let h = i % p.kv_heads;
    let at = u32(slot[row]);
    if (at >= p.slots) { return; }
    let rec = kv_rec(at, h, p.kv_heads, (p.head_dim + 3u) / 4u);
    let src = i * p.head_dim; // (row · kv_heads + h) · head_dim
    kc_put(rec, src, p.head_dim);
    vc_put(rec, src, p.head_dim);
}
