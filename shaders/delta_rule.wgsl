// delta_rule: Qwen3.5's gated delta rule, one workgroup per (value head,
// sequence), walking the sequence's rows of the batch in order. Each
// invocation owns rows j of the head's state S (a value dimension each),
// so no row is shared and no reduction crosses invocations: per token,
//
//	S_j = g·S_j;  S_j += k̂·β·(v_j − S_j·k̂);  o_j = S_j·q̂/√D,
//
// q̂ and k̂ l2-normalised, g = exp(softplus(α + dt)·a) and β = sigmoid(β's
// logit). A sequence at position 0 starts from S = 0. A prompt's rows go
// a chunk at a time: the chunk's q and k (up to CHUNK_FLOATS values each)
// wait in workgroup memory, and each invocation carries its row of S in
// registers through the whole chunk, so that S is read and written once a
// chunk rather than three times a token; the arithmetic is the one-step
// form's, in its order. Twin: runtime/cpu DeltaRow.
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
const CHUNK_FLOATS = 1792u; // q and k of a chunk each: 14 KiB of workgroup memory in all
const MAX_CHUNK = 32u;
var<workgroup> q: array<f32, CHUNK_FLOATS>;
var<workgroup> k: array<f32, CHUNK_FLOATS>;
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
        let reset = first && pos[rows[0]] == 0;
        first = false;
        for (var j = lid; j < d; j += WG) {
            let sj = base + j * d;
            var srow: array<f32, MAX_D>;
            for (var i = 0u; i < d; i++) {
                srow[i] = select(state[sj + i], 0.0, reset);
            }
            for (var t = 0u; t < n; t++) {
                let r = rows[t];
                // Every invocation adds the squares in the same order: the
                // same norms everywhere.
                var qq = 0.0;
                var kk = 0.0;
                for (var i = 0u; i < d; i++) {
                    qq += q[t * d + i] * q[t * d + i];
                    kk += k[t * d + i] * k[t * d + i];
                }
                let qn = 1.0 / max(sqrt(qq), p.eps);
                let kn = 1.0 / max(sqrt(kk), p.eps);
                let a = gates[r * 2u * p.vheads + p.vheads + h] + decay[h];
                let sp = select(log(1.0 + exp(a)), a, a > 20.0);
                let g = exp(sp * decay[p.vheads + h]);
                let beta = 1.0 / (1.0 + exp(-gates[r * 2u * p.vheads + h]));
                var sk = 0.0;
                for (var i = 0u; i < d; i++) {
                    srow[i] *= g;
                    sk += srow[i] * (k[t * d + i] * kn);
                }
                let delta = beta * (qkv[r * width + 2u * p.kheads * d + h * d + j] - sk);
                var o = 0.0;
                for (var i = 0u; i < d; i++) {
                    srow[i] += (k[t * d + i] * kn) * delta;
                    o += srow[i] * (q[t * d + i] * qn);
                }
                dst[r * inner + h * d + j] = o * scale;
            }
            for (var i = 0u; i < d; i++) {
                state[sj + i] = srow[i];
            }
        }
        workgroupBarrier(); // q, k and rows are read before the next chunk overwrites them
    }
}
