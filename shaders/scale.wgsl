// scale: x = x·s (p.mode = 0) or x = s·tanh(x/s) (p.mode = 1, soft-capping),
// in place. Twins: runtime/cpu Backend.Scale and Backend.Softcap.
struct Params { cols: u32, cap: u32, mode: u32, s: f32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.cols) { return; }
    if (p.mode == 1u) {
        // tanh is ±1 in f32 past ±10; the clamp avoids NaN from exp overflow.
        x[i] = p.s * tanh(clamp(x[i] / p.s, -10.0, 10.0));
    } else {
        x[i] = x[i] * p.s;
    }
}
