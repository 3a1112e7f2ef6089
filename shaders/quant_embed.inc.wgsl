{{define "quant_embed"}}
{{- /* The embedding lookup of the grouped integer tables, int4 (embed_int4)
and int8 (embed_int8). The kernel declares GK, the inputs a group holds,
and fn code(grp: u32, i: u32) -> u32, the code of value i of group grp
(its codes: GK / 8 or GK / 4 words from grp · 4). */}}
struct Params { cols: u32, cap: u32, row0: u32, nrows: u32, groups: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> codes: array<u32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>;
@group(0) @binding(5) var<storage, read> tokens: array<i32>;

fn value(row: u32, c: u32) -> f32 {
    let grp = row * p.groups + c / GK;
    let sm = unpack2x16float(scales[grp]);
    return sm.x * f32(code(grp, c % GK)) + sm.y;
}
{{template "embed_main" .}}
{{end}}
