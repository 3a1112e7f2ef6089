{{define "quant_gemm"}}
{{- /* The tiled GEMM of the grouped integer weights (matmul_quant_gemm):
gemm.inc.wgsl with a k step of 32 inputs, its weight the codes and scale
words of the format (quant_formats.inc.wgsl). The kernel declares fn
load_w (see gemm). */}}
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, groups: u32, tm: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
{{template "quant_format" .}}
{{bindings . 6}}
// TM is the rows of the register block (Params.tm repeats it so that call
// sites with different TM never share a cached pipeline).
override TM: u32 = 4u;
const BK = 32u;
{{template "gemm" .}}
{{end}}
