// attention_lane_rows: attention_lane's form for many rows, which CPU
// adapters (lavapipe) run for prompt rows: a workgroup's invocations are
// the SIMD lanes of one thread and a barrier switches between them. One
// invocation does all the work of RB
// consecutive rows of the step for one query head and one chunk of their
// positions, with no workgroup memory and no barrier: it walks the chunk
// position by position with an online softmax per row (the running maximum
// m, the sum l = Σ exp(s - m) and o = Σ exp(s - m)·v, o and l rescaled by
// exp(m_old - m) when m grows), the queries and outputs held in registers.
// Lanes are neighbouring heads of a block of rows, then blocks, so that
// the heads of a GQA group read one key record together. Twin: runtime/cpu
// AttendHead, as attention_decode's.
//
// It takes the rows flagged p.kind in part: runtime/gpu gives it the
// prompt rows attention_prefill takes on GPUs (0), RB = 8 (laneRows); the
// decode rows (1) take attention_lane, a kernel of its own, so that a
// decoding step never has llvmpipe compile this one (its loops over RB
// rows took llvmpipe seconds to minutes, by head width and cache type,
// where attention_lane's take a fraction of a second). On llvmpipe every load whose address differs between lanes is a
// loop over the lanes, so what counts is the multiply-adds per load: each
// key and value vec4 read here serves RB rows (RB = 8: 8·4 for a load,
// where attention_prefill's tiles, in workgroup memory, which llvmpipe
// reads the same way, do about 2).
//
// The rows of a block that belong to one sequence share a pass over its
// positions, from the earliest row's window start (p.window > 0) to the
// last row's position, chunk `chunk` of groups.y of that span; each row
// masks the positions it does not see (causal, its window). A block whose
// rows belong to several sequences makes one pass per sequence. Positions,
// windows, block tables, the cache's records (kv.inc.wgsl) and part's
// layout are attention_decode's; p.slices is unused. head_dim must be a
// multiple of 4, and the kernel is specialised to it (HD). The loops over
// a head's vec4s have a constant trip count, and so do the inner loops
// over the RB rows, which llvmpipe unrolls; runtime/gpu/attention.go keeps
// a chunk within llvmpipe's loop budget (laneRowsSpan) in case the loops over
// the vec4s are not unrolled.
struct Params {
    heads: u32, kv_heads: u32, head_dim: u32, cap: u32, scale: f32,
    block_size: u32, table_width: u32, slices: u32, base: u32,
    softcap: f32, window: u32, kind: f32,
}

override HD: u32 = 64u; // head_dim
override RB: u32 = 8u;  // rows an invocation takes (runtime/gpu: laneRows)

const WG = 8u; // a SIMD vector of llvmpipe (256 bits): more workgroups for its threads to share
const D4 = HD / 4u;
const QO = RB * D4;
const NEG = -3.4028234663852886e38; // the running maximum before any score

