// attention_prefill: causal attention for prompt chunks (many rows of a
// sequence), tiled in the manner of FlashAttention. Twin: runtime/cpu
// AttendHead, as called by runtime/cpu Backend.Attend for each (row, head).
//
// One workgroup takes a tile of BR query rows of one head (workgroup_id.x is
// the head, workgroup_id.y the row tile) and streams the cache's keys and
// values of positions 0..max(pos of its rows) through workgroup memory, BC
// positions at a time, as vec4s expanded from the cache's type (its records,
// kv.inc.wgsl, pad the head with zeros to HD, a multiple of 4); position t
// of sequence s lives in slot
// tables[s][t / block_size]·block_size + t % block_size of the cache:
//
//  1. the K tile (BC positions × HD) is loaded into kvs;
//  2. the BR × BC scores q·k are computed from qs and kvs into ss, each
//     invocation a block of TR rows × TC positions (rows sr + i·SR,
//     positions sc + j·SC), so that it reads each q and k once for TC or TR
//     scores;
//  3. invocation r < BR owns row r's online softmax: it scales (and, when
//     p.softcap > 0, soft-caps) the scores, masks positions past pos[row]
//     (causal) and, when p.window > 0, those before the row's window (a
//     sliding-window layer; the pass then starts at the earliest row's
//     window; p.horizon > 0, for a bidirectional sliding-window step,
//     lets every row see up to position p.horizon - 1 past its own),
//     takes the tile's maximum, keeps the running maximum
//     m and sum l, turns the row's scores into exp(s - m) in place and
//     publishes the factor exp(m_old - m) that rescales the row's output;
//     meanwhile all invocations load the V tile into kvs (K is done with);
//  4. every invocation updates its block of OR rows × OD vec4s of the
//     BR × HD output accumulator, held in registers:
//     o = o·rescale + Σ_c p[r][c]·v[c].
//
// The output is divided by l at the end. The n × n score matrix is never
// formed; workgroup memory holds (BR + BC)·HD + BR·BC + BR + 1 floats, at most
// 14.4 KiB for the tiles runtime/gpu/attention.go picks. Row tiles may start
// anywhere (each row has its own position). A tile whose rows belong to
// several sequences makes one pass over the cache per sequence, each row
// taking part in its own; rows that part flags as attention_decode's, and
// rows past the batch, take part in the barriers but write nothing.
//
// A long context is also split over the positions, num_workgroups.z chunks
// of p.len positions (workgroup_id.z), to bound the loop iterations of one
// invocation (llvmpipe stops every loop after 65535 iterations in all): each
// chunk then writes its partial (m, l, o) to part, laid out as described in
// attention_decode.wgsl, and attention_combine merges them.
struct Params {
    heads: u32, kv_heads: u32, head_dim: u32, cap: u32, scale: f32,
    block_size: u32, table_width: u32, len: u32, base: u32,
    softcap: f32, window: u32, horizon: u32,
}

override HD: u32 = 64u; // head_dim rounded up to a multiple of 4
override BR: u32 = 16u; // query rows per workgroup
override BC: u32 = 32u; // key/value positions per tile
override TR: u32 = 2u;  // rows of an invocation's block of scores
override TC: u32 = 4u;  // positions of an invocation's block of scores
override OR: u32 = 2u;  // rows of an invocation's block of outputs

const WG = 64u;
const D4 = HD / 4u;
const QS = BR * D4;
const KS = BC * D4;
const SS = BR * BC;
const SR = BR / TR;      // invocations over the rows, for scores
const SC = BC / TC;      // invocations over the positions, for scores
const NR = BR / OR;      // invocations over the rows, for outputs
const ND = WG / NR;      // invocations over the vec4s of a head, for outputs
const OD = (D4 + ND - 1u) / ND; // vec4s of a head per invocation
const TS = TR * TC;
const TO = OR * OD;
const NEG = -3.4028234663852886e38;      // the running maximum before any score

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read_write> part: array<f32>;
{{template "kv_attend_bindings" .}}

var<workgroup> qs: array<vec4<f32>, QS>;  // [r·D4 + e]: the rows' queries
var<workgroup> kvs: array<vec4<f32>, KS>; // [c·D4 + e]: the K tile, then the V tile
var<workgroup> ss: array<f32, SS>;        // [r·BC + c]: scores, then probabilities
var<workgroup> rs: array<f32, BR>;        // per row: rescale factor, at the end l
var<workgroup> taken: u32;                // bit r: whether row r is this kernel's (BR ≤ 32)

// The next 4 values of a head from at, zero past its last left.
fn load_q(at: u32, left: u32) -> vec4<f32> {
    if (left >= 4u) { return vec4<f32>(q[at], q[at + 1u], q[at + 2u], q[at + 3u]); }
    var x = vec4<f32>(0.0);
    for (var c = 0u; c < left; c++) { x[c] = q[at + c]; }
    return x;
}

