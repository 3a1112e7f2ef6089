// lora_expand: the second product of unmerged LoRA adapters (Punica's
// "expand"): dst[r, o] += rows[r].scale · scale_j · Σ_{t < rank_j} h[r, t] ·
// bt[off_j + t, o] for the row's slot j, bt holding the rows of every
// slot's Bᵀ ([ΣRank, n]). Rows without an adapter are left alone.
// Specialised by R, h's stride (as lora_shrink). Twin: runtime/cpu
// LoRAExpand.
struct Params { n: u32, cap: u32, nslots: u32 }
struct Row { slot: i32, scale: f32 }
struct Slot { off: u32, rank: u32, scale: f32, _pad: u32 }

override R: u32 = 8u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> h: array<f32>;
@group(0) @binding(4) var<storage, read> bt: array<f32>;
@group(0) @binding(5) var<storage, read> rows: array<Row>;
@group(0) @binding(6) var<storage, read> slots: array<Slot>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.n) { return; }
    let r = i / p.n;
    let o = i % p.n;
    let j = rows[r].slot;
    if (j < 0 || u32(j) >= p.nslots) { return; }
    let sl = slots[u32(j)];
    if (sl.rank == 0u) { return; }
    var acc = 0.0;
    for (var t = 0u; t < min(sl.rank, R); t++) {
        acc += h[r * R + t] * bt[(sl.off + t) * p.n + o];
    }
    dst[i] = dst[i] + rows[r].scale * sl.scale * acc;
}
