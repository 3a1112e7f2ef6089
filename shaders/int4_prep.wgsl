// int4_prep: prepares the rows of x for matmul_int4_gemv. For row r and
// group g (32 inputs) it writes
//
//   xq[(r·groups + g)·32 + c] = x[r, 32g + c] · 2^-sh(c % 8), zero past k,
//   xsum[r·groups + g] = the sum of x[r, 32g .. 32g + 31] (below k),
//
// with sh = 0, 4, 8, ..., 24, 24 for the eight nibbles of a code word. The
// GEMV then multiplies these by the code word masked in place (nibble i
// read as q·2^4i, exact in f32; the top one shifted down by 4 to stay a
// positive i32) instead of shifting every nibble down, and applies scale
// and min once per group: s·Σ q·x + min·Σ x. The scaling by powers of two
// is exact. Twin: none (an internal step of the int4 matmul).
struct Params { k: u32, cap: u32, groups: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> xq: array<f32>;
@group(0) @binding(3) var<storage, read_write> xsum: array<f32>;
@group(0) @binding(4) var<storage, read> x: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 64u;
    if (i >= min(p.cap, step.rows) * p.groups) { return; }
    let r = i / p.groups;
    let g = i % p.groups;
    var s = 0.0;
    for (var c = 0u; c < 32u; c++) {
        let k = g * 32u + c;
        var v = 0.0;
        if (k < p.k) { v = x[r * p.k + k]; }
        s += v;
        xq[i * 32u + c] = ldexp(v, -4 * i32(min(c % 8u, 6u)));
    }
    xsum[i] = s;
}
