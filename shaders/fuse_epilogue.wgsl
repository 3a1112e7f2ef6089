// fuse_epilogue: the epilogue of a fused matrix product whose kernel has
// none of its own (the tiled GEMMs, the naive kernel, f16 weights): y holds
// the product, width columns a row, and every column (or pair of columns,
// with Pairs) of the first min(cap, step.rows) rows goes through the
// fusion's emit (fusion.inc.wgsl). Twin: runtime/cpu Backend.Project.
struct Params { width: u32, cap: u32, n: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> y: array<f32>;
{{bindings . 4}}{{template "fusion" .}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
{{- if .Pairs}}
    let units = p.width / 2u;
{{- else}}
    let units = p.width;
{{- end}}
    if (i >= min(p.cap, step.rows) * units) { return; }
    let r = i / units;
    let at = r * p.width;
{{- if .Pairs}}
    let c = 2u * (i % units);
    emit_pair(r, c, y[at + c], y[at + c + 1u]);
{{- else}}
    let c = i % units;
    emit(r, c, y[at + c]);
{{- end}}
}
