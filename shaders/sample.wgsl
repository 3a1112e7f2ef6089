// sample: draws each row's next token as runtime.Sampler does (Dist, then
// pick), one workgroup per row, so that a sampled step reads back a few
// bytes a row and chains like greedy steps. Twin: runtime Sampler (Dist and
// pick). Two ways to the token, both on the device:
//
// Ranked candidates (peaked rows): the row's largest values, largest first
// (ties: lower index first), found one per round by merging the
// invocations' ordered lists of their own columns; each round's probability
// exp((v - max)/T)/S, S the sum over the candidate set, decides at once
// whether min-p or top-p ends the set, so a peaked row costs a few rounds.
// At most 256 candidates are ranked.
//
// Radix selection (flat rows): where the set the CPU keeps runs past the
// ranked candidates (top-k 0 and no cut among them; or top-p's cut past
// them), the draw is found without sorting. Each weight is a 64-bit fixed
// point integer (w * 2^45, truncated: w <= 1, and fewer than 2^19 columns,
// backend.MaxSampleColumns, sum below 2^64), summed exactly with u32
// atomics, so sums do not depend on order.
// The draw lands on the first column, in the CPU's order (larger value
// first, lower index among equals), at which the running weight passes
// r * T (T the kept set's weight): radix selection over the 32-bit
// ordering key of the value, then the index, 8 bits a level: a level
// histograms the weights of the columns still in play by their next 8
// bits, and the bin the target falls in is kept. It ends when the bin
// holds one column. top-p's cut past the candidates is found the same way
// (the first column whose running weight reaches top-p * S). The ranked
// path's sums, top-p's running sum and its draw are the same fixed point.
// What remains of the CPU's float64 arithmetic is its rounding of each
// probability to f32 and exp's error (exp here is accurate to about an
// ulp, see exp_acc), neither ordered: a draw differs only where it lies
// within ~1e-9 of the boundary of two neighbours, or a min-p or top-p cut
// as close to its threshold (TestSampleKernelMatchesSampler accepts
// exactly that; 8,000 flat draws over 49,152 and 151,936 columns saw
// none). A row whose draw the ranking cannot settle (the candidates still
// to rank, none heavier than the last, cannot hold the draw or reach
// top-p) gives the ranking up in a round or two.
//
// The draws are the CPU sampler's own values of its PCG stream, sent by the
// host as r * 2^64 in two words, consumed one per step that keeps more
// than one candidate. The reductions are reduce.inc.wgsl's (with subgroups
// where the device has them).
struct Params { cols: u32, max_chain: u32 }
struct Row { temperature: f32, top_p: f32, min_p: f32, top_k: u32 } // top_k 0: the whole row

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> cfg: array<Row>;
@group(0) @binding(4) var<storage, read> draws: array<vec2<u32>>; // max_chain per row: r * 2^64 as (low, high)
@group(0) @binding(5) var<storage, read_write> result: array<i32>; // the token, as Keep's argmax
@group(0) @binding(6) var<storage, read_write> state: array<u32>; // per row: token, draws used

const WG = 256u;
const KMAX = 256u;
const LOCAL = 8u; // values each invocation keeps ranked ahead
const NEG_INF = 0xff800000u;
const BINS = 256u; // radix selection's bins: 8 bits a round (WG invocations clear them)
var<workgroup> cand_i: array<u32, KMAX>;
var<workgroup> cand_p: array<f32, KMAX>;
var<workgroup> flag: u32;
var<workgroup> bin_lo: array<atomic<u32>, BINS>; // a bin's weight, low word
var<workgroup> bin_hi: array<atomic<u32>, BINS>;
var<workgroup> bin_n: array<atomic<u32>, BINS>;  // its columns
var<workgroup> bin_at: array<atomic<u32>, BINS>; // one of them (the only one when bin_n is 1)
var<workgroup> sum_lo: atomic<u32>;
var<workgroup> sum_hi: atomic<u32>;
var<workgroup> sum_out: vec2<u32>;
var<workgroup> found: Found;

