// attention_lane: attention_decode's form for CPU adapters (lavapipe),
// where a workgroup's invocations are the SIMD lanes of one thread and a
// barrier switches between them. It takes the same rows (those flagged 1 in
// part), the same chunks of each row's positions and writes the same
// partials for attention_combine, but one invocation does all the work of
// one (row, query head, chunk), with no workgroup memory and no barrier:
// it walks the chunk position by position with an online softmax (the
// running maximum m, the sum l = Σ exp(s - m) and o = Σ exp(s - m)·v, o
// and l rescaled by exp(m_old - m) when m grows), the query and o held in
// registers. Lanes are neighbouring heads of a row, then rows, so that the
// heads of a GQA group read one key record together. Twin: runtime/cpu
// AttendHead, as attention_decode's.
//
// With Rope (backend.RopeAttend) it also does rope_kv's work for its rows,
// so that a decoding step's attention is one dispatch, not two: q, k and v
// are the projection's, unrotated; each invocation rotates its query head
// in registers, and its kv head's key of the row's own position, codes
// that key and value as the cache stores them (kv_pack) and attends to
// that position from the registers (kv_unpack), the other positions from
// the cache. The invocation of the group's first head whose chunk holds
// the row's own position stores the records to the row's slot. Every row
// must attend to no position that another row of the step stores
// (runtime/gpu keeps this form for one row a sequence, on SwiftShader): no invocation
// reads a record that this dispatch writes. The frequencies come as a
// uniform and the slot from the block table, so that the kernel binds 10
// storage buffers, as many as the engine asks a device for. Twin:
// runtime/cpu RopeStore then AttendHead.
//
// Positions, windows, block tables, the cache's records (kv.inc.wgsl) and
// part's layout are attention_decode's; p.slices is unused. head_dim must
// be a multiple of 4, and the kernel is specialised to it (HD). The loops
// over a head's vec4s have a constant trip count; runtime/gpu/attention.go
// keeps a chunk within llvmpipe's loop budget (laneSpan) in case they are
// not unrolled.
struct Params {
    heads: u32, kv_heads: u32, head_dim: u32, cap: u32, scale: f32,
    block_size: u32, table_width: u32, slices: u32, base: u32,
    softcap: f32, window: u32,
    rot: u32, halves: u32, slots: u32, // Rope: rotated values a head, rope's layout, the cache's slots
}

override HD: u32 = 64u; // head_dim

const WG = 8u; // a SIMD vector of llvmpipe (256 bits): more workgroups for its threads to share
const D4 = HD / 4u;
const NEG = -3.4028234663852886e38; // the running maximum before any score

{{template "decode_bindings" .}}
{{- if .Rope}}
@group(0) @binding(10) var<storage, read> k: array<f32>;
@group(0) @binding(11) var<storage, read> v: array<f32>;
@group(0) @binding(12) var<uniform> freqs: array<vec4<f32>, 65>; // room for heads of 512
{{template "rope" "uniform"}}{{template "rope_value" "q"}}{{template "rope_value" "k"}}
{{- end}}
{{template "kv_rec" .}}{{template "kv_read" (kvbuf . "kc" "")}}{{template "kv_read" (kvbuf . "vc" "")}}
// capped is score s after the softcap, if any.
fn capped(s: f32) -> f32 {
    if (p.softcap > 0.0) {
        // tanh is ±1 in f32 past ±10; the clamp avoids NaN from exp overflow.
        return p.softcap * tanh(clamp(s / p.softcap, -10.0, 10.0));
    }
    return s;
}

