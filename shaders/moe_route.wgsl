// moe_route: a mixture of experts' routing (backend.Experts.Route), in one
// workgroup. First each invocation routes rows t, t + WG, ...: of the
// row's E router logits, the K largest (the lower expert first among equal
// logits), each weighted by its softmax probability, divided by the sum of
// the K when p.norm. Then invocation 0 sorts the pairs (row, slot), p =
// row·K + slot, by expert (a counting sort, stable: rows in order within an
// expert) and cuts each expert's run into blocks of up to p.block pairs:
// the table the expert GEMVs read (fusion.inc.wgsl's block template), so
// that one workgroup's weight loads serve every pair of its block and each
// expert's weights are read once per p.block pairs that chose it. Entries
// past the last block, up to p.nblocks (what the products dispatch), get
// no pairs. Twin: runtime/cpu Route (the table is the GPU's own plan).
//
// routes holds, in u32 words: ids[P], weights[P] (f32 bits), order[P]
// (pairs sorted by expert), then table entries (expert, first index in
// order, pairs), P = p.pairs being the allocated rows × K.
struct Params { e: u32, k: u32, norm: u32, cap: u32, pairs: u32, block: u32, nblocks: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> routes: array<u32>;
@group(0) @binding(3) var<storage, read> logits: array<f32>;

const WG = 64u;
const MAXE = 1024u; // models.MaxExperts

var<workgroup> count: array<u32, MAXE>;
var<workgroup> next: array<u32, MAXE>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32) {
    let rows = min(p.cap, step.rows);
    for (var i = t; i < rows; i += WG) {
        let base = i * p.e;
        var mx = logits[base];
        for (var j = 1u; j < p.e; j++) {
            mx = max(mx, logits[base + j]);
        }
        var sum = 0.0;
        for (var j = 0u; j < p.e; j++) {
            sum += exp(logits[base + j] - mx);
        }
        var prev = -1;
        var pv = 0.0;
        var total = 0.0;
        for (var s = 0u; s < p.k; s++) {
            var best = -1;
            var bv = 0.0;
            for (var j = 0u; j < p.e; j++) {
                let v = logits[base + j];
                let after = prev < 0 || v < pv || (v == pv && i32(j) > prev);
                if (after && (best < 0 || v > bv)) {
                    best = i32(j);
                    bv = v;
                }
            }
            if (best < 0) { // only NaNs left: any expert, never out of range
                best = i32(s % p.e);
                bv = logits[base + u32(best)];
            }
            prev = best;
            pv = bv;
            let wgt = exp(bv - mx) / sum;
            routes[i * p.k + s] = u32(best);
            routes[p.pairs + i * p.k + s] = bitcast<u32>(wgt);
            total += wgt;
        }
        if (p.norm == 1u) {
            for (var s = 0u; s < p.k; s++) {
                let at = p.pairs + i * p.k + s;
                routes[at] = bitcast<u32>(bitcast<f32>(routes[at]) / total);
            }
        }
    }
    storageBarrier();
    workgroupBarrier();
    if (t != 0u) {
        return;
    }
    let n = rows * p.k;
    for (var e = 0u; e < p.e; e++) {
        count[e] = 0u;
    }
    for (var q = 0u; q < n; q++) {
        count[routes[q]] += 1u;
    }
    var start = 0u;
    for (var e = 0u; e < p.e; e++) {
        next[e] = start;
        start += count[e];
    }
    let ord = 2u * p.pairs;
    for (var q = 0u; q < n; q++) {
        let e = routes[q];
        routes[ord + next[e]] = q;
        next[e] += 1u;
    }
    let tab = 3u * p.pairs;
    var b = 0u;
    start = 0u;
    for (var e = 0u; e < p.e; e++) {
        for (var off = 0u; off < count[e]; off += p.block) {
            routes[tab + 3u * b] = e;
            routes[tab + 3u * b + 1u] = start + off;
            routes[tab + 3u * b + 2u] = min(p.block, count[e] - off);
            b += 1u;
        }
        start += count[e];
    }
    for (; b < p.nblocks; b++) {
        routes[tab + 3u * b] = 0u;
        routes[tab + 3u * b + 1u] = 0u;
        routes[tab + 3u * b + 2u] = 0u;
    }
}
