// matmul_int8_gemv: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of an int8 weight (models/dtype Int8), the algorithm of
// matmul_int4_gemv (the body is theirs, quant_gemv.inc.wgsl) over groups
// of 16 inputs: one vec4<u32> of codes (value 4w+i of a group in byte i of
// word w) and one scale word (f16 scale low, f16 min high) a group. 10
// bits a value are read instead of 32. k must be a multiple of 4 (other
// widths: matmul_int8_gemm); a short last group reads only the x values
// below k. Twin: runtime/cpu MatMulQ (kernel.DotQ8, summed in another
// order).
const GV = 4u; // a group: 16 inputs, 4 vec4s

const BYTES = vec4<u32>(0u, 8u, 16u, 24u);
const QS = vec4<f32>(1.0);

// codes4 returns the codes of inputs 4v..4v+3 of a group: the four bytes of
// word v.
fn codes4(code: vec4<u32>, v: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(code[v]) >> BYTES) & vec4<u32>(255u));
}
{{template "quant_gemv" .}}
