// delta_rule: Qwen3.5's gated delta rule, one workgroup per (value head,
// sequence), walking the sequence's rows of the batch a chunk at a time.
// Each invocation owns rows j of the head's state S (a value dimension
// each), held in registers through the chunk, so no row is shared and S is
// read and written once a chunk. Per token, the recurrence is
//
//	S_j = g·S_j;  S_j += k̂·β·(v_j − S_j·k̂);  o_j = S_j·q̂/√D,
//
// q̂ and k̂ l2-normalised, g = exp(softplus(α + dt)·a) and β = sigmoid(β's
// logit). A sequence at position 0 starts from S = 0.
//
// The chunk's q̂ and k̂ (up to CHUNK_FLOATS values each), β and γ (the
// running sum of log g) are computed once by the workgroup into workgroup
// memory. A chunk of one row (a decoding sequence) then takes the one-step
// form above (twin: runtime/cpu DeltaRow); a chunk of several (a prompt)
// the chunked form (twin: runtime/cpu DeltaChunks, whose comment derives
// it): the workgroup first fills the chunk's lower-triangular matrices
// A[t][s] = β_t·e^(γ_t−γ_s)·k̂_t·k̂_s and M[t][s] = e^(γ_t−γ_s)·q̂_t·k̂_s,
// then each invocation, for its row j, solves u_t = β_t·(v_tj −
// e^(γ_t)·S_j·k̂_t) − Σ_(s<t) A[t][s]·u_s, writes o_tj = (e^(γ_t)·S_j·q̂_t +
// Σ_(s≤t) M[t][s]·u_s)/√D, and ends with S_j = e^(γ_n)·S_j +
// Σ_s e^(γ_n−γ_s)·u_s·k̂_s: three passes over S_j a token where the
// one-step form makes four, none of them waiting on the last token's
// state, and the norms, gates and products of keys shared by the
// workgroup instead of computed by every invocation.
struct Params { kheads: u32, vheads: u32, d: u32, seqs: u32, stride: u32, conv: u32, eps: f32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> qkv: array<f32>;
@group(0) @binding(4) var<storage, read> gates: array<f32>; // per row: β's logits, then α's
@group(0) @binding(5) var<storage, read> decay: array<f32>; // dt, then a
@group(0) @binding(6) var<storage, read_write> state: array<f32>; // this layer's, p.stride floats a slot
@group(0) @binding(7) var<storage, read> pos: array<i32>;
@group(0) @binding(8) var<storage, read> row_seq: array<i32>;
@group(0) @binding(9) var<storage, read> seq_state: array<i32>;

const WG = 64u;
const MAX_D = 512u;
const CHUNK_FLOATS = 1792u; // q̂ and k̂ of a chunk each
const MAX_CHUNK = 16u;
const PAIRS = 136u; // MAX_CHUNK·(MAX_CHUNK+1)/2: a lower triangle with its diagonal, row t at t·(t+1)/2
// 15.7 KiB of workgroup memory in all (WebGPU promises 16).
var<workgroup> q: array<f32, CHUNK_FLOATS>;
var<workgroup> k: array<f32, CHUNK_FLOATS>;
var<workgroup> amat: array<f32, PAIRS>; // A (its diagonal unused)
var<workgroup> mmat: array<f32, PAIRS>; // M
var<workgroup> beta: array<f32, MAX_CHUNK>;
var<workgroup> gam: array<f32, MAX_CHUNK>;
var<workgroup> qn: array<f32, MAX_CHUNK>;
var<workgroup> kn: array<f32, MAX_CHUNK>;
var<workgroup> rows: array<u32, MAX_CHUNK>; // the chunk's rows of the batch
var<workgroup> count: u32;                  // how many
var<workgroup> next: u32;                   // where the search for the next chunk resumes

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let s = wid.y;
    let d = p.d;
    let kh = h % p.kheads;
    let width = (2u * p.kheads + p.vheads) * d; // a row of qkv
    let inner = p.vheads * d;
    let base = u32(seq_state[s]) * p.stride + p.conv + h * d * d; // S of head h
    let scale = 1.0 / sqrt(f32(d));
    let chunk = clamp(CHUNK_FLOATS / d, 1u, MAX_CHUNK);
    if (lid == 0u) { next = 0u; }
    var first = true;
    loop {
        // The next chunk of the sequence's rows, found by one invocation.
        if (lid == 0u) {
            var c = 0u;
            var r = next;
            for (; r < step.rows && c < chunk; r++) {
                if (u32(row_seq[r]) == s) {
                    rows[c] = r;
                    c++;
                }
            }
            count = c;
            next = r;
        }
        let n = workgroupUniformLoad(&count);
        if (n == 0u) { break; }
        for (var i = lid; i < n * d; i += WG) {
            let row = rows[i / d] * width;
            q[i] = qkv[row + kh * d + i % d];
            k[i] = qkv[row + (p.kheads + kh) * d + i % d];
        }
        workgroupBarrier();
        // Row t's norms (summed in order, as the twins' L2Scale), β and log g.
        if (lid < n) {
            var qq = 0.0;
            var kk = 0.0;
            for (var i = 0u; i < d; i++) {
                qq += q[lid * d + i] * q[lid * d + i];
                kk += k[lid * d + i] * k[lid * d + i];
            }
            qn[lid] = 1.0 / max(sqrt(qq), p.eps);
            kn[lid] = 1.0 / max(sqrt(kk), p.eps);
            let r = rows[lid];
            let a = gates[r * 2u * p.vheads + p.vheads + h] + decay[h];
            let sp = select(log(1.0 + exp(a)), a, a > 20.0);
            gam[lid] = sp * decay[p.vheads + h];
            beta[lid] = 1.0 / (1.0 + exp(-gates[r * 2u * p.vheads + h]));
        }
        workgroupBarrier();
        for (var i = lid; i < n * d; i += WG) {
            q[i] *= qn[i / d];
            k[i] *= kn[i / d];
        }
        if (lid == 0u) {
            for (var t = 1u; t < n; t++) { gam[t] += gam[t - 1u]; }
        }
        workgroupBarrier();
        if (n > 1u) {
            for (var e = lid; e < n * n; e += WG) {
                let t = e / n;
                let u = e % n;
                if (u <= t) {
                    var kk = 0.0;
                    var qk = 0.0;
                    for (var i = 0u; i < d; i++) {
                        kk += k[t * d + i] * k[u * d + i];
                        qk += q[t * d + i] * k[u * d + i];
                    }
                    let decayed = exp(gam[t] - gam[u]);
                    amat[t * (t + 1u) / 2u + u] = beta[t] * decayed * kk;
                    mmat[t * (t + 1u) / 2u + u] = decayed * qk;
                }
            }
            workgroupBarrier();
        }
        let reset = first && pos[rows[0]] == 0;
        first = false;
        for (var j = lid; j < d; j += WG) {
            let sj = base + j * d;
            var srow: array<f32, MAX_D>;
            for (var i = 0u; i < d; i++) {
                srow[i] = select(state[sj + i], 0.0, reset);
            }
            if (n == 1u) {
                // The one-step form.
                let g = exp(gam[0]);
                var sk = 0.0;
                for (var i = 0u; i < d; i++) {
                    srow[i] *= g;
                    sk += srow[i] * k[i];
                }
                let delta = beta[0] * (qkv[rows[0] * width + 2u * p.kheads * d + h * d + j] - sk);
                var o = 0.0;
                for (var i = 0u; i < d; i++) {
                    srow[i] += k[i] * delta;
                    o += srow[i] * q[i];
                }
                dst[rows[0] * inner + h * d + j] = o * scale;
            } else {
                // The chunked form.
                var u: array<f32, MAX_CHUNK>;
                for (var t = 0u; t < n; t++) {
                    var ks = 0.0;
                    var qs = 0.0;
                    for (var i = 0u; i < d; i++) {
                        ks += srow[i] * k[t * d + i];
                        qs += srow[i] * q[t * d + i];
                    }
                    let et = exp(gam[t]);
                    let at = t * (t + 1u) / 2u;
                    var r = beta[t] * (qkv[rows[t] * width + 2u * p.kheads * d + h * d + j] - et * ks);
                    for (var v = 0u; v < t; v++) { r -= amat[at + v] * u[v]; }
                    u[t] = r;
                    var o = et * qs;
                    for (var v = 0u; v <= t; v++) { o += mmat[at + v] * u[v]; }
                    dst[rows[t] * inner + h * d + j] = o * scale;
                }
                let last = gam[n - 1u];
                for (var v = 0u; v < n; v++) { u[v] *= exp(last - gam[v]); }
                let el = exp(last);
                for (var i = 0u; i < d; i++) {
                    var x = srow[i] * el;
                    for (var v = 0u; v < n; v++) { x += u[v] * k[v * d + i]; }
                    srow[i] = x;
                }
            }
            for (var i = 0u; i < d; i++) {
                state[sj + i] = srow[i];
            }
        }
        workgroupBarrier(); // q, k, the matrices and rows are read before the next chunk overwrites them
    }
}
