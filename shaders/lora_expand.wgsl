// lora_expand: the second product of unmerged LoRA adapters (Punica's
// "expand"), grouped by adapter as lora_shrink: dst[r, o] += rows[r].scale
// · scale_j · Σ_{t < rank_j} h[r, col_j + t] · B_j[o, t] for the rows r
// of slot j, col_j being the first column of this weight in h, where one
// lora_shrink put the products of all the weights that share the input.
// bt is the LoRA's buffer of all its weight parts, which the fused
// projections read too (fusion.inc.wgsl's lora_share): a slot table of an
// entry per (slot, part), off (the element of the part's B row 0), the
// quads of a row (the rank padded to a multiple of 4), scale and col,
// then the rows of B, zero past the rank, a quad of four values an
// element (lora_values); this dispatch adds part p.k.
// (The rows of B are laid out for the fused epilogue, whose columns read
// a row each; here the lanes' columns stride across them, which makes
// this fallback's loads gathers on CPU adapters.)
//
// Workgroup (g.x, g.y, g.z) takes slot j = g.z, outputs o = g.x·256 +
// lane and the g.y-th group of up to MAXM rows of slot j, found as
// lora_shrink finds them; each invocation reads its column of Bᵀ once for
// all the group's rows, a quad at a time. Rows without
// an adapter are left alone. Specialised by R, h's stride, and MAXM (as
// lora_shrink). Twin: runtime/cpu's AddLoRA.
{{template "lora" .}}

@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> h: array<f32>;
@group(0) @binding(4) var<storage, read> bt: array<{{template "lora_quad" .}}>;
{{template "lora_values" (values . "bt")}}

// h4 is the quad of h at i (h is bound as f32s, as lora_gather writes it).
fn h4(i: u32) -> vec4<f32> {
    return vec4<f32>(h[i], h[i + 1u], h[i + 2u], h[i + 3u]);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lane: u32, @builtin(workgroup_id) g: vec3<u32>) {
    if (g.z >= p.nslots) { return; }
    let e = bt_entry(g.z * p.nw + p.k);
    let sl = Slot(e.x, e.y, bitcast<f32>(e.z), e.w);
    let o = g.x * 256u + lane;
    if (sl.rank == 0u || o >= p.width) { return; }
    let n = min(p.cap, step.rows);
    let j = i32(g.z);
    var rs: array<u32, 8>;
    let m = slot_rows(j, g.y * MAXM, n, &rs);
    if (m == 0u) { return; }
    let r0 = rs[0] * R + sl.col;
    let r1 = rs[1] * R + sl.col;
    let r2 = rs[2] * R + sl.col;
    let r3 = rs[3] * R + sl.col;
    let r4 = rs[4] * R + sl.col;
    let r5 = rs[5] * R + sl.col;
    let r6 = rs[6] * R + sl.col;
    let r7 = rs[7] * R + sl.col;
    var s0 = 0.0;
    var s1 = 0.0;
    var s2 = 0.0;
    var s3 = 0.0;
    var s4 = 0.0;
    var s5 = 0.0;
    var s6 = 0.0;
    var s7 = 0.0;
    for (var t = 0u; t < min(sl.rank, R / 4u); t++) {
        let bv = bt_quad(sl.off + o * sl.rank + t);
        let u = 4u * t;
        s0 += dot(h4(r0 + u), bv);
        s1 += dot(h4(r1 + u), bv);
        if (MAXM > 2u) {
            s2 += dot(h4(r2 + u), bv);
            s3 += dot(h4(r3 + u), bv);
        }
        if (MAXM > 4u) {
            s4 += dot(h4(r4 + u), bv);
            s5 += dot(h4(r5 + u), bv);
            s6 += dot(h4(r6 + u), bv);
            s7 += dot(h4(r7 + u), bv);
        }
    }
    var sums = array<f32, 8>(s0, s1, s2, s3, s4, s5, s6, s7);
    for (var i = 0u; i < m; i++) {
        let at = rs[i] * p.width + o;
        dst[at] = dst[at] + rows[rs[i]].scale * sl.scale * sums[i];
    }
}
