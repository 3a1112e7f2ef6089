// rope: rotate each head of each row by the row's position. One invocation
// per (row, head, pair). The inverse frequencies come from the host, computed
// as the CPU reference computes them. A multi-axis rotation (Qwen-VL's
// M-RoPE: p.axes = 4) reads four positions a row and turns each pair by
// the one its axis names (the host's axis of each pair follows the
// frequencies and their scale). Twin: runtime/cpu Rope.
struct Params { cols: u32, cap: u32, heads: u32, head_dim: u32, dim: u32, halves: u32, axes: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> x: array<f32>;
@group(0) @binding(3) var<storage, read> freqs: array<f32>;
@group(0) @binding(4) var<storage, read> pos: array<i32>;
{{template "rope" "storage"}}{{template "rope_rotate" "x"}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let half = p.dim / 2u;
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.heads * half) { return; }
    let pair = i % half;
    let head = (i / half) % p.heads;
    let row = i / (half * p.heads);
    var at = pos[row];
    if (p.axes == 4u) {
        at = pos[4u * row + u32(freqs[half + 1u + pair])];
    }
    rotate_x(row * p.cols + head * p.head_dim, pair, half, p.halves, at);
}
