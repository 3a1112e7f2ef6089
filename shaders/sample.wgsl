// sample: draws each row's next token as runtime.Sampler does (Dist, then
// pick), one workgroup per row, so that a sampled step reads back a few
// bytes a row and chains like greedy steps. The candidates are the row's
// largest values, largest first (ties: lower index first), found one per
// round by merging the invocations' ordered lists of their own columns;
// each round's probability
// exp((v - max)/T)/S, S the sum over the candidate set, decides at once
// whether min-p or top-p ends the set, so a peaked row costs a few rounds.
// At most 256 candidates are ranked: where the set the CPU would keep runs
// past them (top-k 0 and no cut among them) the rest is summed, not
// ranked, and a draw landing in it is a tail: the row's token is then
// drawn on the host from the whole row (Draws not counted), as is a row
// whose top-p cut lies past the 256. A tail is known as soon as the
// candidates still to rank, none likelier than the last, cannot hold the
// draw (or reach top-p): a flat row over a large vocabulary gives up in a
// round or two instead of 256 (a premature tail is exact too, only slower). The draws are the CPU sampler's own
// values of its PCG stream, sent by the host, consumed one per step that
// keeps more than one candidate. The reductions are reduce.inc.wgsl's (with
// subgroups where the device has them). Twin: runtime Sampler (Dist and
// pick).
struct Params { cols: u32, chain_step: u32, max_chain: u32 }
struct Row { temperature: f32, top_p: f32, min_p: f32, top_k: u32 } // top_k 0: the whole row

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> cfg: array<Row>;
@group(0) @binding(4) var<storage, read> draws: array<f32>; // max_chain per row
@group(0) @binding(5) var<storage, read_write> result: array<i32>; // the token, as Keep's argmax
@group(0) @binding(6) var<storage, read_write> state: array<u32>; // per row: token, draws used, tail step + 1

const WG = 256u;
const KMAX = 256u;
const LOCAL = 8u; // values each invocation keeps ranked ahead
const NEG_INF = 0xff800000u;
var<workgroup> cand_i: array<u32, KMAX>;
var<workgroup> cand_p: array<f32, KMAX>;
var<workgroup> flag: u32;

{{template "reduce" .}}

