// lora_shrink: the first product of unmerged LoRA adapters, grouped by
// adapter (after Punica's "shrink" and S-LoRA's per-adapter batching):
// h[r, t] = x[r, :] · A_j[t, :] for t < rank_j, for each row r whose slot
// j = rows[r].slot is valid (-1: no adapter). a holds the A rows of every
// slot, each slot's being those of all the weights that share the input x
// (q, k and v; gate and up) one after the other, so one dispatch computes
// x·Aᵀ for all of them, for a batch that mixes adapters.
//
// Workgroup (g.x, g.y, g.z) takes slot j = g.z, the column quads t =
// 4·(g.x·CQ + cq) .. +3 of its A for cq < CQ, and the g.y-th group of up
// to MAXM rows among those of slot j (found by a scan of the rows: the
// batch is not sorted by adapter). Each slot's A is stored transposed,
// [k, rank] (rank padded to a multiple of 4), so an invocation's four
// columns at one k are one quad (a vec4 of f32 or, with Half, of halves),
// and the invocations of a workgroup read consecutive quads. Each streams its columns (its share of the width,
// KS > 1) once, multiplying every vec4 into the sums of all the group's
// rows at once: vec4 accumulators in registers, no branch in the loop,
// each x value loaded once for four columns (on a CPU adapter an x load
// is a gather across the SIMD lanes, though every invocation reads the
// same address). So the rows of one adapter share its reads of A, and
// rows of other adapters or of none cost nothing. MAXM (2, 4 or 8) is the
// host's choice from the most rows any slot has in the step. On CPU
// adapters KS = 1: no workgroup memory, no barrier, what they run best
// (see matmul.go). h's stride is R, the largest rank among the slots.
// Twin: runtime/cpu's AddLoRA (x·Aᵀ by the matmul helper, each row summed
// in the same order when KS = 1).
//
// Composed with Norm (shaders.Fusion.Norm) it reads the rows of x before
// their RMSNorm and applies it itself, h = (x/rms(x) ∘ nw)·Aᵀ: each
// invocation adds up the squares of the rows it streams anyway, and takes
// the norm's weights into each value of A. So on a GPU, where the
// projection's product takes the norm as its prologue, an adapted
// projection is two dispatches (this and the product), not three with an
// rmsnorm of its own.
{{template "lora" .}}

@group(0) @binding(2) var<storage, read_write> h: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
// a starts with the slot table, an entry per slot j: the element where
// slot j's Aᵀ starts and its rows' count (Σ rank, each padded to a
// multiple of 4); the slots' Aᵀ follow, a quad of four columns an
// element (lora_values).
@group(0) @binding(4) var<storage, read> a: array<{{template "lora_quad" .}}>;
{{template "lora_values" (values . "a")}}
{{- if .Norm}}
@group(0) @binding(6) var<storage, read> nw: array<f32>;
{{- end}}

