// lora_shrink: the first product of unmerged LoRA adapters, grouped by
// adapter (after Punica's "shrink" and S-LoRA's per-adapter batching):
// h[r, t] = x[r, :] · a[off_j + t, :] for t < rank_j, for each row r whose
// slot j = rows[r].slot is valid (-1: no adapter). a holds the A rows of
// every slot ([ΣRank, k]), each slot's being those of all the weights that
// share the input x (q, k and v; gate and up) one after the other, so one
// dispatch computes x·Aᵀ for all of them, for a batch that mixes adapters.
//
// Workgroup (g.x, g.y, g.z) takes slot j = g.z, columns t = g.x·64 + lane
// of its A, and the block of 8 rows starting at g.y·8. It returns at once
// when no row of the block runs with slot j; otherwise each invocation
// streams its row of A once, multiplying every value into all 8 rows' sums
// at once (two vec4 accumulators, in registers: no branch in the loop;
// rows past the batch repeat its last row, rows of other slots are summed
// and not written), so the rows of one adapter share its reads of A and
// the x values are the same for every invocation. No workgroup memory, no
// barrier: what a CPU adapter runs best (see matmul.go). h's stride is R,
// the largest rank among the slots. Twin: runtime/cpu's AddLoRA (x·Aᵀ by
// the matmul helper, each row summed in the same order).
struct Params { k: u32, cap: u32, nslots: u32, r: u32 }
struct Row { slot: i32, scale: f32 }
struct Slot { off: u32, rank: u32, scale: f32, col: u32 }

override R: u32 = 8u;

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
    let r0 = g.y * 8u;
    let j = i32(g.z);
    if (r0 >= n || g.z >= p.nslots) { return; }
    let m = min(n - r0, 8u);
    var mine = false;
    for (var i = 0u; i < m; i++) {
        mine = mine || rows[r0 + i].slot == j;
    }
    let sl = slots[g.z];
    let t = g.x * 64u + lane;
    if (!mine || t >= min(sl.rank, R)) { return; }
    let last = n - 1u;
    let x0 = r0 * p.k;
    let x1 = min(r0 + 1u, last) * p.k;
    let x2 = min(r0 + 2u, last) * p.k;
    let x3 = min(r0 + 3u, last) * p.k;
    let x4 = min(r0 + 4u, last) * p.k;
    let x5 = min(r0 + 5u, last) * p.k;
    let x6 = min(r0 + 6u, last) * p.k;
    let x7 = min(r0 + 7u, last) * p.k;
    let base = (sl.off + t) * p.k;
    var lo = vec4<f32>(0.0);
    var hi = vec4<f32>(0.0);
    for (var c = 0u; c < p.k; c++) {
        let av = a[base + c];
        lo += vec4<f32>(x[x0 + c], x[x1 + c], x[x2 + c], x[x3 + c]) * av;
        hi += vec4<f32>(x[x4 + c], x[x5 + c], x[x6 + c], x[x7 + c]) * av;
    }
    var sums = array<f32, 8>(lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
    for (var i = 0u; i < m; i++) {
        if (rows[r0 + i].slot == j) {
            h[(r0 + i) * R + t] = sums[i];
        }
    }
}
