// delta_rule: Qwen3.5's gated delta rule, one workgroup per (value head,
// sequence), walking the sequence's rows of the batch in order. Each
// invocation owns rows j of the head's state S (a value dimension each),
// so no row is shared and no reduction crosses invocations: per token,
//
//	S_j = g·S_j;  S_j += k̂·β·(v_j − S_j·k̂);  o_j = S_j·q̂/√D,
//
// q̂ and k̂ l2-normalised (in workgroup memory), g = exp(softplus(α + dt)·a)
// and β = sigmoid(β's logit). A sequence at position 0 starts from S = 0.
// Twin: runtime/cpu DeltaRow.
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
var<workgroup> q: array<f32, MAX_D>;
var<workgroup> k: array<f32, MAX_D>;
var<workgroup> mine: u32; // whether the row belongs to this workgroup's sequence

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
    var first = true;
    for (var r = 0u; r < step.rows; r++) {
        if (lid == 0u) { mine = u32(u32(row_seq[r]) == s); }
        if (workgroupUniformLoad(&mine) == 0u) { continue; }
        let row = r * width;
        for (var i = lid; i < d; i += WG) {
            q[i] = qkv[row + kh * d + i];
            k[i] = qkv[row + (p.kheads + kh) * d + i];
        }
        workgroupBarrier();
        // Every invocation adds the squares in the same order: the same
        // norms everywhere.
        var qq = 0.0;
        var kk = 0.0;
        for (var i = 0u; i < d; i++) {
            qq += q[i] * q[i];
            kk += k[i] * k[i];
        }
        let qn = 1.0 / max(sqrt(qq), p.eps);
        let kn = 1.0 / max(sqrt(kk), p.eps);
        let a = gates[r * 2u * p.vheads + p.vheads + h] + decay[h];
        let sp = select(log(1.0 + exp(a)), a, a > 20.0);
        let g = exp(sp * decay[p.vheads + h]);
        let beta = 1.0 / (1.0 + exp(-gates[r * 2u * p.vheads + h]));
        let reset = first && pos[r] == 0;
        first = false;
        for (var j = lid; j < d; j += WG) {
            let sj = base + j * d;
            var sk = 0.0;
            for (var i = 0u; i < d; i++) {
                let v = select(state[sj + i], 0.0, reset) * g;
                state[sj + i] = v;
                sk += v * (k[i] * kn);
            }
            let delta = beta * (qkv[row + 2u * p.kheads * d + h * d + j] - sk);
            var o = 0.0;
            for (var i = 0u; i < d; i++) {
                let v = state[sj + i] + (k[i] * kn) * delta;
                state[sj + i] = v;
                o += v * (q[i] * qn);
            }
            dst[r * inner + h * d + j] = o * scale;
        }
        workgroupBarrier(); // q and k are read before the next row overwrites them
    }
}
