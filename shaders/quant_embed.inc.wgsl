{{define "quant_embed"}}
{{- /* The embedding lookup of the grouped integer tables (embed_quant),
the format's (quant_formats.inc.wgsl) group loaded for each value. */}}
struct Params { cols: u32, cap: u32, row0: u32, nrows: u32, groups: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> tokens: array<i32>;
{{template "quant_format" .}}

fn value(row: u32, c: u32) -> f32 {
    let g = grp(row, c / GK);
    let i = c % GK;
    let q = (codes4(g, i / 4u) * QS)[i % 4u];
    var s = g.s.x;
    var m = g.s.z;
    if (HALVES && i >= GK / 2u) {
        s = g.s.y;
        m = g.s.w;
    }
    if (!MINS) {
        return s * q;
    }
    return s * q + m;
}
{{template "embed_main" .}}
{{end}}
