// embed_f16: row r of dst = row tokens[r] of an f16 table (halves packed
// two per u32, rows padded to an even length), widened exactly by
// unpack2x16float. A table split into parts is dispatched once per part.
// Twin: runtime/cpu Backend.Embed of a QWeight.
struct Params { cols: u32, cap: u32, row0: u32, nrows: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> table: array<u32>;
@group(0) @binding(4) var<storage, read> tokens: array<i32>;

fn value(row: u32, c: u32) -> f32 {
    let v = unpack2x16float(table[row * ((p.cols + 1u) / 2u) + c / 2u]);
    return select(v.x, v.y, c % 2u == 1u);
}
{{template "embed_main" .}}
