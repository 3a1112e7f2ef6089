{{define "embed_main"}}
{{- /* The body of every embedding lookup (embed, embed_f16, embed_int4,
embed_int8): invocation i writes value c of row r of dst from row
tokens[r] of the table, if this part of the table holds it. The kernel
declares Params (cols, cap, row0, nrows), dst, tokens and
fn value(row: u32, c: u32) -> f32, value c of row `row` of its part. */}}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * p.cols) { return; }
    let r = i / p.cols;
    let t = u32(tokens[r]);
    if (t < p.row0 || t >= p.row0 + p.nrows) { return; }
    dst[i] = value(t - p.row0, i % p.cols);
}
{{end}}