{{template "decode_bindings" .}}
{{template "kv_rec" .}}{{template "kv_read" (kvbuf . "kc" "")}}{{template "kv_read" (kvbuf . "vc" "")}}
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let r0 = (gid.x / p.heads) * RB;
    let h = gid.x % p.heads;
    let nrows = min(p.cap, step.rows);
    if (r0 >= nrows) { return; }
    let kvh = h / (p.heads / p.kv_heads);
    let qdim = p.heads * HD;
    let chunk = gid.y;
    let chunks = groups.y;

    // taken[i]: whether row r0 + i is this kernel's.
    var taken: array<bool, RB>;
    var some = false;
    for (var i = 0u; i < RB; i++) {
        taken[i] = r0 + i < nrows && part[min(r0 + i, nrows - 1u)] == p.kind;
        some = some || taken[i];
    }
    if (!some) { return; }

    var qv: array<vec4<f32>, QO>; // [i·D4 + e]: row r0 + i's query
    var o: array<vec4<f32>, QO>;
    var m: array<f32, RB>;
    var l: array<f32, RB>;
    for (var i = 0u; i < RB; i++) {
        let qa = min(r0 + i, nrows - 1u) * qdim + h * HD;
        for (var e = 0u; e < D4; e++) {
            qv[i * D4 + e] = vec4<f32>(q[qa + 4u * e], q[qa + 4u * e + 1u], q[qa + 4u * e + 2u], q[qa + 4u * e + 3u]);
            o[i * D4 + e] = vec4<f32>(0.0);
        }
        m[i] = NEG;
        l[i] = 0.0;
    }

    // One pass per sequence among the rows, at the first row of each.
    for (var first = 0u; first < RB; first++) {
        if (!taken[first]) { continue; }
        let sq = seq[r0 + first];
        var fresh = true;
        for (var i = 0u; i < first; i++) {
            if (taken[i] && seq[r0 + i] == sq) { fresh = false; }
        }
        if (!fresh) { continue; }
        // mine[i]: row r0 + i's position if it is of this pass, else -1
        // (it sees nothing); the pass spans [lo, n).
        var mine: array<i32, RB>;
        var n = 0u;
        var lo = 0xffffffffu;
        for (var i = 0u; i < RB; i++) {
            mine[i] = -1;
            if (taken[i] && seq[r0 + i] == sq) {
                mine[i] = pos[r0 + i];
                let ni = min(u32(mine[i]) + 1u, p.table_width * p.block_size);
                n = max(n, ni);
                var li = 0u; // the first position the row sees: its window's
                if (p.window > 0u && ni > p.window) {
                    li = ni - p.window;
                }
                lo = min(lo, li);
            }
        }
        let table = u32(sq) * p.table_width;
        let len = (n - lo + chunks - 1u) / chunks;
        let t0 = min(n, lo + chunk * len);
        let t1 = min(n, t0 + len);

        for (var t = t0; t < t1; t++) {
            let slot = u32(tables[table + t / p.block_size]) * p.block_size + t % p.block_size;
            let kb = kv_rec(slot, kvh, p.kv_heads, D4);
            var kv: array<vec4<f32>, D4>; // the key, then the value: read once for the RB rows
            for (var e = 0u; e < D4; e++) {
                kv[e] = kc_raw(kb, e);
            }
            let ks = p.scale * kc_scale(kb, D4);
            let vs = vc_scale(kb, D4);
            var corr: array<f32, RB>; // the factor of row i's o: 1 unless m grew
            var pv: array<f32, RB>;   // the weight of v in row i's o
            for (var i = 0u; i < RB; i++) {
                corr[i] = 1.0;
                pv[i] = 0.0;
                if (i32(t) <= mine[i] && (p.window == 0u || i32(t) + i32(p.window) > mine[i])) {
                    var si = 0.0;
                    for (var e = 0u; e < D4; e++) {
                        si += dot(qv[i * D4 + e], kv[e]);
                    }
                    si *= ks;
                    if (p.softcap > 0.0) {
                        // tanh is ±1 in f32 past ±10; the clamp avoids NaN from exp overflow.
                        si = p.softcap * tanh(clamp(si / p.softcap, -10.0, 10.0));
                    }
                    if (si > m[i]) {
                        corr[i] = exp(m[i] - si);
                        l[i] *= corr[i];
                        m[i] = si;
                    }
                    let e_s = exp(si - m[i]);
                    l[i] += e_s;
                    pv[i] = e_s * vs;
                }
            }
            for (var e = 0u; e < D4; e++) {
                kv[e] = vc_raw(kb, e);
            }
            for (var i = 0u; i < RB; i++) {
                for (var e = 0u; e < D4; e++) {
                    o[i * D4 + e] = o[i * D4 + e] * corr[i] + pv[i] * kv[e];
                }
            }
        }
    }

    if (chunks > 1u && h == 0u && chunk == 0u) {
        part[p.base] = f32(chunks); // by each block's first lane: some rows are not taken
    }
    for (var i = 0u; i < RB; i++) {
        if (!taken[i]) { continue; }
        let row = r0 + i;
        let qa = row * qdim + h * HD;
        if (chunks == 1u) {
            for (var e = 0u; e < D4; e++) {
                let v = o[i * D4 + e] / l[i];
                for (var c = 0u; c < 4u; c++) {
                    dst[qa + 4u * e + c] = v[c];
                }
            }
            continue;
        }
        let at = (chunk * nrows + row) * p.heads + h; // E of (row, h, chunk)
        part[p.base + 1u + 2u * at] = m[i];
        part[p.base + 2u + 2u * at] = l[i];
        let ob = p.base + 1u + 2u * chunks * nrows * p.heads + at * HD;
        for (var e = 0u; e < D4; e++) {
            for (var c = 0u; c < 4u; c++) {
                part[ob + 4u * e + c] = o[i * D4 + e][c];
            }
        }
    }
}
