// matmul_int4_gemv: dst[r, col0 + j] = x[r, :] · w[j, :] for the rows j of
// one part of an int4 weight (models/dtype Int4) and a block of up to MAXM
// rows r of x (block g.z: rows g.z·MAXM ..., of the first min(cap,
// step.rows)). The decode case: the weight is read once per step, 5 bits a
// value instead of 32, and the kernel should be bound by memory bandwidth.
//
// The weight is two arrays: codes, one vec4<u32> (32 nibbles) per group of
// 32 inputs, and scales, one u32 per group holding the f16 scale (low half)
// and min (high half). Word w of a group holds inputs 8w..8w+7, input 8w+i
// in bits 4i..4i+3. Row j's groups are j·groups ... j·groups + groups − 1.
//
// x comes prepared by int4_prep: xq holds x with input 8w+i scaled by
// 2^-4i (2^-24 for i = 7) and padded with zeros to whole groups, and xsum
// each group's sum of x. A code word masked in place, nibble i read as
// q·2^4i (exact), times xq is then q·x exactly, so a group costs a mask, a
// conversion and a multiply-add per value, and
//
//   Σ x·(scale·q + min) = scale·Σ q·x + min·Σ x
//
// once per group and row. (The expanded values are those of the Go
// reference, dtype.Int4Value, but the sum is formed in this other order;
// embed_int4 and matmul_int4_gemm expand the values themselves.)
//
// Algorithm (as matmul_gemv): a workgroup of 256 invocations computes
// NC = 256 / TPC columns; the TPC invocations of a column take its groups
// lane, lane + TPC, ... (neighbouring invocations read neighbouring 16-byte
// code vectors and 4-byte scale words: coalesced), each code vector and
// scale word loaded once for all the rows of the block; the partial sums of
// a column are added in a tree in workgroup memory. With TPC = 1 (CPU
// adapters, whose invocations are the SIMD lanes of a thread) each
// invocation owns a column and there is no barrier. Any k works (the
// padding of a short last group meets zeros of xq). Twin: runtime/cpu
// MatMulQ (summed in another order).
struct Params { k: u32, n: u32, cap: u32, col0: u32, nrows: u32, groups: u32, tpc: u32, maxm: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> xq: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> xsum: array<f32>;
@group(0) @binding(5) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read> scales: array<u32>;

// TPC is the number of invocations per output column, a power of two ≤ WG;
// MAXM the rows of a block. Params repeat them, so that call sites of
// different constants never share a cached pipeline.
override TPC: u32 = 16u;
override MAXM: u32 = 1u;

const WG = 256u;
const NC = WG / TPC;

// partial[m * WG + t] is invocation t's sum for row m of the block.
const PARTIALS = WG * MAXM;
var<workgroup> partial: array<f32, PARTIALS>;

// Nibbles 0..3 and 4..7 of a word, masked in place (the last shifted down
// by 4 so that every value is a positive i32).
const LM = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
const HM = vec4<u32>(0xf0000u, 0xf00000u, 0xf000000u, 0xf000000u);
const HS = vec4<u32>(0u, 0u, 0u, 4u);

fn lo(word: u32) -> vec4<f32> { return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(word) & LM)); }
fn hi(word: u32) -> vec4<f32> { return vec4<f32>(bitcast<vec4<i32>>((vec4<u32>(word) >> HS) & HM)); }

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) t: u32,
        @builtin(workgroup_id) g: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
    let r0 = g.z * MAXM;
    let rows = min(min(p.cap, step.rows) - r0, MAXM); // rows of this block
    let lane = t % TPC;
    let j = (g.x + g.y * groups.x) * NC + t / TPC; // column within the part
    let xbase = r0 * p.groups; // group index of row r0 in xq and xsum

    var acc: array<f32, MAXM>;
    if (j < p.nrows) {
        let base = j * p.groups;
        for (var gi = lane; gi < p.groups; gi += TPC) {
            let c = codes[base + gi];
            let sm = unpack2x16float(scales[base + gi]);
            let w0 = lo(c.x);
            let w1 = hi(c.x);
            let w2 = lo(c.y);
            let w3 = hi(c.y);
            let w4 = lo(c.z);
            let w5 = hi(c.z);
            let w6 = lo(c.w);
            let w7 = hi(c.w);
            for (var m = 0u; m < MAXM; m++) {
                if (m < rows) {
                    let xg = xbase + m * p.groups + gi;
                    let xr = xg * 8u;
                    let d = dot(w0, xq[xr]) + dot(w1, xq[xr + 1u]) + dot(w2, xq[xr + 2u]) + dot(w3, xq[xr + 3u])
                          + dot(w4, xq[xr + 4u]) + dot(w5, xq[xr + 5u]) + dot(w6, xq[xr + 6u]) + dot(w7, xq[xr + 7u]);
                    acc[m] += sm.x * d + sm.y * xsum[xg];
                }
            }
        }
    }

    if (TPC == 1u) {
        if (j < p.nrows) {
            for (var m = 0u; m < rows; m++) {
                dst[(r0 + m) * p.n + p.col0 + j] = acc[m];
            }
        }
        return;
    }
    for (var m = 0u; m < MAXM; m++) {
        partial[m * WG + t] = acc[m];
    }
    workgroupBarrier();
    for (var s = TPC / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var m = 0u; m < MAXM; m++) {
                partial[m * WG + t] += partial[m * WG + t + s];
            }
        }
        workgroupBarrier();
    }
    if (lane == 0u && j < p.nrows) {
        for (var m = 0u; m < rows; m++) {
            dst[(r0 + m) * p.n + p.col0 + j] = partial[m * WG + t];
        }
    }
}
