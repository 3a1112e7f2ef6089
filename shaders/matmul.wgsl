// matmul: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of one weight
// part. One invocation per output element; the simplest correct kernel, the
// baseline the tuned ones (matmul_gemv, matmul_gemm) are measured against
// (MatMul picks it only on CPU adapters, for widths GEMV cannot take).
// Twin: runtime/cpu MatMul.
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.nrows) { return; }
    let r = i / p.nrows;
    let j = i % p.nrows;
    var s = 0.0;
    for (var c = 0u; c < p.k; c++) {
        s += x[r * p.k + c] * w[j * p.k + c];
    }
    dst[r * p.n + p.col0 + j] = s;
}
