// glu: gate = act(gate) * up, in place, act being SiLU (SwiGLU, p.act = 0),
// GELU's tanh approximation (GeGLU, p.act = 1), the sigmoid (Qwen3.5's
// attention gate, p.act = 5) or quick GELU (Gemma 4's vision tower,
// p.act = 6); p.act = 4 is gpt-oss's
// clamped SwiGLU, x·sigmoid(1.702·x)·(clamp(up, -7, 7) + 1) with
// x = min(gate, 7). Twin: runtime/cpu Backend.GLU.
struct Params { cols: u32, cap: u32, act: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> gate: array<f32>;
@group(0) @binding(3) var<storage, read> up: array<f32>;
{{template "act"}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.cols) { return; }
    if (p.act == 4u) {
        let x = min(gate[i], 7.0);
        gate[i] = x / (1.0 + exp(-1.702 * x)) * (clamp(up[i], -7.0, 7.0) + 1.0);
        return;
    }
    gate[i] = act(p.act, gate[i]) * up[i];
}
