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
}

override HD: u32 = 64u; // head_dim

const WG = 8u; // a SIMD vector of llvmpipe (256 bits): more workgroups for its threads to share
const D4 = HD / 4u;
const NEG = -3.4028234663852886e38; // the running maximum before any score

{{template "decode_bindings" .}}
{{template "kv_rec" .}}{{template "kv_read" (kvbuf . "kc" "")}}{{template "kv_read" (kvbuf . "vc" "")}}
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
        qv[e] = vec4<f32>(q[qa + 4u * e], q[qa + 4u * e + 1u], q[qa + 4u * e + 2u], q[qa + 4u * e + 3u]);
        o[e] = vec4<f32>(0.0);
    }
    var m = NEG;
    var l = 0.0;
    for (var t = t0; t < t1; t++) {
        let slot = u32(tables[table + t / p.block_size]) * p.block_size + t % p.block_size;
        let kb = kv_rec(slot, kvh, p.kv_heads, D4);
        var s = 0.0;
        for (var e = 0u; e < D4; e++) {
            s += dot(qv[e], kc_raw(kb, e));
        }
        s *= p.scale * kc_scale(kb, D4);
        if (p.softcap > 0.0) {
            // tanh is ±1 in f32 past ±10; the clamp avoids NaN from exp overflow.
            s = p.softcap * tanh(clamp(s / p.softcap, -10.0, 10.0));
        }
        if (s > m) {
            let corr = exp(m - s);
            l *= corr;
            for (var e = 0u; e < D4; e++) {
                o[e] *= corr;
            }
            m = s;
        }
        let e_s = exp(s - m);
        l += e_s;
        let pv = e_s * vc_scale(kb, D4);
        for (var e = 0u; e < D4; e++) {
            o[e] += pv * vc_raw(kb, e);
        }
    }

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
