// lora_shrink: the first product of unmerged LoRA adapters, grouped by
// adapter (after Punica's "shrink" and S-LoRA's per-adapter batching):
// h[r, t] = x[r, :] · a[off_j + t, :] for t < rank_j, for each row r whose
// slot j = rows[r].slot is valid (-1: no adapter). a holds the A rows of
// every slot of one weight ([ΣRank, k]), so one dispatch serves a batch
// that mixes adapters.
//
// Workgroup (g.x, g.y, g.z) takes slot j = g.z, columns t = g.x·64 + lane
// of its A, and the block of up to MAXM rows starting at g.y·MAXM. It
// returns at once when no row of the block runs with slot j; otherwise
// each invocation streams its row of A once, using every value for all the
// block's rows of slot j (whose x values are the same for every
// invocation), so the rows of one adapter share its reads of A, and rows
// of other adapters or of none cost nothing. No workgroup memory, no
// barrier: what a CPU adapter runs best (see matmul.go). h's stride is R,
// the largest rank among the slots. Twin: runtime/cpu's AddLoRA (x·Aᵀ by
// the matmul helper, summed in the same order).
struct Params { k: u32, cap: u32, nslots: u32, r: u32 }
struct Row { slot: i32, scale: f32 }
struct Slot { off: u32, rank: u32, scale: f32, _pad: u32 }

override R: u32 = 8u;
override MAXM: u32 = 8u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> h: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> a: array<f32>;
@group(0) @binding(5) var<storage, read> rows: array<Row>;
@group(0) @binding(6) var<storage, read> slots: array<Slot>;

@compute @workgroup_size(64)
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
    let t = g.x * 64u + lane;
    if (!mine || t >= min(sl.rank, R)) { return; }
    var acc: array<f32, MAXM>;
    let base = (sl.off + t) * p.k;
    for (var c = 0u; c < p.k; c++) {
        let av = a[base + c];
        for (var i = 0u; i < m; i++) {
            if (rows[r0 + i].slot == i32(j)) {
                acc[i] += x[(r0 + i) * p.k + c] * av;
            }
        }
    }
    for (var i = 0u; i < m; i++) {
        if (rows[r0 + i].slot == i32(j)) {
            h[(r0 + i) * R + t] = acc[i];
        }
    }
}
