{{define "rms"}}
// The reduction rmsnorm and rmsnorm_heads share (needs WG and the binding
// x): one partial sum of squares per invocation, added by wg_sum.
{{template "reduce" .}}

// rms_inv returns 1 / sqrt(mean(x[base .. base + n)²) + eps), summed by the
// WG invocations of the workgroup (this one is lid). Call it in uniform
// control flow: it has barriers.
fn rms_inv(base: u32, n: u32, lid: u32, eps: f32) -> f32 {
    var ss = 0.0;
    for (var c = lid; c < n; c += WG) {
        let v = x[base + c];
        ss += v * v;
    }
    return 1.0 / sqrt(wg_sum(ss, lid) / f32(n) + eps);
}
{{end}}