// weight is exp((v - mx)/t), 0 for a masked (-Inf) value, computed as the
// CPU computes it: the difference and quotient in f32.
fn weight(v: f32, mx: f32, t: f32) -> f32 {
    if (bitcast<u32>(v) == NEG_INF) { return 0.0; }
    return exp((v - mx) / t);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32{{template "sg_ids" .}}) {
{{- template "sg_init" .}}
    let row = wid.x;
    let base = row * p.cols;
    let c = cfg[row];
    if (lid == 0u) { flag = state[3u * row + 2u]; }
    if (workgroupUniformLoad(&flag) != 0u) {
        // An earlier step of this chain was a tail: the row's later tokens
        // are dropped; any token keeps the chain going.
        if (lid == 0u) { result[row] = 0; }
        return;
    }
    let whole = c.top_k == 0u || c.top_k >= p.cols; // the CPU's set starts as the whole row
    let k = select(min(c.top_k, KMAX), min(p.cols, KMAX), whole);
    let top_p = c.top_p > 0.0 && c.top_p < 1.0;

    // The largest value (the greedy token), the lowest index among equals.
    var mv = 0.0;
    var mi = NONE;
    for (var i = lid; i < p.cols; i += WG) {
        let v = x[base + i];
        if (before(v, i, mv, mi)) { mv = v; mi = i; }
    }
    let best = wg_best(mv, mi, lid);
    let mx = best.v;
    let top = best.i;
    if (c.temperature == 0.0) {
        if (lid == 0u) {
            result[row] = i32(top);
            state[3u * row] = top;
        }
        return;
    }

    // Over the whole row S (softmax's sum) is known before the rounds, so
    // is min-p's floor (the first candidate's weight is exp(0) = 1), and
    // without top-p so is the set's total: each round can then end the
    // set or land the draw.
    var big_s = 0.0;
    var floor_p = 0.0;
    var total = 0.0;
    if (whole) {
        var part = 0.0;
        for (var i = lid; i < p.cols; i += WG) { part += weight(x[base + i], mx, c.temperature); }
        big_s = wg_sum(part, lid);
        floor_p = 1.0 / big_s * c.min_p;
        if (!top_p) {
            part = 0.0;
            for (var i = lid; i < p.cols; i += WG) {
                let pr = weight(x[base + i], mx, c.temperature) / big_s;
                if (c.min_p == 0.0 || pr >= floor_p) { part += pr; }
            }
            total = wg_sum(part, lid);
        }
    }

    // Round r ranks candidate r: the largest value after candidate r-1.
    let draw_at = row * p.max_chain + state[3u * row + 1u];
    var prev_v = 0.0;
    var prev_i = NONE;
    var n = 0u;          // candidates ranked
    var end = 0u;        // the set's size once known
    var cum = 0.0;       // top-p's running sum
    var u = 0.0;         // the draw, less the probabilities walked
    var picked = false;
    var early = false;   // a tail, known before the 256th round
    var token = top;
    // Each invocation keeps the next LOCAL values of its own columns (lid,
    // lid + WG, ...) in order, refilled by a scan of them when used up, so
    // a round is one reduction over the invocations' heads, not a scan of
    // the row: the rounds merge the invocations' ordered lists.
    var loc_v: array<f32, LOCAL>;
    var loc_i: array<u32, LOCAL>;
    var loc_n = 0u;      // values in the list
    var loc_at = 0u;     // the list's head
    var last_v = 0.0;    // the last value of this invocation's taken
    var last_i = NONE;
    var more = true;     // the columns may hold values not yet listed
    if (lid == 0u) { flag = 0u; }
    for (var r = 0u; r < k; r++) {
        if (loc_at == loc_n && more) {
            loc_n = 0u;
            loc_at = 0u;
            for (var i = lid; i < p.cols; i += WG) {
                let v = x[base + i];
                if (!(last_i == NONE || before(last_v, last_i, v, i))) { continue; }
                // Insert (v, i) into the ordered list, dropping its last.
                var j = loc_n;
                if (j == LOCAL) {
                    if (!before(v, i, loc_v[LOCAL - 1u], loc_i[LOCAL - 1u])) { continue; }
                    j = LOCAL - 1u;
                } else {
                    loc_n++;
                }
                while (j > 0u && before(v, i, loc_v[j - 1u], loc_i[j - 1u])) {
                    loc_v[j] = loc_v[j - 1u];
                    loc_i[j] = loc_i[j - 1u];
                    j--;
                }
                loc_v[j] = v;
                loc_i[j] = i;
            }
            more = loc_n == LOCAL;
        }
        var bv = 0.0;
        var bi = NONE;
        if (loc_at < loc_n) {
            bv = loc_v[loc_at];
            bi = loc_i[loc_at];
        }
        let b = wg_best(bv, bi, lid);
        prev_v = b.v;
        prev_i = b.i;
        n = r + 1u;
        if (prev_i != NONE && prev_i % WG == lid) { // this invocation's head was taken
            last_v = prev_v;
            last_i = prev_i;
            loc_at++;
        }
        if (lid == 0u) {
            let w = weight(prev_v, mx, c.temperature);
            cand_i[r] = prev_i;
            cand_p[r] = w;
            if (r > 0u && bitcast<u32>(prev_v) == NEG_INF) {
                end = r; // masked values end the set (dropMasked)
            } else if (whole) {
                let pr = w / big_s;
                if (c.min_p > 0.0 && r > 0u && pr < floor_p) {
                    end = r;
                } else if (top_p) {
                    cum += pr;
                    if (cum >= c.top_p) {
                        end = r + 1u;
                    } else if (p.cols > KMAX && cum + f32(KMAX - 1u - r) * pr < c.top_p) {
                        early = true; // the rest of the 256, each no likelier, cannot reach top-p
                    }
                } else if (r > 0u) {
                    // A second candidate: the set is not one token, so
                    // the draw is used; walk candidate 0, then this one.
                    if (r == 1u) {
                        u = draws[draw_at] - cand_p[0] / big_s / total;
                        if (u < 0.0) { picked = true; token = cand_i[0]; }
                    }
                    if (!picked) {
                        u -= pr / total;
                        if (u < 0.0) {
                            picked = true;
                            token = prev_i;
                        } else if (p.cols > KMAX && u > f32(KMAX - 1u - r) * pr / total) {
                            early = true; // the rest of the 256, each no likelier, cannot hold the draw
                        }
                    }
                }
            }
            if (end != 0u || picked || early) { flag = 1u; }
        }
        workgroupBarrier();
        if (workgroupUniformLoad(&flag) != 0u) { break; }
    }
    if (lid != 0u) { return; }
    var used = 0u;
    var tail = false;
    if (picked) {
        used = 1u;
    } else if (whole && !top_p) {
        if (end == 0u && n == p.cols) { end = n; }
        if (end == 0u) {
            tail = true; // the draw lies past the ranked candidates
        } else if (end > 1u) {
            token = cand_i[end - 1u]; // rounding left the draw short: the last, as pick does
            used = 1u;
        }
    } else {
        if (whole) {
            if (end == 0u && n == p.cols) { end = n; }
            tail = end == 0u; // top-p's cut lies past the ranked candidates
        } else {
            // The top-k set: S over its candidates, masked ones cut
            // first, then min-p and top-p as filter applies them.
            let m = select(n, end, end != 0u);
            for (var i = 0u; i < m; i++) { big_s += cand_p[i]; }
            floor_p = cand_p[0] / big_s * c.min_p;
            end = m;
            for (var i = 0u; i < m; i++) {
                let pr = cand_p[i] / big_s;
                if (c.min_p > 0.0 && i > 0u && pr < floor_p) { end = i; break; }
                if (top_p) {
                    cum += pr;
                    if (cum >= c.top_p) { end = i + 1u; break; }
                }
            }
        }
        if (!tail && end > 1u) {
            for (var i = 0u; i < end; i++) { total += cand_p[i] / big_s; }
            u = draws[draw_at];
            token = cand_i[end - 1u];
            for (var i = 0u; i < end; i++) {
                u -= cand_p[i] / big_s / total;
                if (u < 0.0) { token = cand_i[i]; break; }
            }
            used = 1u;
        }
    }
    result[row] = i32(token);
    state[3u * row] = token;
    state[3u * row + 1u] += used;
    if (tail) { state[3u * row + 2u] = p.chain_step + 1u; }
}