// absorb folds score s into the running maximum m and sum l, rescaling o
// when m grows, and returns the position's weight exp(s - m).
fn absorb(s: f32, m: ptr<function, f32>, l: ptr<function, f32>, o: ptr<function, array<vec4<f32>, D4>>) -> f32 {
    if (s > *m) {
        let corr = exp(*m - s);
        *l *= corr;
        for (var e = 0u; e < D4; e++) {
            (*o)[e] *= corr;
        }
        *m = s;
    }
    let e_s = exp(s - *m);
    *l += e_s;
    return e_s;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let row = gid.x / p.heads;
    let h = gid.x % p.heads;
    let nrows = min(p.cap, step.rows);
    if (row >= nrows || part[row] != 1.0) { return; }
    let kvh = h / (p.heads / p.kv_heads);
    let qdim = p.heads * HD;

    let chunk = gid.y;
{{template "chunk_span"}}

    let qa = row * qdim + h * HD;
    var qv: array<vec4<f32>, D4>;
    var o: array<vec4<f32>, D4>;
    for (var e = 0u; e < D4; e++) {
{{- if .Rope}}
        let d = 4u * e;
        let half = p.rot / 2u;
        qv[e] = vec4<f32>(rope_q(qa, d, half, p.halves, pos[row]), rope_q(qa, d + 1u, half, p.halves, pos[row]),
            rope_q(qa, d + 2u, half, p.halves, pos[row]), rope_q(qa, d + 3u, half, p.halves, pos[row]));
{{- else}}
        qv[e] = vec4<f32>(q[qa + 4u * e], q[qa + 4u * e + 1u], q[qa + 4u * e + 2u], q[qa + 4u * e + 3u]);
{{- end}}
        o[e] = vec4<f32>(0.0);
    }
    var m = NEG;
    var l = 0.0;
    var last = t1; // the positions read from the cache end here
{{- if .Rope}}
    // The row's own position, n - 1, comes from k and v: its key rotated,
    // both coded as the cache keeps them.
    let own = n - 1u;
    last = min(t1, own);
    var kn: array<vec4<f32>, D4>;
    var vn: array<vec4<f32>, D4>;
    let ka = (row * p.kv_heads + kvh) * HD;
    var kmax = 0.0;
    var vmax = 0.0;
    for (var e = 0u; e < D4; e++) {
        let d = 4u * e;
        let half = p.rot / 2u;
        kn[e] = vec4<f32>(rope_k(ka, d, half, p.halves, pos[row]), rope_k(ka, d + 1u, half, p.halves, pos[row]),
            rope_k(ka, d + 2u, half, p.halves, pos[row]), rope_k(ka, d + 3u, half, p.halves, pos[row]));
        vn[e] = vec4<f32>(v[ka + d], v[ka + d + 1u], v[ka + d + 2u], v[ka + d + 3u]);
        let ak = abs(kn[e]);
        let av = abs(vn[e]);
        kmax = max(kmax, max(max(ak.x, ak.y), max(ak.z, ak.w)));
        vmax = max(vmax, max(max(av.x, av.y), max(av.z, av.w)));
    }
    let mine = t0 <= own && own < t1; // this chunk holds it (an empty one past the end does not)
    let own_slot = u32(tables[table + own / p.block_size]) * p.block_size + own % p.block_size;
    let stores = mine && h % (p.heads / p.kv_heads) == 0u && own_slot < p.slots;
    let rec = kv_rec(own_slot, kvh, p.kv_heads, D4);
    for (var e = 0u; e < D4; e++) {
        let kw = kv_pack(kn[e], kmax);
        let vw = kv_pack(vn[e], vmax);
        if (stores) {
            kc[rec + e] = kw;
            vc[rec + e] = vw;
        }
        kn[e] = kv_unpack(kw);
        vn[e] = kv_unpack(vw);
    }
{{- if eq .KV "int8"}}
    if (stores) {
        kc[rec + D4] = bitcast<u32>(kv_unit(kmax));
        vc[rec + D4] = bitcast<u32>(kv_unit(vmax));
    }
{{- end}}
{{- end}}
    for (var t = t0; t < last; t++) {
        let slot = u32(tables[table + t / p.block_size]) * p.block_size + t % p.block_size;
        let kb = kv_rec(slot, kvh, p.kv_heads, D4);
        var s = 0.0;
        for (var e = 0u; e < D4; e++) {
            s += dot(qv[e], kc_raw(kb, e));
        }
        let pv = absorb(capped(s * (p.scale * kc_scale(kb, D4))), &m, &l, &o) * vc_scale(kb, D4);
        for (var e = 0u; e < D4; e++) {
            o[e] += pv * vc_raw(kb, e);
        }
    }
{{- if .Rope}}
    if (mine) {
        var s = 0.0;
        for (var e = 0u; e < D4; e++) {
            s += dot(qv[e], kn[e]);
        }
        let pv = absorb(capped(s * (p.scale * kv_unit(kmax))), &m, &l, &o) * kv_unit(vmax);
        for (var e = 0u; e < D4; e++) {
            o[e] += pv * vn[e];
        }
    }
{{- end}}

    if (chunks == 1u) {
        for (var e = 0u; e < D4; e++) {
            let v = o[e] / l;
            for (var c = 0u; c < 4u; c++) {
                dst[qa + 4u * e + c] = v[c];
            }
        }
        return;
    }
    if (h == 0u && chunk == 0u) {
        part[p.base] = f32(chunks); // by each row's first lane: some rows are not taken
    }
    let at = (chunk * nrows + row) * p.heads + h; // E of (row, h, chunk)
    part[p.base + 1u + 2u * at] = m;
    part[p.base + 2u + 2u * at] = l;
    let ob = p.base + 1u + 2u * chunks * nrows * p.heads + at * HD;
    for (var e = 0u; e < D4; e++) {
        for (var c = 0u; c < 4u; c++) {
            part[ob + 4u * e + c] = o[e][c];
        }
    }
}
