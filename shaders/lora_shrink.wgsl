// lora_shrink: the first product of unmerged LoRA adapters, grouped by
// adapter (after Punica's "shrink" and S-LoRA's per-adapter batching):
// h[r, t] = x[r, :] · A_j[t, :] for t < rank_j, for each row r whose slot
// j = rows[r].slot is valid (-1: no adapter). a holds the A rows of every
// slot, each slot's being those of all the weights that share the input x
// (q, k and v; gate and up) one after the other, so one dispatch computes
// x·Aᵀ for all of them, for a batch that mixes adapters.
//
// Workgroup (g.x, g.y, g.z) takes slot j = g.z, columns t = 4·(g.x·64 +
// lane) .. +3 of its A, and the g.y-th group of up to MAXM rows among
// those of slot j (found by a scan of the rows: the batch is not sorted by
// adapter). Each slot's A is stored transposed, [k, rank] (rank padded to
// a multiple of 4), so an invocation's four columns at one k are one vec4,
// and the invocations of a workgroup read consecutive vec4s. Each streams
// its columns once, multiplying every vec4 into the sums of all the
// group's rows at once: vec4 accumulators in registers, no branch in the
// loop, each x value loaded once for four columns (on a CPU adapter an x
// load is a gather across the SIMD lanes, though every invocation reads
// the same address). So the rows of one adapter share its reads of A, and
// rows of other adapters or of none cost nothing. MAXM (2, 4 or 8) is the
// host's choice from the most rows any slot has in the step. No workgroup
// memory, no barrier: what a CPU adapter runs best (see matmul.go). h's
// stride is R, the largest rank among the slots. Twin: runtime/cpu's
// AddLoRA (x·Aᵀ by the matmul helper, each row summed in the same order).
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
@group(0) @binding(4) var<storage, read> a: array<vec4<f32>>;
// slots[j]: the first row of slot j's A rows (Aᵀ starts at vec4 off·k/4),
// their count (Σ rank, each padded to a multiple of 4).
@group(0) @binding(6) var<storage, read> slots: array<Slot>;
{{- if .Norm}}
@group(0) @binding(7) var<storage, read> nw: array<f32>;
{{- end}}

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) g: vec3<u32>) {
    if (g.z >= p.nslots) { return; }
    let sl = slots[g.z];
    let t = 4u * (g.x * 64u + lane); // the first of the invocation's four columns
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
    let q = sl.rank / 4u; // vec4s a row of Aᵀ
    var ai = sl.off / 4u * p.width + t / 4u;
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
    for (var c = 0u; c < p.width; c++) {
{{- if .Norm}}
        let av = a[ai] * nw[c];
{{- else}}
        let av = a[ai];
{{- end}}
        ai += q;
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
