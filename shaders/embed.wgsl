// embed: row r of dst = row tokens[r] of the table. A table split into parts
// is dispatched once per part; each part writes the rows whose token it holds.
// Twin: runtime/cpu Backend.Embed.
struct Params { cols: u32, cap: u32, row0: u32, nrows: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<f32>;
@group(0) @binding(4) var<storage, read> tokens: array<i32>;

fn value(row: u32, c: u32) -> f32 { return table[row * p.cols + c]; }
{{template "embed_main" .}}
