// store_kv: write each row's key and value into the layer's cache at the
// row's slot (its position through its sequence's block table, computed on
// the host). Twin: runtime/cpu Backend.StoreKV.
struct Params { kv_dim: u32, cap: u32, slots: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> kc: array<f32>;
@group(0) @binding(3) var<storage, read_write> vc: array<f32>;
@group(0) @binding(4) var<storage, read> k: array<f32>;
@group(0) @binding(5) var<storage, read> v: array<f32>;
@group(0) @binding(6) var<storage, read> slot: array<i32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.kv_dim) { return; }
    let row = i / p.kv_dim;
    let c = i % p.kv_dim;
    let at = u32(slot[row]);
    if (at >= p.slots) { return; }
    kc[at * p.kv_dim + c] = k[i];
    vc[at * p.kv_dim + c] = v[i];
}