{{template "reduce" .}}

// weight is exp((v - mx)/t), 0 for a masked (-Inf) value, computed as the
// CPU computes it: the difference and quotient in f32.
fn weight(v: f32, mx: f32, t: f32) -> f32 {
    if (bitcast<u32>(v) == NEG_INF) { return 0.0; }
    return exp_acc((v - mx) / t);
}

// exp_acc is e^q for q <= 0 to about an ulp (the CPU rounds the float64
// exp to f32), where the builtin may be off by several ulps growing with
// |q| (WGSL allows 3 + 2|q|): an error that grows with |q| weighs the
// flat rows' many small weights differently from the large ones, which
// moves radix selection's boundaries. Cody-Waite reduction q = n ln2 + r
// (ln2's high part exact in n * ln2_hi), a degree-7 polynomial for
// e^r - 1 on |r| <= ln2/2, and 2^n as an exponent. The rate it buys:
// with the builtin, 1 of 1,000 flat draws over 49,152 columns at
// temperature 8 differed from the CPU's, not at a boundary; with exp_acc
// none of 8,000 (lavapipe).
fn exp_acc(q: f32) -> f32 {
    if (q < -103.0) { return 0.0; }
    let n = round(q * 1.44269502);
    let r = (q - n * 0.693359375) - n * -2.12194440e-4;
    let e = r * (1.0 + r * (0.5 + r * (0.166666672 + r * (0.0416666679 + r * (0.00833333377 + r * (0.00138888892 + r * 0.000198412701))))));
    return ldexp(1.0 + e, i32(n)); // exact scaling (a result past the normals may flush to 0)
}

// Fixed-point 64-bit sums, (low word, high word).
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn sub64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

fn less64(a: vec2<u32>, b: vec2<u32>) -> bool {
    return a.y < b.y || (a.y == b.y && a.x < b.x);
}

// mul32 is a * b as 64 bits.
fn mul32(a: u32, b: u32) -> vec2<u32> {
    let al = a & 0xffffu;
    let ah = a >> 16u;
    let bl = b & 0xffffu;
    let bh = b >> 16u;
    let ll = al * bl;
    let lh = al * bh;
    let hl = ah * bl;
    let mid = (ll >> 16u) + (lh & 0xffffu) + (hl & 0xffffu);
    return vec2<u32>((ll & 0xffffu) | (mid << 16u), ah * bh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u));
}

// mulhi64 is floor(a * b / 2^64): a fixed-point weight times a fraction
// held as b / 2^64.
fn mulhi64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let ll = mul32(a.x, b.x);
    let lh = mul32(a.x, b.y);
    let hl = mul32(a.y, b.x);
    let mid = add64(add64(vec2<u32>(ll.y, 0u), vec2<u32>(lh.x, 0u)), vec2<u32>(hl.x, 0u));
    return add64(add64(add64(mul32(a.y, b.y), vec2<u32>(lh.y, 0u)), vec2<u32>(hl.y, 0u)), vec2<u32>(mid.y, 0u));
}

// fixed is w in [0, 1] as w * 2^45, truncated (exact steps: scaling by a
// power of two and taking the integer part).
fn fixed(w: f32) -> vec2<u32> {
    let s = w * 8192.0;
    let h = floor(s);
    return vec2<u32>(u32((s - h) * 4294967296.0), u32(h));
}

// real is a fixed-point weight as f32.
fn real(a: vec2<u32>) -> f32 {
    return f32(a.y) * (1.0 / 8192.0) + f32(a.x) * 2.8421709e-14;
}

// frac64 is f in [0, 1) as f * 2^64.
fn frac64(f: f32) -> vec2<u32> {
    let s = f * 4294967296.0;
    let h = floor(s);
    return vec2<u32>(u32((s - h) * 4294967296.0), u32(h));
}

