// lora_expand: the second product of unmerged LoRA adapters (Punica's
// "expand"), grouped by adapter as lora_shrink: dst[r, o] += rows[r].scale
// · scale_j · Σ_{t < rank_j} h[r, t] · bt[off_j + t, o] for the rows r of
// slot j, bt holding the rows of every slot's Bᵀ ([ΣRank, n]).
//
// Workgroup (g.x, g.y, g.z) takes slot j = g.z, outputs o = g.x·256 +
// lane and the block of up to MAXM rows at g.y·MAXM, and returns at once
// when no row of the block runs with slot j; each invocation reads its
// column of Bᵀ once for all the block's rows of slot j. Rows without an
// adapter are left alone. Specialised by R, h's stride (as lora_shrink).
// Twin: runtime/cpu's AddLoRA.
struct Params { n: u32, cap: u32, nslots: u32, r: u32 }
struct Row { slot: i32, scale: f32 }
struct Slot { off: u32, rank: u32, scale: f32, _pad: u32 }

override R: u32 = 8u;
override MAXM: u32 = 8u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> h: array<f32>;
@group(0) @binding(4) var<storage, read> bt: array<f32>;
@group(0) @binding(5) var<storage, read> rows: array<Row>;
@group(0) @binding(6) var<storage, read> slots: array<Slot>;

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) g: vec3<u32>) {
    let n = min(p.cap, step.rows);
    let r0 = g.y * MAXM;
    let j = g.z;
    if (r0 >= n || j >= p.nslots) { return; }
    let m = min(n - r0, MAXM);
    var mine = false;
    for (var i = 0u; i < m; i++) {
        mine = mine || rows[r0 + i].slot == i32(j);
    }
    let sl = slots[j];
    let o = g.x * 256u + lane;
    if (!mine || sl.rank == 0u || o >= p.n) { return; }
    var acc: array<f32, MAXM>;
    for (var t = 0u; t < min(sl.rank, R); t++) {
        let bv = bt[(sl.off + t) * p.n + o];
        for (var i = 0u; i < m; i++) {
            if (rows[r0 + i].slot == i32(j)) {
                acc[i] += h[(r0 + i) * R + t] * bv;
            }
        }
    }
    for (var i = 0u; i < m; i++) {
        let row = rows[r0 + i];
        if (row.slot == i32(j)) {
            let at = (r0 + i) * p.n + o;
            dst[at] = dst[at] + row.scale * sl.scale * acc[i];
        }
    }
}
