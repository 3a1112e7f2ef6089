// lora_expand: the second product of unmerged LoRA adapters (Punica's
// "expand"), grouped by adapter as lora_shrink: dst[r, o] += rows[r].scale
// · scale_j · Σ_{t < rank_j} h[r, col_j + t] · B_j[o, t] for the rows r
// of slot j, col_j being the first column of this weight in h, where one
// lora_shrink put the products of all the weights that share the input.
// bt is the LoRA's buffer of all its weight parts, which the fused
// projections read too (fusion.inc.wgsl's lora_share): a slot table of 4
// words per (slot, part), off (the vec4 of the part's B row 0), the
// vec4s of a row (the rank padded to a multiple of 4), scale and col,
// then the rows of B, zero past the rank; this dispatch adds part p.k.
// (The rows of B are laid out for the fused epilogue, whose columns read
// a row each; here the lanes' columns stride across them, which makes
// this fallback's loads gathers on CPU adapters.)
//
// Workgroup (g.x, g.y, g.z) takes slot j = g.z, outputs o = g.x·256 +
// lane and the g.y-th group of up to MAXM rows of slot j, found as
// lora_shrink finds them; each invocation reads its column of Bᵀ once for
// all the group's rows (vec2 accumulators, as lora_shrink). Rows without
// an adapter are left alone. Specialised by R, h's stride, and MAXM (as
// lora_shrink). Twin: runtime/cpu's AddLoRA.
{{template "lora" .}}

@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> h: array<f32>;
@group(0) @binding(4) var<storage, read> bt: array<u32>; // f32 bits, behind the table

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) g: vec3<u32>) {
    if (g.z >= p.nslots) { return; }
    let e = 4u * (g.z * p.nw + p.k);
    let sl = Slot(4u * bt[e], 4u * bt[e + 1u], bitcast<f32>(bt[e + 2u]), bt[e + 3u]);
    let o = g.x * 256u + lane;
    if (sl.rank == 0u || o >= p.width) { return; }
    let n = min(p.cap, step.rows);
    let j = i32(g.z);
    var rs: array<u32, 8>;
    let m = slot_rows(j, g.y * MAXM, n, &rs);
    if (m == 0u) { return; }
    let h0 = rs[0] * R + sl.col;
    let h1 = rs[1] * R + sl.col;
    let h2 = rs[2] * R + sl.col;
    let h3 = rs[3] * R + sl.col;
    let h4 = rs[4] * R + sl.col;
    let h5 = rs[5] * R + sl.col;
    let h6 = rs[6] * R + sl.col;
    let h7 = rs[7] * R + sl.col;
    var s01 = vec2<f32>(0.0);
    var s23 = vec2<f32>(0.0);
    var s45 = vec2<f32>(0.0);
    var s67 = vec2<f32>(0.0);
    for (var t = 0u; t < min(sl.rank, R); t++) {
        let bv = bitcast<f32>(bt[sl.off + o * sl.rank + t]);
        s01 += vec2<f32>(h[h0 + t], h[h1 + t]) * bv;
        if (MAXM > 2u) {
            s23 += vec2<f32>(h[h2 + t], h[h3 + t]) * bv;
        }
        if (MAXM > 4u) {
            s45 += vec2<f32>(h[h4 + t], h[h5 + t]) * bv;
            s67 += vec2<f32>(h[h6 + t], h[h7 + t]) * bv;
        }
    }
    var sums = array<f32, 8>(s01.x, s01.y, s23.x, s23.y, s45.x, s45.y, s67.x, s67.y);
    for (var i = 0u; i < m; i++) {
        let at = rs[i] * p.width + o;
        dst[at] = dst[at] + rows[rs[i]].scale * sl.scale * sums[i];
    }
}
