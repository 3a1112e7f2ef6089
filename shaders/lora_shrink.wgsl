// lora_shrink: the first product of unmerged LoRA adapters, grouped by
// adapter (after Punica's "shrink" and S-LoRA's per-adapter batching):
// h[r, t] = x[r, :] · a[off_j + t, :] for t < rank_j, for each row r whose
// slot j = rows[r].slot is valid (-1: no adapter). a holds the A rows of
// every slot ([ΣRank, k]), each slot's being those of all the weights that
// share the input x (q, k and v; gate and up) one after the other, so one
// dispatch computes x·Aᵀ for all of them, for a batch that mixes adapters.
//
// Workgroup (g.x, g.y, g.z) takes slot j = g.z, columns t = g.x·64 + lane
// of its A, and the g.y-th group of up to MAXM rows among those of slot j
// (found by a scan of the rows: the batch is not sorted by adapter). Each
// invocation streams its row of A once, multiplying every value into the
// sums of all the group's rows at once: vec2 accumulators in registers,
// no branch in the loop, x values the same for every invocation. So the
// rows of one adapter share its reads of A, and rows of other adapters or
// of none cost nothing. MAXM (2, 4 or 8) is the host's choice from the
// most rows any slot has in the step. No workgroup memory, no barrier:
// what a CPU adapter runs best (see matmul.go). h's stride is R, the
// largest rank among the slots. Twin: runtime/cpu's AddLoRA (x·Aᵀ by the
// matmul helper, each row summed in the same order).
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
@group(0) @binding(4) var<storage, read> a: array<f32>;
// slots[j]: the first row of slot j's A rows in a, their count (Σ rank).
@group(0) @binding(6) var<storage, read> slots: array<Slot>;
{{- if .Norm}}
@group(0) @binding(7) var<storage, read> nw: array<f32>;
{{- end}}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) g: vec3<u32>) {
    if (g.z >= p.nslots) { return; }
    let sl = slots[g.z];
    let t = g.x * 64u + lane;
    if (t >= min(sl.rank, R)) { return; }
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
    let base = (sl.off + t) * p.width;
    var s01 = vec2<f32>(0.0);
    var s23 = vec2<f32>(0.0);
    var s45 = vec2<f32>(0.0);
    var s67 = vec2<f32>(0.0);
{{- if .Norm}}
    var q01 = vec2<f32>(0.0); // the rows' sums of squares
    var q23 = vec2<f32>(0.0);
    var q45 = vec2<f32>(0.0);
    var q67 = vec2<f32>(0.0);
{{- end}}
    for (var c = 0u; c < p.width; c++) {
{{- if .Norm}}
        let av = a[base + c] * nw[c];
{{- else}}
        let av = a[base + c];
{{- end}}
        let v01 = vec2<f32>(x[x0 + c], x[x1 + c]);
        s01 += v01 * av;
{{- if .Norm}}
        q01 += v01 * v01;
{{- end}}
        if (MAXM > 2u) {
            let v23 = vec2<f32>(x[x2 + c], x[x3 + c]);
            s23 += v23 * av;
{{- if .Norm}}
            q23 += v23 * v23;
{{- end}}
        }
        if (MAXM > 4u) {
            let v45 = vec2<f32>(x[x4 + c], x[x5 + c]);
            let v67 = vec2<f32>(x[x6 + c], x[x7 + c]);
            s45 += v45 * av;
            s67 += v67 * av;
{{- if .Norm}}
            q45 += v45 * v45;
            q67 += v67 * v67;
{{- end}}
        }
    }
    var sums = array<f32, 8>(s01.x, s01.y, s23.x, s23.y, s45.x, s45.y, s67.x, s67.y);
{{- if .Norm}}
    var squares = array<f32, 8>(q01.x, q01.y, q23.x, q23.y, q45.x, q45.y, q67.x, q67.y);
{{- end}}
    for (var i = 0u; i < m; i++) {
{{- if .Norm}}
        h[rs[i] * R + t] = sums[i] / sqrt(squares[i] / f32(p.width) + p.eps);
{{- else}}
        h[rs[i] * R + t] = sums[i];
{{- end}}
    }
}
