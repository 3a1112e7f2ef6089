// embed_int8: row r of dst = row tokens[r] of an int8 table (layout: see
// matmul_int8_gemv), expanded bit for bit as the Go reference does, as
// embed_int4 does for int4 (the body is theirs, quant_embed.inc.wgsl).
// Twin: runtime/cpu Backend.Embed of a QWeight.
const GK = 16u;

fn code(grp: u32, i: u32) -> u32 {
    return (codes[grp * 4u + i / 4u] >> (8u * (i % 4u))) & 255u;
}
{{template "quant_embed" .}}