// KS is the invocations that split the width of a column quad (a power
// of two ≤ 64): 1 on CPU adapters, where each invocation streams its
// columns' whole rows and nothing is shared; on GPUs several, each taking
// the width's c = kl, kl + KS, ..., their sums then added in a tree in
// workgroup memory, so that a shrink of a few adapters is not a few
// workgroups looping over the width alone (Punica's shrink splits k too).
// A workgroup takes CQ = 64 / KS column quads, invocation cq + CQ·kl
// taking quad cq (neighbours read neighbouring vec4s of Aᵀ).
override KS: u32 = 1u;
const CQ = 64u / KS;
var<workgroup> red: array<vec4<f32>, 512>; // red[m·64 + i]: invocation i's sums of row m
{{- if .Norm}}
var<workgroup> redsq: array<vec4<f32>, 128>; // redsq[i], redsq[64 + i]: its squares of rows 0..3, 4..7
{{- end}}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) g: vec3<u32>) {
    if (g.z >= p.nslots) { return; }
    let e = a_entry(g.z);
    let sl = Slot(e.x, e.y, 0.0, 0u);
    let cq = lane % CQ;
    let kl = lane / CQ;
    let t = 4u * (g.x * CQ + cq); // the first of the invocation's four columns
    let live = t < min(sl.rank, R);
    // The group's rows: the (g.y·MAXM)-th row of slot j and those after.
    let n = min(p.cap, step.rows);
    let j = i32(g.z);
    var rs: array<u32, 8>;
    let m = slot_rows(j, g.y * MAXM, n, &rs);
    if (m == 0u) { return; }
    let x0 = rs[0] * p.width;
    let x1 = rs[1] * p.width;
    let x2 = rs[2] * p.width;
    let x3 = rs[3] * p.width;
    let x4 = rs[4] * p.width;
    let x5 = rs[5] * p.width;
    let x6 = rs[6] * p.width;
    let x7 = rs[7] * p.width;
    let q = sl.rank / 4u; // vec4s a row of Aᵀ
    var ai = sl.off + kl * q + t / 4u;
    var s0 = vec4<f32>(0.0); // row 0's sums of the four columns
    var s1 = vec4<f32>(0.0);
    var s2 = vec4<f32>(0.0);
    var s3 = vec4<f32>(0.0);
    var s4 = vec4<f32>(0.0);
    var s5 = vec4<f32>(0.0);
    var s6 = vec4<f32>(0.0);
    var s7 = vec4<f32>(0.0);
{{- if .Norm}}
    var sq = vec4<f32>(0.0); // the rows' sums of squares: rows 0..3
    var sq4 = vec4<f32>(0.0); // rows 4..7
{{- end}}
    // A quad past the rank loads nothing (with KS > 1 its invocations
    // still take part in the tree sum).
    let width = select(0u, p.width, live);
    for (var c = kl; c < width; c += KS) {
{{- if .Norm}}
        let av = a_quad(ai) * nw[c];
{{- else}}
        let av = a_quad(ai);
{{- end}}
        ai += q * KS;
        let v0 = x[x0 + c];
        let v1 = x[x1 + c];
        s0 += av * v0;
        s1 += av * v1;
{{- if .Norm}}
        sq.x += v0 * v0;
        sq.y += v1 * v1;
{{- end}}
        if (MAXM > 2u) {
            let v2 = x[x2 + c];
            let v3 = x[x3 + c];
            s2 += av * v2;
            s3 += av * v3;
{{- if .Norm}}
            sq.z += v2 * v2;
            sq.w += v3 * v3;
{{- end}}
        }
        if (MAXM > 4u) {
            let v4 = x[x4 + c];
            let v5 = x[x5 + c];
            let v6 = x[x6 + c];
            let v7 = x[x7 + c];
            s4 += av * v4;
            s5 += av * v5;
            s6 += av * v6;
            s7 += av * v7;
{{- if .Norm}}
            sq4 += vec4<f32>(v4 * v4, v5 * v5, v6 * v6, v7 * v7);
{{- end}}
        }
    }
    var sums = array<vec4<f32>, 8>(s0, s1, s2, s3, s4, s5, s6, s7);
{{- if .Norm}}
    var squares = array<f32, 8>(sq.x, sq.y, sq.z, sq.w, sq4.x, sq4.y, sq4.z, sq4.w);
{{- end}}
    if (KS > 1u) {
        for (var i = 0u; i < MAXM; i++) {
            red[i * 64u + lane] = sums[i];
        }
{{- if .Norm}}
        redsq[lane] = sq;
        redsq[64u + lane] = sq4;
{{- end}}
        workgroupBarrier();
        for (var s = KS / 2u; s > 0u; s >>= 1u) {
            if (kl < s) {
                for (var i = 0u; i < MAXM; i++) {
                    red[i * 64u + lane] += red[i * 64u + lane + s * CQ];
                }
{{- if .Norm}}
                redsq[lane] += redsq[lane + s * CQ];
                redsq[64u + lane] += redsq[64u + lane + s * CQ];
{{- end}}
            }
            workgroupBarrier();
        }
        if (kl != 0u) { return; }
        for (var i = 0u; i < MAXM; i++) {
            sums[i] = red[i * 64u + lane];
        }
{{- if .Norm}}
        let sa = redsq[lane];
        let sb = redsq[64u + lane];
        squares = array<f32, 8>(sa.x, sa.y, sa.z, sa.w, sb.x, sb.y, sb.z, sb.w);
{{- end}}
    }
    if (!live) { return; }
    for (var i = 0u; i < m; i++) {
{{- if .Norm}}
        let v = sums[i] / sqrt(squares[i] / f32(p.width) + p.eps);
{{- else}}
        let v = sums[i];
{{- end}}
        let o = rs[i] * R + t;
        h[o] = v.x;
        h[o + 1u] = v.y;
        h[o + 2u] = v.z;
        h[o + 3u] = v.w;
    }
}