{{template "kv_rec" .}}{{template "kv_read" (kvbuf . "kc" "")}}{{template "kv_read" (kvbuf . "vc" "")}}
// load_tile fills kvs with the keys (or the values) of kv head kvh at
// positions t0..t0+cnt-1 of the sequence whose table starts at table,
// expanded from the cache's type; zero past cnt.
fn load_tile(t0: u32, cnt: u32, table: u32, kvh: u32, tid: u32, keys: bool) {
    for (var i = tid; i < KS; i += WG) {
        let c = i / D4;
        let e = i % D4;
        var x = vec4<f32>(0.0);
        if (c < cnt) {
            let t = t0 + c;
            let slot = u32(tables[table + t / p.block_size]) * p.block_size + t % p.block_size;
            let rec = kv_rec(slot, kvh, p.kv_heads, D4);
            if (keys) {
                x = kc_raw(rec, e) * kc_scale(rec, D4);
            } else {
                x = vc_raw(rec, e) * vc_scale(rec, D4);
            }
        }
        kvs[i] = x;
    }
}

// score scales q·k, soft-capping it when p.softcap > 0 (the clamp keeps
// tanh, ±1 in f32 past ±10, from overflowing exp to NaN on some backends).
fn score(qk: f32) -> f32 {
    let s = qk * p.scale;
    if (p.softcap > 0.0) {
        return p.softcap * tanh(clamp(s / p.softcap, -10.0, 10.0));
    }
    return s;
}