// key orders values as floats, as a u32 (larger value, larger key); -0 is
// +0, and NaN (key 0) weighs nothing, as -Inf.
fn key(v: f32) -> u32 {
    var b = bitcast<u32>(v);
    if (v == 0.0) { b = 0u; }
    if (v != v) { return 0u; }
    return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

// A row's radix selection: what the columns weigh and which are kept.
var<private> sel_base: u32;
var<private> sel_mx: f32;
var<private> sel_t: f32;
var<private> sel_s: f32;      // S as f32, for min-p
var<private> sel_floor: f32;  // min-p's floor (0: none)
var<private> sel_bound: vec2<u32>; // top-p's cut as (key, index key): the columns ordered after it are dropped
var<private> sel_bounded: bool;

// kept_weight is column i's weight as a fixed-point integer if the set
// keeps it, else 0: masked values, min-p and top-p's cut drop columns.
fn kept_weight(v: f32, k: u32, ik: u32) -> vec2<u32> {
    if (k <= 0x007fffffu) { return vec2<u32>(0u); } // -Inf and NaN
    if (sel_bounded && (k < sel_bound.x || (k == sel_bound.x && ik < sel_bound.y))) { return vec2<u32>(0u); }
    let w = weight(v, sel_mx, sel_t);
    if (sel_floor > 0.0 && w / sel_s < sel_floor) { return vec2<u32>(0u); }
    return fixed(w);
}

// kept_sum is the kept set's weight: every invocation adds its columns'.
fn kept_sum(lid: u32) -> vec2<u32> {
    if (lid == 0u) {
        atomicStore(&sum_lo, 0u);
        atomicStore(&sum_hi, 0u);
    }
    workgroupBarrier();
    var part = vec2<u32>(0u);
    for (var i = lid; i < p.cols; i += WG) {
        let v = x[sel_base + i];
        part = add64(part, kept_weight(v, key(v), p.cols - 1u - i));
    }
    let old = atomicAdd(&sum_lo, part.x);
    atomicAdd(&sum_hi, part.y + select(0u, 1u, old + part.x < old));
    workgroupBarrier();
    if (lid == 0u) { sum_out = vec2<u32>(atomicLoad(&sum_lo), atomicLoad(&sum_hi)); }
    return workgroupUniformLoad(&sum_out);
}

struct Found {
    i: u32,              // the column
    before: vec2<u32>,   // the kept weight ordered before it
    w: vec2<u32>,        // its own
    done: u32,           // whether the selection ended
    digit: u32,          // the bin this level kept
}

// select_at is the first kept column, in the CPU's order, at which the
// running kept weight exceeds t (t below the kept set's weight). Bins are
// scanned from the largest key down; the index key is cols - 1 - index, so
// that lower indices come first among equal values.
fn select_at(t: vec2<u32>, lid: u32) -> Found {
    var kmask = 0u;
    var kval = 0u;
    var imask = 0u;
    var ival = 0u;
    var rem = t;
    var ibytes = 1u; // bytes of the index key
    for (var c = (p.cols - 1u) >> 8u; c != 0u; c >>= 8u) { ibytes++; }
    for (var level = 0u; level < 4u + ibytes; level++) {
        atomicStore(&bin_lo[lid], 0u);
        atomicStore(&bin_hi[lid], 0u);
        atomicStore(&bin_n[lid], 0u);
        workgroupBarrier();
        let on_key = level < 4u;
        let shift = select(8u * (ibytes - 1u - (level - 4u)), 24u - 8u * level, on_key);
        for (var i = lid; i < p.cols; i += WG) {
            let v = x[sel_base + i];
            let k = key(v);
            let ik = p.cols - 1u - i;
            if ((k & kmask) != kval || (ik & imask) != ival) { continue; }
            let w = kept_weight(v, k, ik);
            if (w.x == 0u && w.y == 0u) { continue; }
            let d = (select(ik, k, on_key) >> shift) & 0xffu;
            let old = atomicAdd(&bin_lo[d], w.x);
            let hi = w.y + select(0u, 1u, old + w.x < old);
            if (hi != 0u) { atomicAdd(&bin_hi[d], hi); }
            atomicAdd(&bin_n[d], 1u);
            atomicStore(&bin_at[d], i);
        }
        workgroupBarrier();
        if (lid == 0u) {
            var d = BINS;
            for (var b = BINS; b > 0u; b--) {
                let h = vec2<u32>(atomicLoad(&bin_lo[b - 1u]), atomicLoad(&bin_hi[b - 1u]));
                if (less64(rem, h)) {
                    d = b - 1u;
                    break;
                }
                rem = sub64(rem, h);
            }
            // d == BINS (t past the kept weight) cannot happen: t < T,
            // and the kept bin's columns weigh more than rem. NONE then.
            found.done = select(0u, 1u, d == BINS || atomicLoad(&bin_n[d]) == 1u || level + 1u == 4u + ibytes);
            found.i = NONE;
            found.w = vec2<u32>(0u);
            if (d != BINS) {
                let i = atomicLoad(&bin_at[d]);
                let v = x[sel_base + i];
                found.i = i;
                found.before = sub64(t, rem);
                found.w = kept_weight(v, key(v), p.cols - 1u - i);
            }
            found.digit = d;
        }
        let done = workgroupUniformLoad(&found.done);
        let d = found.digit;
        if (on_key) {
            kmask |= 0xffu << shift;
            kval |= d << shift;
        } else {
            imask |= 0xffu << shift;
            ival |= d << shift;
        }
        if (done != 0u) { break; }
        workgroupBarrier(); // every invocation read found before the next round
    }
    let f = workgroupUniformLoad(&found);
    workgroupBarrier(); // every invocation read found before a later call writes it
    return f;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32{{template "sg_ids" .}}) {
{{- template "sg_init" .}}
    let row = wid.x;
    let base = row * p.cols;
    let c = cfg[row];
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
            state[2u * row] = top;
        }
        return;
    }

    // Over the whole row S (softmax's sum) is known before the rounds, so
    // is min-p's floor (the first candidate's weight is exp(0) = 1), and
    // without top-p so is the set's weight T: each round can then end the
    // set or land the draw. Sums are of fixed-point weights, exact.
    sel_base = base;
    sel_mx = mx;
    sel_t = c.temperature;
    sel_floor = 0.0;
    sel_bounded = false;
    var big = vec2<u32>(0u);  // S
    var kept = vec2<u32>(0u); // T
    var big_s = 0.0;          // S in f32, for min-p
    if (whole) {
        big = kept_sum(lid); // S: every unmasked column
        big_s = real(big);
        sel_s = big_s;
        kept = big;
        if (c.min_p > 0.0) {
            sel_floor = 1.0 / big_s * c.min_p;
            kept = kept_sum(lid);
        }
    }
    let floor_p = sel_floor;
    let cut_at = mulhi64(big, frac64(c.top_p)); // top-p's cut: the running weight passes it

    // Round r ranks candidate r: the largest value after candidate r-1.
    let draw = draws[row * p.max_chain + state[2u * row + 1u]];
    let draw_at = mulhi64(kept, draw); // the draw: the running weight passes it
    var prev_v = 0.0;
    var prev_i = NONE;
    var n = 0u;          // candidates ranked
    var end = 0u;        // the set's size once known
    var cum = vec2<u32>(0u); // the running weight
    var picked = false;
    var early = false;   // radix selection needed, known before the 256th round
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
            let wf = fixed(w);
            cand_i[r] = prev_i;
            cand_p[r] = w;
            // What the rest of the 256 could still add, each no heavier
            // than this one (f32: it only decides when to give up).
            let rest = f32(KMAX - 1u - r) * w;
            if (r > 0u && bitcast<u32>(prev_v) == NEG_INF) {
                end = r; // masked values end the set (dropMasked)
            } else if (whole) {
                let pr = w / big_s;
                let prev = cum;
                cum = add64(cum, wf);
                if (c.min_p > 0.0 && r > 0u && pr < floor_p) {
                    end = r;
                } else if (top_p) {
                    if (less64(cut_at, cum)) {
                        end = r + 1u;
                    } else if (p.cols > KMAX && real(sub64(cut_at, cum)) > rest) {
                        early = true; // the rest of the 256 cannot reach top-p
                    }
                } else if (r > 0u) {
                    // A second candidate: the set is not one token, so
                    // the draw is used; walk candidate 0, then this one.
                    if (r == 1u && less64(draw_at, prev)) {
                        picked = true;
                        token = cand_i[0];
                    } else if (less64(draw_at, cum)) {
                        picked = true;
                        token = prev_i;
                    } else if (p.cols > KMAX && real(sub64(draw_at, cum)) > rest) {
                        early = true; // the rest of the 256 cannot hold the draw
                    }
                }
            }
            if (end != 0u || picked || early) { flag = 1u; }
        }
        workgroupBarrier();
        if (workgroupUniformLoad(&flag) != 0u) { break; }
    }
    // Radix selection where the ranked candidates do not settle the row.
    if (lid == 0u) {
        var radix = false;
        if (!picked && whole) {
            if (end == 0u && n == p.cols) { end = n; }
            radix = end == 0u;
        }
        flag = select(0u, 1u, radix);
    }
    if (workgroupUniformLoad(&flag) != 0u) {
        // The set holds two columns or more: the rounds settle a set of
        // one (top-p's cut at the first round, min-p's and a mask's at
        // the second, and neither gives up before).
        if (top_p && less64(cut_at, kept)) {
            let cut = select_at(cut_at, lid);
            kept = add64(cut.before, cut.w);
            let v = x[base + cut.i];
            sel_bound = vec2<u32>(key(v), p.cols - 1u - cut.i);
            sel_bounded = true;
        }
        let f = select_at(mulhi64(kept, draw), lid);
        if (lid == 0u) {
            let token = select(top, f.i, f.i != NONE);
            result[row] = i32(token);
            state[2u * row] = token;
            state[2u * row + 1u] += 1u;
        }
        return;
    }
    if (lid != 0u) { return; }
    var used = 0u;
    if (picked) {
        used = 1u;
    } else if (whole && !top_p) {
        if (end > 1u) {
            token = cand_i[end - 1u]; // the draw left short (an exp not monotone): the last, as pick does
            used = 1u;
        }
    } else {
        if (!whole) {
            // The top-k set: S over its candidates, masked ones cut
            // first, then min-p and top-p as filter applies them.
            let m = select(n, end, end != 0u);
            big = vec2<u32>(0u);
            for (var i = 0u; i < m; i++) { big = add64(big, fixed(cand_p[i])); }
            let s32 = real(big);
            let cut = mulhi64(big, frac64(c.top_p));
            let floor_k = cand_p[0] / s32 * c.min_p;
            end = m;
            cum = vec2<u32>(0u);
            for (var i = 0u; i < m; i++) {
                if (c.min_p > 0.0 && i > 0u && cand_p[i] / s32 < floor_k) { end = i; break; }
                cum = add64(cum, fixed(cand_p[i]));
                if (top_p && less64(cut, cum)) { end = i + 1u; break; }
            }
        }
        if (end > 1u) {
            kept = vec2<u32>(0u);
            for (var i = 0u; i < end; i++) { kept = add64(kept, fixed(cand_p[i])); }
            let at = mulhi64(kept, draw);
            token = cand_i[end - 1u];
            cum = vec2<u32>(0u);
            for (var i = 0u; i < end; i++) {
                cum = add64(cum, fixed(cand_p[i]));
                if (less64(at, cum)) { token = cand_i[i]; break; }
            }
            used = 1u;
        }
    }
    result[row] = i32(token);
    state[2u * row] = token;
    state[2u * row + 1u] += used;
}
