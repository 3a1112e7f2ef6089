{{define "quant_format"}}
{{- /* The weight formats of the grouped integer kernels (matmul_quant_gemv,
matmul_quant_gemm, embed_quant), chosen by Fusion.Weight: Tessera's int4
and int8 (models/dtype Int4, Int8) and every GGUF block type at its own
bits (dtype.Blocks: "q4_k", "q6_k", "iq4_xs", "mxfp4", ...). Each declares
the bindings codes (4) and scales (5) and:

  GK, GV      the inputs a group holds, and its vec4s (GK / 4);
  HALVES      whether inputs 0..GK/2-1 and GK/2.. have scales of their own;
  MINS        whether values have a min (or an offset, which is one: the
              min of a code offset by o is −o times the scale);
  QS          the factors that codes4's lanes are divided by;
  struct Grp  a group: its code words and s = (scale, scale of the second
              half, min, min of the second half);
  fn grp(row: u32, gi: u32) -> Grp            group gi of weight row row;
  fn codes4(g: Grp, v: u32) -> vec4<f32>      the codes q of inputs 4v..4v+3,
              lane i times 1 / QS[i].

A value is s·q + m with s·q exact in f32 (an f16 times a factor of at most
8 bits, times a code of at most 8 bits), so that the one rounding of the
sum gives the Go reference's value bit for bit, fused or not (the
reference computes f32(s·(q − o)) + m, the same real number). The layouts
are models/dtype's (Int4, Int8, Blocks). */}}
{{- if eq .Weight "int4"}}{{template "format_int4"}}
{{- else if eq .Weight "int8"}}{{template "format_int8"}}
{{- else}}{{template "format_blocks" .}}{{end}}
{{end}}

{{define "format_int4"}}
// int4: groups of 32 inputs, one vec4<u32> of nibbles (word w: inputs
// 8w..8w+7, input 8w+i in bits 4i..4i+3) and one word of f16 scale (low)
// and min (high).
@group(0) @binding(4) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> scales: array<u32>;
const GK = 32u;
const GV = 8u;
const HALVES = false;
const MINS = true;
// MASK keeps the four nibbles of a half word in place: codes4's lane i
// holds 16^i times its code, which QS undoes once a group, so that a value
// costs an and, a conversion and a multiply-add (the shift of the high half
// aside), not a shift and the scale's multiply-add besides.
const MASK = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
const QS = vec4<f32>(1.0, 1.0 / 16.0, 1.0 / 256.0, 1.0 / 4096.0);
struct Grp { w: vec4<u32>, s: vec4<f32> }
fn grp(row: u32, gi: u32) -> Grp {
    let at = row * p.groups + gi;
    let sm = unpack2x16float(scales[at]);
    return Grp(codes[at], vec4<f32>(sm.x, sm.x, sm.y, sm.y));
}
fn codes4(g: Grp, v: u32) -> vec4<f32> {
    return vec4<f32>(vec4<u32>(g.w[v / 2u] >> (16u * (v % 2u))) & MASK);
}
{{end}}

{{define "format_int8"}}
// int8: groups of 16 inputs, one vec4<u32> of bytes (input 4w+i in byte i
// of word w) and one word of f16 scale and min.
@group(0) @binding(4) var<storage, read> codes: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> scales: array<u32>;
const GK = 16u;
const GV = 4u;
const HALVES = false;
const MINS = true;
const QS = vec4<f32>(1.0);
const BYTES = vec4<u32>(0u, 8u, 16u, 24u);
struct Grp { w: vec4<u32>, s: vec4<f32> }
fn grp(row: u32, gi: u32) -> Grp {
    let at = row * p.groups + gi;
    let sm = unpack2x16float(scales[at]);
    return Grp(codes[at], vec4<f32>(sm.x, sm.x, sm.y, sm.y));
}
fn codes4(g: Grp, v: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(g.w[v]) >> BYTES) & vec4<u32>(255u));
}
{{end}}

