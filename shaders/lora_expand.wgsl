// lora_expand: the second product of unmerged LoRA adapters (Punica's
// "expand"), grouped by adapter as lora_shrink: dst[r, o] += rows[r].scale
// · scale_j · Σ_{t < rank_j} h[r, col_j + t] · bt[off_j + t, o] for the
// rows r of slot j, bt holding the rows of every slot's Bᵀ of this weight
// ([ΣRank, n]) and col_j the first column of this weight in h, where one
// lora_shrink put the products of all the weights that share the input.
//
// Workgroup (g.x, g.y, g.z) takes slot j = g.z, outputs o = g.x·256 +
// lane and the block of 8 rows at g.y·8, and returns at once when no row
// of the block runs with slot j; each invocation reads its column of Bᵀ
// once for all 8 rows (two vec4 accumulators, as lora_shrink), and adds
// the sums of the rows of slot j. Rows without an adapter are left alone.
// Specialised by R, h's stride (as lora_shrink). Twin: runtime/cpu's
// AddLoRA.
struct Params { n: u32, cap: u32, nslots: u32, r: u32 }
struct Row { slot: i32, scale: f32 }
struct Slot { off: u32, rank: u32, scale: f32, col: u32 }

override R: u32 = 8u;

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
    let r0 = g.y * 8u;
    let j = i32(g.z);
    if (r0 >= n || g.z >= p.nslots) { return; }
    let m = min(n - r0, 8u);
    var mine = false;
    for (var i = 0u; i < m; i++) {
        mine = mine || rows[r0 + i].slot == j;
    }
    let sl = slots[g.z];
    let o = g.x * 256u + lane;
    if (!mine || sl.rank == 0u || o >= p.n) { return; }
    let last = n - 1u;
    let h0 = r0 * R + sl.col;
    let h1 = min(r0 + 1u, last) * R + sl.col;
    let h2 = min(r0 + 2u, last) * R + sl.col;
    let h3 = min(r0 + 3u, last) * R + sl.col;
    let h4 = min(r0 + 4u, last) * R + sl.col;
    let h5 = min(r0 + 5u, last) * R + sl.col;
    let h6 = min(r0 + 6u, last) * R + sl.col;
    let h7 = min(r0 + 7u, last) * R + sl.col;
    var lo = vec4<f32>(0.0);
    var hi = vec4<f32>(0.0);
    for (var t = 0u; t < min(sl.rank, R); t++) {
        let bv = bt[(sl.off + t) * p.n + o];
        lo += vec4<f32>(h[h0 + t], h[h1 + t], h[h2 + t], h[h3 + t]) * bv;
        hi += vec4<f32>(h[h4 + t], h[h5 + t], h[h6 + t], h[h7 + t]) * bv;
    }
    var sums = array<f32, 8>(lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
    for (var i = 0u; i < m; i++) {
        let row = rows[r0 + i];
        if (row.slot == j) {
            let at = (r0 + i) * p.n + o;
            dst[at] = dst[at] + row.scale * sl.scale * sums[i];
        }
    }
}
