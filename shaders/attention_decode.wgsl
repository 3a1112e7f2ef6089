// attention_decode: causal attention for the rows of sequences that have
// one row in the step or a few (decoding), split over the positions
// ("flash-decoding", split-K). Twin: runtime/cpu AttendHead, as called by
// runtime/cpu Backend.Attend for each (row, head); attention_combine
// finishes what this kernel starts.
//
// Positions 0..pos[row] of each row's sequence (the last p.window of them
// when p.window > 0: a sliding-window layer) are cut into
// num_workgroups.y chunks of equal length; position t of sequence s lives in
// slot tables[s][t / block_size]·block_size + t % block_size of the cache,
// whose records (kv.inc.wgsl) it reads in the cache's type: an int8 key's
// scale multiplies its score, a value's its probability.
// One workgroup takes one chunk of one row (workgroup_id.z) for the G query
// heads of a slice of one GQA group (workgroup_id.x: kv head and slice), so
// that the chunk's keys and values are read once for all of them. It walks
// its chunk SB = 64 positions at a time:
//
//  1. invocation j scores position j of the block against the G queries
//     (scaled, and soft-capped as cap·tanh(s/cap) when p.softcap > 0):
//     one vec4 of the key at a time, the queries of 4 heads at one dim in
//     one vec4 of qs, so the scores of 4 heads accumulate in one vec4;
//  2. the block's maximum per head (8 invocations over 8 positions each,
//     then every invocation over those 8; with subgroups wg_max4, of
//     reduce.inc.wgsl) updates the running maximum m,
//     which every invocation holds alike; invocation j turns its scores into
//     exp(s - m) and adds them to its own share of the sum l;
//  3. invocation (pq, d4) accumulates dims 4·d4..4·d4+3 of the output of
//     every head (and with heads wider than 256, DR = 2: dims 4·(d4+64)..
//     too) over positions pq, pq + NQ, ... of the block, rescaling by
//     exp(m_old - m) first: o = o·rescale + Σ_j p_j·v_j.
//
// At the end the NQ shares of o and the 64 shares of l are summed through
// workgroup memory. With one chunk the workgroup writes o / l to dst itself;
// with more it writes its partial (m, l, o) to part and attention_combine
// merges the chunks of each (row, head).
//
// part holds, from float 0, a flag per row: 1 for the rows this kernel
// takes (the others are attention_prefill's); from p.base: the number of
// chunks C; for the partial of chunk c of (row, head),
// E = (c·rows + row)·heads + head with rows the batch's: (m, l) at
// base + 1 + 2E, and o at base + 1 + 2·C·rows·heads + E·head_dim.
//
// head_dim must be a multiple of 4 (the cache is read as vec4); the kernel
// is specialised to it (HD), so that its loops have constant bounds. Within
// llvmpipe's loop limit (see attention_prefill.wgsl) as long as a chunk is
// at most decodeSpan positions, which runtime/gpu/attention.go ensures.
struct Params {
    heads: u32, kv_heads: u32, head_dim: u32, cap: u32, scale: f32,
    block_size: u32, table_width: u32, slices: u32, base: u32,
    softcap: f32, window: u32,
}

override HD: u32 = 64u; // head_dim
override G: u32 = 4u;   // query heads per workgroup, at most 8

const WG = 64u;           // invocations per workgroup
const SB = 64u;           // positions per block, one per invocation
const D4 = HD / 4u;       // vec4s per head, at most 2·WG
const DR = (D4 + WG - 1u) / WG; // vec4s of a head per invocation in step 3: 1, or 2 past 256 dims
const DW = (D4 + DR - 1u) / DR; // invocations over a head's vec4s in step 3, at most WG
const NQ = WG / DW;       // invocations over the positions in step 3
const GDR = G * DR;
const GV = (G + 3u) / 4u; // vec4s of heads: 1 or 2
const QS = GV * HD;
const PS = GV * SB;
const RED = GV * 8u;
const NEG = -3.4028234663852886e38; // the running maximum before any score

{{template "decode_bindings" .}}

