// matmul_f16_gemv: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of an f16 weight and a block of up to MAXM rows r of x (block
// g.z), as matmul_gemv does for f32 weights, reading half the bytes.
//
// The weight is halves packed two per u32, the lower index in the low half;
// with k % 4 == 0 (required, else matmul_f16_gemm) a row is k / 4 vec2<u32>
// chunks of four values, which unpack2x16float expands exactly (WGSL here
// has no f16 type). The TPC invocations of a column take chunks lane,
// lane + TPC, ...; partial sums per row of the block are added in a tree in
// workgroup memory, or not at all with TPC = 1 (CPU adapters).
// Twin: runtime/cpu MatMulQ (summed in another order).
// With Experts (fusion.inc.wgsl's block template) block g.z is instead a
// group of (row, slot) pairs that chose one expert, whose rows of the
// stacked weight it reads: the experts' products of a mixture of experts.
//
// With F16 (shader-f16) the halves are read as vec4<f16>, the same bytes,
// and the products are in f16 (float_gemv).
const U = 2u; // loads in flight an iteration
override TPC: u32 = 16u;
{{- if .F16}}
alias WT = vec4<f16>;

fn wload(i: u32) -> WV { return w[i]; }
{{- else}}
alias WT = vec2<u32>;

// wload expands four halves exactly (unpack2x16float).
fn wload(i: u32) -> WV {
    let v = w[i];
    return vec4<f32>(unpack2x16float(v.x), unpack2x16float(v.y));
}
{{- end}}
{{template "float_gemv" .}}