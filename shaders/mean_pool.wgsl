// mean_pool: row s of dst = the mean of the rows of x whose sequence is s,
// one invocation per (sequence, column), summing the batch's rows in order
// (zeros for a sequence without rows). Twin: runtime/cpu MeanPool.
struct Params { cols: u32, cap: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> seq: array<i32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= p.cap * p.cols) { return; }
    let s = i32(i / p.cols);
    let c = i % p.cols;
    var sum = 0.0;
    var n = 0u;
    for (var r = 0u; r < step.rows; r++) {
        if (seq[r] == s) {
            sum += x[r * p.cols + c];
            n++;
        }
    }
    var mean = 0.0;
    if (n > 0u) {
        mean = sum * (1.0 / f32(n));
    }
    dst[i] = mean;
}
