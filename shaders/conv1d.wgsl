// conv1d: Qwen3.5's short causal convolution, dst = silu(Σ_t w[c][t]·x_c
// over the last p.taps inputs of channel c), one invocation per (channel,
// sequence), walking the sequence's rows of the batch in order. The inputs
// before the batch come from the sequence's state (zeros at position 0),
// which then keeps its last taps-1 inputs, oldest first. Twin:
// runtime/cpu ConvRows.
struct Params { channels: u32, taps: u32, seqs: u32, stride: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<f32>;
@group(0) @binding(5) var<storage, read_write> state: array<f32>; // this layer's, p.stride floats a slot
@group(0) @binding(6) var<storage, read> pos: array<i32>;
@group(0) @binding(7) var<storage, read> row_seq: array<i32>;
@group(0) @binding(8) var<storage, read> seq_state: array<i32>;

const MAX_TAPS = 16u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let c = id.x;
    let s = id.y;
    if (c >= p.channels || s >= p.seqs) { return; }
    let base = u32(seq_state[s]) * p.stride;
    var window: array<f32, MAX_TAPS>; // the last taps inputs, oldest first
    var first = true;
    for (var r = 0u; r < step.rows; r++) {
        if (u32(row_seq[r]) != s) { continue; }
        if (first) {
            first = false;
            for (var t = 0u; t + 1u < p.taps; t++) {
                window[t] = select(state[base + t * p.channels + c], 0.0, pos[r] == 0);
            }
        }
        window[p.taps - 1u] = x[r * p.channels + c];
        var sum = 0.0;
        for (var t = 0u; t < p.taps; t++) {
            sum += w[c * p.taps + t] * window[t];
        }
        dst[r * p.channels + c] = sum * (1.0 / (1.0 + exp(-sum)));
        for (var t = 0u; t + 1u < p.taps; t++) {
            window[t] = window[t + 1u];
        }
    }
    if (first) { return; } // no rows this step: the state stays
    for (var t = 0u; t + 1u < p.taps; t++) {
        state[base + t * p.channels + c] = window[t];
    }
}
