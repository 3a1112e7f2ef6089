// embed_quant: row r of dst = row tokens[r] of a grouped integer table
// (the formats of matmul_quant_gemv, quant_formats.inc.wgsl), expanded as
// value = scale·q + min, the Go reference's arithmetic, so the result is
// bit for bit the reference's. A table split into parts is dispatched once
// per part; each part writes the rows whose token it holds. The body is
// quant_embed.inc.wgsl. Twin: runtime/cpu Backend.Embed of a QWeight.
{{template "quant_embed" .}}
