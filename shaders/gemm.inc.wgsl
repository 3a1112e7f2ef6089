{{define "gemm"}}
{{- /* The tiled GEMM that matmul_gemm, matmul_f16_gemm, matmul_int4_gemm and int8
share (see matmul_gemm for the algorithm). The kernel declares Params (k,
n, cap, col0, nrows), the bindings (dst, x and its weight, then the
Fusion's), TM, BK and fn load_w(k0: u32, c0: u32, t: u32, wb: u32), which
writes the BN×BK tile of its weight at columns c0.., inputs k0.. into ws
(transposed: ws[kk * WS + c]), reading weight rows wb + c0.., zeros outside
the matrix.

With Experts (the grouped GEMM of a mixture of experts' prompt steps,
backend.ExpertProjection) the row tile g.y is entry g.y of the routing's
table (moe_route.wgsl, cut into blocks of up to BM pairs): up to BM (row,
slot) pairs that chose one expert e, whose matrix starts at weight row wb
of this part (none of the part's experts: no rows). The tile's x rows are
the pairs' tokens (or the pairs themselves with fz.slots), its outputs the
pairs' rows, through emit (down) or emit_pair (gate and up with the GLU);
with Pairs an invocation's four columns are two adjacent pairs, so that
gate and up meet in one invocation. So each workgroup reads its tile of
one expert's weights once for all the tile's pairs. */}}
{{template "fusion" .}}
const BM = 16u * TM;
const BN = 64u;
const XS = BM + 1u; // row stride of xs
const WS = BN + 1u; // row stride of ws

const XSIZE = BK * XS;
const WSIZE = BK * WS;
var<workgroup> xs: array<f32, XSIZE>; // xs[kk * XS + r] = x[r0 + r, k0 + kk]
var<workgroup> ws: array<{{if .F16}}f16{{else}}f32{{end}}, WSIZE>; // ws[kk * WS + c] = w[c0 + c, k0 + kk]; f16 with F16
{{- if .Experts}}
var<workgroup> xrow: array<u32, BM>; // the x row of each row of the tile
var<workgroup> orow: array<u32, BM>; // its output row
var<workgroup> tile_rows: u32;
{{- end}}

// tcol is column c (of 4) of invocation tx's register block: tx + 16c, so
// that neighbouring invocations read neighbouring words of ws{{if .Pairs}}; with
// Pairs 2tx, 2tx + 1, 2tx + 32 and 2tx + 33: a gate and its up together{{end}}.
fn tcol(tx: u32, c: u32) -> u32 {
{{- if .Pairs}}
    return 2u * tx + (c & 1u) + 32u * (c >> 1u);
{{- else}}
    return tx + 16u * c;
{{- end}}
}

@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) t: u32,
        @builtin(workgroup_id) g: vec3<u32>) {
    let c0 = g.x * BN;
    let tx = lid.x;
    let ty = lid.y;
{{- if .Experts}}
    let tab = fz.tab + 3u * g.y;
    let e = routes[tab];
    var n = min(routes[tab + 2u], BM);
    if (e < fz.e0 || e >= fz.e0 + fz.ne) {
        n = 0u;
    }
    let wb = (e - fz.e0) * p.nrows;
    for (var m = t; m < n; m += 256u) {
        let pair = routes[fz.ord + routes[tab + 1u] + m];
        xrow[m] = select(pair / fz.k, pair, fz.slots == 1u);
        orow[m] = pair;
    }
    if (t == 0u) { tile_rows = n; }
    // Every invocation read the same entry; the load (a barrier too) tells
    // the uniformity analysis so, and an empty entry ends here.
    let rows = workgroupUniformLoad(&tile_rows);
    if (rows == 0u) { return; }
{{- else}}
    let rows = min(p.cap, step.rows);
    let r0 = g.y * BM;
    let wb = 0u;
{{- end}}

    var acc: array<vec4<f32>, TM>; // acc[i][c]: row ty + 16i of the tile, column c0 + tcol(tx, c)
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        // Element el of a tile is (row el / BK, kk el % BK): 16 invocations
        // read 16 consecutive floats of one row.
        for (var el = t; el < BM * BK; el += 256u) {
            let k = k0 + el % BK;
            var v = 0.0;
{{- if .Experts}}
            let m = el / BK;
            if (m < rows && k < p.k) { v = x[xrow[m] * p.k + k]; }
{{- else}}
            let r = r0 + el / BK;
            if (r < rows && k < p.k) { v = x[r * p.k + k]; }
{{- end}}
            xs[(el % BK) * XS + el / BK] = v;
        }
        load_w(k0, c0, t, wb);
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk++) {
            let b = vec4<f32>(vec4(ws[kk * WS + tcol(tx, 0u)], ws[kk * WS + tcol(tx, 1u)], ws[kk * WS + tcol(tx, 2u)], ws[kk * WS + tcol(tx, 3u)]));
            for (var i = 0u; i < TM; i++) {
                acc[i] += xs[kk * XS + ty + 16u * i] * b;
            }
        }
        workgroupBarrier();
    }

    for (var i = 0u; i < TM; i++) {
{{- if .Experts}}
        let m = ty + 16u * i;
        if (m >= rows) { break; }
        let r = orow[m];
{{- if .Pairs}}
        for (var c = 0u; c < 4u; c += 2u) {
            let j = c0 + tcol(tx, c);
            if (j + 1u < p.nrows) { emit_pair(r, j, acc[i][c], acc[i][c + 1u]); }
        }
{{- else}}
        for (var c = 0u; c < 4u; c++) {
            let j = c0 + tcol(tx, c);
            if (j < p.nrows) { emit(r, j, acc[i][c]); }
        }
{{- end}}
{{- else}}
        let r = r0 + ty + 16u * i;
        if (r >= rows) { break; }
        for (var c = 0u; c < 4u; c++) {
            let j = c0 + tcol(tx, c);
            if (j < p.nrows) { dst[r * p.n + p.col0 + j] = acc[i][c]; }
        }
{{- end}}
    }
}
{{end}}
