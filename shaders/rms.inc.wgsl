{{define "rms"}}
// The reduction rmsnorm and rmsnorm_heads share (needs WG and the binding
// x): one partial sum of squares per invocation, added in a tree in
// workgroup memory.
var<workgroup> partial: array<f32, WG>;

// rms_inv returns 1 / sqrt(mean(x[base .. base + n)²) + eps), summed by the
// WG invocations of the workgroup (this one is lid). Call it in uniform
// control flow: it has barriers.
fn rms_inv(base: u32, n: u32, lid: u32, eps: f32) -> f32 {
    var ss = 0.0;
    for (var c = lid; c < n; c += WG) {
        let v = x[base + c];
        ss += v * v;
    }
    partial[lid] = ss;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { partial[lid] += partial[lid + s]; }
        workgroupBarrier();
    }
    return 1.0 / sqrt(partial[0] / f32(n) + eps);
}
{{end}}