{{define "format_blocks"}}
{{- $w := .Weight}}
// {{$w}} at the file's bits (models/dtype Blocks): groups of 32 inputs, CW
// code words each (row-major: group gi of row r at (r·groups + gi)·CW),
// and per scale block of SBG groups SB bytes (row r's from word r·srow();
// with SPLIT a row's f16 d first, 2 bytes a block, then the blocks'
// other SB − 2).
@group(0) @binding(4) var<storage, read> codes: array<u32>;
@group(0) @binding(5) var<storage, read> scales: array<u32>;
const GK = 32u;
const GV = 8u;
{{- if eq $w "q4_0" "iq4_nl" "mxfp4" "q4_k" "iq4_xs"}}
const CW = 4u;
{{- else if eq $w "q5_0" "q5_1" "q5_k"}}
const CW = 5u;
{{- else if eq $w "q6_k"}}
const CW = 6u;
{{- else if eq $w "q8_0"}}
const CW = 8u;
{{- else if eq $w "q2_k"}}
const CW = 2u;
{{- else if eq $w "q3_k"}}
const CW = 3u;
{{- end}}
{{- if eq $w "q4_0" "q5_0" "q8_0" "iq4_nl"}}
const SBG = 2u;
const SB = 4u;
{{- else if eq $w "q5_1"}}
const SBG = 1u;
const SB = 4u;
{{- else if eq $w "mxfp4"}}
const SBG = 4u;
const SB = 4u;
{{- else if eq $w "q4_k" "q5_k"}}
const SBG = 8u;
const SB = 16u;
{{- else if eq $w "q3_k"}}
const SBG = 8u;
const SB = 14u;
{{- else if eq $w "q6_k"}}
const SBG = 8u;
const SB = 18u;
{{- else if eq $w "q2_k"}}
const SBG = 8u;
const SB = 20u;
{{- else if eq $w "iq4_xs"}}
const SBG = 8u;
const SB = 8u;
{{- end}}
const HALVES = {{if eq $w "q6_k" "q3_k" "q2_k"}}true{{else}}false{{end}};
const MINS = {{if eq $w "iq4_nl" "iq4_xs" "mxfp4" "q8_0"}}false{{else}}true{{end}};
{{- if eq $w "q4_0" "q5_0" "q5_1" "q4_k" "q5_k" "q6_k"}}
// Nibbles masked in place as int4's (lane i times 16^i), the high bits
// shifted to meet them.
const QS = vec4<f32>(1.0, 1.0 / 16.0, 1.0 / 256.0, 1.0 / 4096.0);
{{- else}}
const QS = vec4<f32>(1.0);
{{- end}}
const MASK = vec4<u32>(0xfu, 0xf0u, 0xf00u, 0xf000u);
const NIB = vec4<u32>(0u, 4u, 8u, 12u);
const HIGH = vec4<u32>(4u, 8u, 12u, 16u); // bit 4 of lane i's code, in place

// A group's code words: 0..3 in a, 4..7 in b (vectors, which every naga
// indexes with a variable, as it does not a value's array).
struct Grp { a: vec4<u32>, b: vec4<u32>, s: vec4<f32> }

// srow is the scale words of a row.
fn srow() -> u32 { return ((p.groups + SBG - 1u) / SBG * SB + 3u) / 4u; }

// sbyte is byte k of the scale words from word at.
fn sbyte(at: u32, k: u32) -> u32 { return (scales[at + k / 4u] >> (8u * (k % 4u))) & 255u; }

// nibs4 is the low 4 bits of inputs 4v..4v+3 in place (lane i times 16^i).
fn nibs4(g: Grp, v: u32) -> vec4<u32> { return vec4<u32>(g.a[v / 2u] >> (16u * (v % 2u))) & MASK; }

// bits4 is the bits of a High1 plane (word h) of inputs 4v..4v+3: bit b
// of the word is input 2b's, bit 16 + b input 2b + 1's.
fn bits4(h: u32, v: u32) -> vec4<u32> {
    return (vec4<u32>(h) >> vec4<u32>(2u * v, 2u * v + 16u, 2u * v + 1u, 2u * v + 17u)) & vec4<u32>(1u);
}

// fields4 is the 2-bit fields of inputs 4v..4v+3 in a plane of two words
// a and b: input i's in byte (i / 2) % 8 at bit 2(i % 2) + 4(i / 16).
fn fields4(a: u32, b: u32, v: u32) -> vec4<u32> {
    let w = select(a, b, (v % 4u) >= 2u);
    return (vec4<u32>(w) >> (vec4<u32>(0u, 2u, 8u, 10u) + 16u * (v % 2u) + 4u * (v / 4u))) & vec4<u32>(3u);
}
{{- if eq $w "iq4_nl" "iq4_xs"}}

// The IQ4 codebook (ggml's kvalues_iq4nl).
var<private> LEVELS: array<f32, 16> = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);
{{- else if eq $w "mxfp4"}}

// E2M1's values times two (ggml's kvalues_mxfp4); the scale is half the
// block's E8M0 power of two.
var<private> LEVELS: array<f32, 16> = array<f32, 16>(0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);
{{- end}}