// visible reports whether a row at position mine sees position t: causal
// (or up to p.horizon - 1 when p.horizon > 0: a bidirectional step of one
// sequence whose window starts from each row's own position), and within
// the sliding window when p.window > 0. A row of mine -1 sees nothing.
fn visible(t: u32, mine: i32) -> bool {
    var last = mine;
    if (p.horizon > 0u && mine >= 0) {
        last = max(mine, i32(p.horizon) - 1);
    }
    return i32(t) <= last && (p.window == 0u || i32(t) + i32(p.window) > mine);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32,
        @builtin(num_workgroups) groups: vec3<u32>) {
    let hd = p.head_dim;
    let h = wid.x;
    let r0 = wid.y * BR;
    let nrows = min(p.cap, step.rows);
    if (r0 >= nrows) { return; }
    let rows = min(BR, nrows - r0);
    let qdim = p.heads * hd;
    let kvh = h / (p.heads / p.kv_heads);
    let chunk = wid.z;
    let chunks = groups.z;

    for (var i = tid; i < rows * D4; i += WG) {
        let e = i % D4;
        qs[i] = load_q((r0 + i / D4) * qdim + h * hd + 4u * e, hd - 4u * e);
    }
    // Rows flagged 1 in part are attention_decode's: this kernel leaves them.
    if (tid == 0u) {
        var bits = 0u;
        for (var r = 0u; r < rows; r++) {
            if (part[r0 + r] == 0.0) {
                bits |= 1u << r;
            }
        }
        taken = bits;
    }
    let mask = workgroupUniformLoad(&taken);
    // Invocation r < BR keeps row r's softmax state.
    var m = NEG;
    var l = 0.0;
    // This invocation's blocks: scores of rows sr + i·SR and positions
    // sc + j·SC; outputs of rows orow + i·NR and vec4s od + j·ND.
    let sr = tid % SR;
    let sc = tid / SR;
    let orow = tid % NR;
    let od = tid / NR;
    var acc: array<vec4<f32>, TO>;
    for (var k = 0u; k < TO; k++) {
        acc[k] = vec4<f32>(0.0);
    }

    // One pass per sequence among the tile's rows (one, but for a tile
    // that straddles sequences), at the first row of each.
    for (var first = 0u; first < rows; first++) {
        if ((mask & (1u << first)) == 0u) {
            continue;
        }
        let sq = seq[r0 + first];
        var fresh = true;
        for (var r = 0u; r < first; r++) {
            if (seq[r0 + r] == sq) {
                fresh = false;
            }
        }
        if (!fresh) {
            continue;
        }
        // The pass attends over positions 0..n-1 of the sequence, up to
        // its last row's position; this workgroup takes t_begin..t_end-1.
        var last = 0;
        var earliest = pos[r0 + first];
        for (var r = first; r < rows; r++) {
            if (seq[r0 + r] == sq) {
                last = max(last, pos[r0 + r]);
                earliest = min(earliest, pos[r0 + r]);
            }
        }
        let n = min(max(u32(last) + 1u, p.horizon), p.table_width * p.block_size);
        // With a sliding window, positions before the earliest row's
        // window are seen by none of the rows.
        var lo = 0u;
        if (p.window > 0u && u32(earliest) + 1u > p.window) {
            lo = min(n, u32(earliest) + 1u - p.window);
        }
        var t_begin = lo;
        var t_end = n;
        if (chunks > 1u) {
            t_begin = min(n, lo + chunk * p.len);
            t_end = min(n, t_begin + p.len);
        }
        let table = u32(sq) * p.table_width;
        var mine = -1; // row tid's position if it is of this sequence, else -1 (sees nothing)
        if (tid < rows) {
            if (seq[r0 + tid] == sq && (mask & (1u << tid)) != 0u) {
                mine = pos[r0 + tid];
            }
        }

        for (var t0 = t_begin; t0 < t_end; t0 += BC) {
            let cnt = min(BC, t_end - t0);
            load_tile(t0, cnt, table, kvh, tid, true);
            workgroupBarrier();

            if (sc < SC) {
                var s: array<f32, TS>;
                for (var k = 0u; k < TS; k++) {
                    s[k] = 0.0;
                }
                // Bounds the compiler does not know (here and in the
                // softmax) keep llvmpipe from unrolling: there the code's
                // size costs more than the loops.
                for (var e = 0u; e < (hd + 3u) / 4u; e++) {
                    var kv: array<vec4<f32>, TC>;
                    for (var j = 0u; j < TC; j++) {
                        kv[j] = kvs[(sc + j * SC) * D4 + e];
                    }
                    for (var i = 0u; i < TR; i++) {
                        let qv = qs[(sr + i * SR) * D4 + e];
                        for (var j = 0u; j < TC; j++) {
                            s[i * TC + j] += dot(qv, kv[j]);
                        }
                    }
                }
                for (var i = 0u; i < TR; i++) {
                    for (var j = 0u; j < TC; j++) {
                        ss[(sr + i * SR) * BC + sc + j * SC] = s[i * TC + j];
                    }
                }
            }
            workgroupBarrier();

            if (tid < BR) {
                let base = tid * BC;
                var mt = NEG;
                for (var c = 0u; c < cnt; c++) {
                    if (visible(t0 + c, mine)) {
                        let sc = score(ss[base + c]);
                        ss[base + c] = sc;
                        mt = max(mt, sc);
                    }
                }
                let m2 = max(m, mt);
                let corr = exp(m - m2);
                var sum = 0.0;
                for (var c = 0u; c < cnt; c++) {
                    var e = 0.0;
                    if (visible(t0 + c, mine)) {
                        e = exp(ss[base + c] - m2);
                    }
                    ss[base + c] = e;
                    sum += e;
                }
                l = l * corr + sum;
                m = m2;
                rs[tid] = corr;
            }
            load_tile(t0, cnt, table, kvh, tid, false);
            workgroupBarrier();

            for (var i = 0u; i < OR; i++) {
                let corr = rs[orow + i * NR];
                for (var j = 0u; j < OD; j++) {
                    acc[i * OD + j] *= corr;
                }
            }
            for (var c = 0u; c < cnt; c++) {
                var v: array<vec4<f32>, OD>;
                for (var j = 0u; j < OD; j++) {
                    v[j] = kvs[c * D4 + min(od + j * ND, D4 - 1u)];
                }
                for (var i = 0u; i < OR; i++) {
                    let pr = ss[(orow + i * NR) * BC + c];
                    for (var j = 0u; j < OD; j++) {
                        acc[i * OD + j] += pr * v[j];
                    }
                }
            }
            workgroupBarrier();
        }
    }

    if (tid < BR) {
        rs[tid] = l;
    }
    workgroupBarrier();
    if (chunks == 1u) {
        for (var i = 0u; i < OR; i++) {
            let r = orow + i * NR;
            for (var j = 0u; j < OD; j++) {
                let e = od + j * ND;
                if (r < rows && e < D4 && (mask & (1u << r)) != 0u) {
                    let o = acc[i * OD + j] / rs[r];
                    let at = (r0 + r) * qdim + h * hd + 4u * e;
                    for (var c = 0u; c < min(4u, hd - 4u * e); c++) {
                        dst[at + c] = o[c];
                    }
                }
            }
        }
        return;
    }

    if (tid == 0u && wid.x == 0u && wid.z == 0u) {
        part[p.base] = f32(chunks); // by each tile's first workgroup: some tiles may take no rows
    }
    // E of (row r0, head h, this chunk); row r is r·heads further.
    let first = (chunk * nrows + r0) * p.heads + h;
    if (tid < rows && (mask & (1u << tid)) != 0u) {
        let at = p.base + 1u + 2u * (first + tid * p.heads);
        part[at] = m;
        part[at + 1u] = l;
    }
    let o_base = p.base + 1u + 2u * chunks * nrows * p.heads;
    for (var i = 0u; i < OR; i++) {
        let r = orow + i * NR;
        for (var j = 0u; j < OD; j++) {
            let e = od + j * ND;
            if (r < rows && e < D4 && (mask & (1u << r)) != 0u) {
                let at = o_base + (first + r * p.heads) * hd + 4u * e;
                for (var c = 0u; c < min(4u, hd - 4u * e); c++) {
                    part[at + c] = acc[i * OD + j][c];
                }
            }
        }
    }
}
