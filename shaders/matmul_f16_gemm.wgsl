// matmul_f16_gemm: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of an f16 weight (halves packed two per u32, rows padded to an
// even length: row j starts at word j·((k + 1) / 2)) and the first
// min(cap, step.rows) rows r of x. The tiled GEMM of matmul_gemm: each
// 16-wide k step copies a BM×16 tile of x and expands a 64×16 tile of w
// (each word of w, two values, is unpacked once per step with
// unpack2x16float) into workgroup memory; zeros outside the matrices make
// any M, K and N work. With F16 (shader-f16) the words are read as
// vec2<f16> and the tile of w stays in f16 (gemm.inc.wgsl): half its
// workgroup memory, the same values. Twin: runtime/cpu MatMulQ.
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, tm: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<{{if .F16}}vec2<f16>{{else}}u32{{end}}>;
{{bindings . 5}}
override TM: u32 = 4u;
const BK = 16u;

// load_w: 64 columns × 8 words of 2 halves, two words per invocation.
fn load_w(k0: u32, c0: u32, t: u32, wb: u32) {
    let stride = (p.k + 1u) / 2u;
    for (var e = t; e < BN * BK / 2u; e += 256u) {
        let c = e / 8u;
        let wi = e % 8u;
        let col = c0 + c;
        let k = k0 + 2u * wi;
        var v = vec2<{{if .F16}}f16{{else}}f32{{end}}>(0.0, 0.0);
        if (col < p.nrows && k < p.k) {
            v = {{if .F16}}w[(wb + col) * stride + k / 2u]{{else}}unpack2x16float(w[(wb + col) * stride + k / 2u]){{end}};
            if (k + 1u >= p.k) { v.y = 0.0; }
        }
        ws[(2u * wi) * WS + c] = v.x;
        ws[(2u * wi + 1u) * WS + c] = v.y;
    }
}
{{template "gemm" .}}