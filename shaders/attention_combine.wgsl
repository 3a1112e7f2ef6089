// attention_combine: merges the per-chunk partials of attention_decode into
// the output, one workgroup per (head, row) (workgroup_id.x, .y), the
// invocations over the head dims. Twin: runtime/cpu AttendHead (the
// softmax-weighted sum over all positions) as split by attention_decode.
//
// Chunk c holds its own maximum m_c, sum l_c = Σ exp(s - m_c) and
// o_c = Σ exp(s - m_c)·v. With M = max m_c the whole is
//     o = Σ_c exp(m_c - M)·o_c / Σ_c exp(m_c - M)·l_c.
// An empty chunk (m_c at the float minimum, l_c = 0) weighs nothing.
// part's layout is described in attention_decode.wgsl; the combine takes
// the rows whose flag is p.kind (1 after attention_decode, 0 after
// attention_prefill). With p.sinks, head h's sink logit sinks[h] joins the
// softmax as one more term without a value (gpt-oss): M takes it in and
// the denominator adds exp(sink - M); Attend always splits such rows so
// that they pass through here.
struct Params { heads: u32, head_dim: u32, cap: u32, base: u32, kind: f32, sinks: u32 }

const WG = 64u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> part: array<f32>;
@group(0) @binding(4) var<storage, read> sinks: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let h = wid.x;
    let row = wid.y;
    let nrows = min(p.cap, step.rows);
    if (row >= nrows || part[row] != p.kind) { return; }
    let hd = p.head_dim;
    let chunks = u32(part[p.base]);
    let first = row * p.heads + h; // E of chunk 0; chunk c is c·stride further
    let stride = nrows * p.heads;
    let o_base = p.base + 1u + 2u * chunks * stride;
    var mx = -3.4028234663852886e38;
    for (var c = 0u; c < chunks; c++) {
        mx = max(mx, part[p.base + 1u + 2u * (first + c * stride)]);
    }
    var sum = 0.0;
    if (p.sinks == 1u) {
        mx = max(mx, sinks[h]);
        sum = exp(sinks[h] - mx);
    }
    for (var c = 0u; c < chunks; c++) {
        let at = p.base + 1u + 2u * (first + c * stride);
        sum += part[at + 1u] * exp(part[at] - mx);
    }
    for (var d = tid; d < hd; d += WG) {
        var o = 0.0;
        for (var c = 0u; c < chunks; c++) {
            let e = first + c * stride;
            o += part[o_base + e * hd + d] * exp(part[p.base + 1u + 2u * e] - mx);
        }
        dst[(row * p.heads + h) * hd + d] = o / sum;
    }
}