fn grp(row: u32, gi: u32) -> Grp {
    var g: Grp;
    let at = (row * p.groups + gi) * CW;
    for (var i = 0u; i < min(CW, 4u); i++) {
        g.a[i] = codes[at + i];
    }
    for (var i = 4u; i < CW; i++) {
        g.b[i - 4u] = codes[at + i];
    }
    let rs = row * srow(); // the row's scale words
    let sb = rs + gi / SBG * SB / 4u; // the group's scale block, where word-aligned
{{- if eq $w "q4_0" "q5_0" "q8_0" "iq4_nl"}}
    let d = unpack2x16float(scales[sb])[gi % 2u];
{{- if eq $w "q4_0"}}
    g.s = vec4<f32>(d, d, -8.0 * d, -8.0 * d);
{{- else if eq $w "q5_0"}}
    g.s = vec4<f32>(d, d, -16.0 * d, -16.0 * d);
{{- else}}
    g.s = vec4<f32>(d, d, 0.0, 0.0);
{{- end}}
{{- else if eq $w "q5_1"}}
    let dm = unpack2x16float(scales[sb]);
    g.s = vec4<f32>(dm.x, dm.x, dm.y, dm.y);
{{- else if eq $w "mxfp4"}}
    let e = sbyte(sb, gi % 4u);
    let d = bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u)); // 2^(e − 128)
    g.s = vec4<f32>(d, d, 0.0, 0.0);
{{- else if eq $w "q4_k" "q5_k"}}
    let dm = unpack2x16float(scales[sb]);
    let j = gi % 8u;
    var sc: u32;
    var m: u32;
    if (j < 4u) {
        sc = sbyte(sb + 1u, j) & 63u;
        m = sbyte(sb + 1u, j + 4u) & 63u;
    } else {
        sc = (sbyte(sb + 1u, j + 4u) & 15u) | ((sbyte(sb + 1u, j - 4u) >> 6u) << 4u);
        m = (sbyte(sb + 1u, j + 4u) >> 4u) | ((sbyte(sb + 1u, j) >> 6u) << 4u);
    }
    let s = dm.x * f32(sc);
    let mn = -(dm.y * f32(m));
    g.s = vec4<f32>(s, s, mn, mn);
{{- else if eq $w "q6_k"}}
    let b = gi / 8u;
    let d = unpack2x16float(scales[rs + b / 2u])[b % 2u];
    let f = 2u * (p.groups / 8u) + 16u * b + 2u * (gi % 8u); // its halves' factors
    let lo = d * f32((i32(sbyte(rs, f)) << 24u) >> 24u);
    let hi = d * f32((i32(sbyte(rs, f + 1u)) << 24u) >> 24u);
    g.s = vec4<f32>(lo, hi, -32.0 * lo, -32.0 * hi);
{{- else if eq $w "q3_k"}}
    let b = gi / 8u;
    let d = unpack2x16float(scales[rs + b / 2u])[b % 2u];
    let f0 = 2u * (p.groups / 8u) + 12u * b; // the super-block's 12 factor bytes
    var f: vec2<f32>;
    for (var h = 0u; h < 2u; h++) {
        let k = 2u * (gi % 8u) + h; // the 16 inputs' factor, 6 bits less 32
        let low = (sbyte(rs, f0 + k % 8u) >> (4u * (k / 8u))) & 15u;
        let top = (sbyte(rs, f0 + 8u + k % 4u) >> (2u * (k / 4u))) & 3u;
        f[h] = d * f32(i32(low | (top << 4u)) - 32);
    }
    g.s = vec4<f32>(f.x, f.y, -4.0 * f.x, -4.0 * f.y);
{{- else if eq $w "q2_k"}}
    let dm = unpack2x16float(scales[sb]);
    let j = gi % 8u;
    let a = sbyte(sb + 1u, 2u * j);
    let b = sbyte(sb + 1u, 2u * j + 1u);
    g.s = vec4<f32>(dm.x * f32(a & 15u), dm.x * f32(b & 15u), -(dm.y * f32(a >> 4u)), -(dm.y * f32(b >> 4u)));
{{- else if eq $w "iq4_xs"}}
    let w0 = scales[sb];
    let j = gi % 8u;
    let ls = ((scales[sb + 1u] >> (4u * j)) & 15u) | (((w0 >> (16u + 2u * j)) & 3u) << 4u);
    let s = unpack2x16float(w0).x * f32(i32(ls) - 32);
    g.s = vec4<f32>(s, s, 0.0, 0.0);
{{- end}}
    return g;
}

fn codes4(g: Grp, v: u32) -> vec4<f32> {
{{- if eq $w "q4_0" "q4_k"}}
    return vec4<f32>(nibs4(g, v));
{{- else if eq $w "q5_0" "q5_1" "q5_k"}}
    return vec4<f32>(nibs4(g, v) | (bits4(g.b.x, v) << HIGH));
{{- else if eq $w "q6_k"}}
    return vec4<f32>(nibs4(g, v) | (fields4(g.b.x, g.b.y, v) << HIGH));
{{- else if eq $w "q2_k"}}
    return vec4<f32>(fields4(g.a.x, g.a.y, v));
{{- else if eq $w "q3_k"}}
    return vec4<f32>(fields4(g.a.x, g.a.y, v) | (bits4(g.a.z, v) << vec4<u32>(2u)));
{{- else if eq $w "q8_0"}}
    // Bytes 0..15 the even inputs, 16..31 the odd ones, int8.
    let b = 16u * (v % 2u);
    let e = g.a[v / 2u];
    let o = g.b[v / 2u];
    return vec4<f32>(vec4<i32>(vec4<u32>(e, o, e, o) << vec4<u32>(24u - b, 24u - b, 16u - b, 16u - b)) >> vec4<u32>(24u));
{{- else}}
    let q = (vec4<u32>(g.a[v / 2u] >> (16u * (v % 2u))) >> NIB) & vec4<u32>(15u);
    return vec4<f32>(LEVELS[q.x], LEVELS[q.y], LEVELS[q.z], LEVELS[q.w]);
{{- end}}
}
{{end}}