var<workgroup> qs: array<vec4<f32>, QS>;  // [gv·HD + d]: heads 4gv..4gv+3 at dim d
var<workgroup> ps: array<vec4<f32>, PS>;  // [gv·SB + j]: scores, then probabilities
var<workgroup> red: array<vec4<f32>, RED>; // [gv·8 + i]: partial maxima and sums
var<workgroup> sl: array<u32, SB>;         // the block's value records
var<workgroup> sv: array<f32, SB>;         // and their scales
var<workgroup> taken: u32;                 // whether the row is this kernel's
{{- if .Subgroups}}
{{template "reduce" .}}
{{- end}}
{{template "kv_rec" .}}{{template "kv_read" (kvbuf . "kc" "")}}{{template "kv_read" (kvbuf . "vc" "")}}
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32,
        @builtin(num_workgroups) groups: vec3<u32>{{template "sg_ids" .}}) {
{{- template "sg_init" .}}
    let row = wid.z;
    let nrows = min(p.cap, step.rows);
    if (row >= nrows) { return; }
    if (tid == 0u) {
        taken = u32(part[row] == 1.0);
    }
    if (workgroupUniformLoad(&taken) == 0u) { return; }
    let group = p.heads / p.kv_heads;
    let kvh = wid.x / p.slices;
    let h0 = kvh * group + (wid.x % p.slices) * G;
    let ng = min(G, kvh * group + group - h0);
    let qdim = p.heads * HD;

    let chunk = wid.y;
{{template "chunk_span"}}

    for (var i = tid; i < QS; i += WG) {
        let g = (i / HD) * 4u;
        let at = row * qdim + (h0 + g) * HD + i % HD;
        var x = vec4<f32>(0.0);
        for (var c = 0u; c < 4u; c++) {
            if (g + c < ng) {
                x[c] = q[at + c * HD];
            }
        }
        qs[i] = x;
    }

    var m: array<vec4<f32>, GV>;   // running maximum, the same in every invocation
    var l: array<vec4<f32>, GV>;   // this invocation's share of the sum
    var s: array<vec4<f32>, GV>;   // this invocation's scores, then probabilities
    var corr: array<vec4<f32>, GV>;
    var acc: array<vec4<f32>, GDR>; // [g·DR + r]: dims 4·(d4 + r·DW).. of head g's output
    for (var gv = 0u; gv < GV; gv++) {
        m[gv] = vec4<f32>(NEG);
        l[gv] = vec4<f32>(0.0);
    }
    for (var k = 0u; k < GDR; k++) {
        acc[k] = vec4<f32>(0.0);
    }
    let d4 = tid % DW;
    let pq = tid / DW;
    workgroupBarrier();

    for (var b0 = t0; b0 < t1; b0 += SB) {
        let cnt = min(SB, t1 - b0);
        for (var gv = 0u; gv < GV; gv++) {
            s[gv] = vec4<f32>(0.0);
        }
        if (tid < cnt) {
            let t = b0 + tid;
            let slot = u32(tables[table + t / p.block_size]) * p.block_size + t % p.block_size;
            let kb = kv_rec(slot, kvh, p.kv_heads, D4);
            sl[tid] = kb;
            sv[tid] = vc_scale(kb, D4);
            // A loop bound the compiler does not know keeps llvmpipe from
            // unrolling it: there the code's size costs more than the loop.
            for (var e = 0u; e < p.head_dim / 4u; e++) {
                let k = kc_raw(kb, e);
                for (var gv = 0u; gv < GV; gv++) {
                    let at = gv * HD + 4u * e;
                    s[gv] += qs[at] * k.x + qs[at + 1u] * k.y + qs[at + 2u] * k.z + qs[at + 3u] * k.w;
                }
            }
            for (var gv = 0u; gv < GV; gv++) {
                s[gv] *= p.scale * kc_scale(kb, D4);
                if (p.softcap > 0.0) {
                    // tanh is ±1 in f32 past ±10; the clamp avoids NaN from exp overflow.
                    s[gv] = p.softcap * tanh(clamp(s[gv] / p.softcap, vec4<f32>(-10.0), vec4<f32>(10.0)));
                }
            }
        } else {
            for (var gv = 0u; gv < GV; gv++) {
                s[gv] = vec4<f32>(NEG);
            }
        }
        var mts: array<vec4<f32>, GV>; // the block's maximum
{{- if .Subgroups}}
        for (var gv = 0u; gv < GV; gv++) {
            mts[gv] = wg_max4(s[gv], tid);
        }
{{- else}}
        for (var gv = 0u; gv < GV; gv++) {
            ps[gv * SB + tid] = s[gv];
        }
        workgroupBarrier();

        if (tid < 8u) {
            for (var gv = 0u; gv < GV; gv++) {
                var mx = ps[gv * SB + 8u * tid];
                for (var i = 1u; i < 8u; i++) {
                    mx = max(mx, ps[gv * SB + 8u * tid + i]);
                }
                red[gv * 8u + tid] = mx;
            }
        }
        workgroupBarrier();
        for (var gv = 0u; gv < GV; gv++) {
            mts[gv] = red[gv * 8u];
            for (var i = 1u; i < 8u; i++) {
                mts[gv] = max(mts[gv], red[gv * 8u + i]);
            }
        }
{{- end}}

        for (var gv = 0u; gv < GV; gv++) {
            let mt = mts[gv];
            let m2 = max(m[gv], mt);
            corr[gv] = exp(m[gv] - m2);
            m[gv] = m2;
            var e = vec4<f32>(0.0);
            if (tid < cnt) {
                e = exp(s[gv] - m2);
            }
            l[gv] = l[gv] * corr[gv] + e;
            ps[gv * SB + tid] = e;
        }
        workgroupBarrier();

        if (pq < NQ) {
            for (var k = 0u; k < GDR; k++) {
                let g = k / DR;
                acc[k] *= corr[g / 4u][g % 4u];
            }
            for (var j = pq; j < cnt; j += NQ) {
                for (var r = 0u; r < DR; r++) {
                    if (d4 + r * DW < D4) {
                        let v = vc_raw(sl[j], d4 + r * DW);
                        for (var gv = 0u; gv < GV; gv++) {
                            let e = ps[gv * SB + j] * sv[j];
                            for (var c = 0u; c < 4u; c++) {
                                if (4u * gv + c < G) {
                                    acc[(4u * gv + c) * DR + r] += e[c] * v;
                                }
                            }
                        }
                    }
                }
            }
        }
        workgroupBarrier();
    }

    // The sums: 64 shares → 8 → every invocation (with subgroups: wg_sum4).
{{- if .Subgroups}}
    for (var gv = 0u; gv < GV; gv++) {
        l[gv] = wg_sum4(l[gv], tid);
    }
{{- else}}
    for (var gv = 0u; gv < GV; gv++) {
        ps[gv * SB + tid] = l[gv];
    }
    workgroupBarrier();
    if (tid < 8u) {
        for (var gv = 0u; gv < GV; gv++) {
            var sum = vec4<f32>(0.0);
            for (var i = 0u; i < 8u; i++) {
                sum += ps[gv * SB + 8u * tid + i];
            }
            red[gv * 8u + tid] = sum;
        }
    }
    workgroupBarrier();
    for (var gv = 0u; gv < GV; gv++) {
        var sum = vec4<f32>(0.0);
        for (var i = 0u; i < 8u; i++) {
            sum += red[gv * 8u + i];
        }
        l[gv] = sum;
    }
{{- end}}
    // The outputs: NQ shares → invocations pq = 0.
    for (var k = 0u; k < GDR; k++) {
        workgroupBarrier();
        ps[tid] = acc[k];
        workgroupBarrier();
        if (pq == 0u) {
            var o = ps[d4];
            for (var i = 1u; i < NQ; i++) {
                o += ps[i * DW + d4];
            }
            acc[k] = o;
        }
    }

    if (chunks == 1u) {
        if (pq == 0u) {
            for (var k = 0u; k < GDR; k++) {
                let g = k / DR;
                let e4 = d4 + (k % DR) * DW;
                if (g < ng && e4 < D4) {
                    let o = acc[k] / l[g / 4u][g % 4u];
                    let at = row * qdim + (h0 + g) * HD + 4u * e4;
                    for (var c = 0u; c < 4u; c++) {
                        dst[at + c] = o[c];
                    }
                }
            }
        }
        return;
    }
    if (tid == 0u && wid.x == 0u && wid.y == 0u) {
        part[p.base] = f32(chunks); // by each row's first workgroup: some rows are not taken
    }
    let first = (chunk * nrows + row) * p.heads + h0; // E of (row, h0, chunk)
    if (tid == 0u) {
        for (var g = 0u; g < G; g++) {
            if (g < ng) {
                let at = p.base + 1u + 2u * (first + g);
                part[at] = m[g / 4u][g % 4u];
                part[at + 1u] = l[g / 4u][g % 4u];
            }
        }
    }
    if (pq == 0u) {
        for (var k = 0u; k < GDR; k++) {
            let g = k / DR;
            let e4 = d4 + (k % DR) * DW;
            if (g < ng && e4 < D4) {
                let at = p.base + 1u + 2u * chunks * nrows * p.heads + (first + g) * HD + 4u * e4;
                for (var c = 0u; c < 4u; c++) {
                    part[at + c] = acc[k][c];
                }
            }
        }
    }
}
