// embed_int4: row r of dst = row tokens[r] of an int4 table (layout: see
// matmul_int4_gemv), expanded as value = scale·q + min, the Go reference's
// arithmetic, so the result is bit for bit the reference's. A table split
// into parts is dispatched once per part; each part writes the rows whose
// token it holds. The body is quant_embed.inc.wgsl, shared with
// embed_int8. Twin: runtime/cpu Backend.Embed of a QWeight.
const GK = 32u;

fn code(grp: u32, i: u32) -> u32 {
    return (codes[grp * 4u + i / 8u] >> (4u * (i % 8u))) & 15u;
}
{{template "quant_embed" .}}
