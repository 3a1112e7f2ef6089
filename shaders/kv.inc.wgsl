{{/*
kv.inc.wgsl: the KV cache's formats, for the kernels that read or write it
(shaders.KVKernels), specialised by Fusion.KV: "" (f32), "f16" or "int8".

The cache of a layer holds one record per (slot, kv head): the head's
values padded with zeros to HV = ceil(head_dim / 4) groups of 4, each
group one element of the binding, and for int8 the record's scale after
them:

  f32   HV × vec4<f32>
  f16   HV × vec2<u32>, two halves a word (pack2x16float: core WGSL, no
        shader-f16 needed)
  int8  HV × u32, four codes a word, lowest byte first, then the f32
        scale's bits: value = scale·code, codes in -127..127

Record r of kv head h at slot s is (s·kv_heads + h), its first element
r·(HV, or HV + 1 for int8). Twin: runtime/cpu's kvStore (put, get) and
QuantizeKV8.
*/}}

{{- /* With Fusion.F16 (shader-f16) an f16 record is HV × vec4<f16>: the
same bytes, read and written without packing. */}}
{{define "kv_elem"}}{{if eq .KV "int8"}}u32{{else if and (eq .KV "f16") .F16}}vec4<f16>{{else if eq .KV "f16"}}vec2<u32>{{else}}vec4<f32>{{end}}{{end}}

{{define "kv_attend_bindings"}}
// What both attention kernels read: the queries, the layer's cache, and
// each row's position, sequence and its sequence's block table. With Rope
// (attention_lane) the kernel also stores the rows' keys and values.
@group(0) @binding(4) var<storage, read> q: array<f32>;
@group(0) @binding(5) var<storage, {{if .Rope}}read_write{{else}}read{{end}}> kc: array<{{template "kv_elem" .}}>;
@group(0) @binding(6) var<storage, {{if .Rope}}read_write{{else}}read{{end}}> vc: array<{{template "kv_elem" .}}>;
@group(0) @binding(7) var<storage, read> pos: array<i32>;
@group(0) @binding(8) var<storage, read> seq: array<i32>;
@group(0) @binding(9) var<storage, read> tables: array<i32>;
{{- end}}

{{define "decode_bindings"}}
// The bindings of the decode kernels (attention_decode, attention_lane),
// which write attention_combine's partials: part, then dst.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> part: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;
{{template "kv_attend_bindings" .}}
{{- end}}

{{define "kv_rec"}}
// kv_rec is the first element of the record of kv head `head` at slot
// `slot`, for heads of hv groups of 4 values.
fn kv_rec(slot: u32, head: u32, kv_heads: u32, hv: u32) -> u32 {
    return (slot * kv_heads + head) * (hv{{if eq .KV "int8"}} + 1u{{end}});
}

// The coding of one group of 4 values, for a head whose largest absolute
// value is amax (which only int8 uses): kv_pack is the element stored,
// kv_unpack the values read back before kv_unit, and kv_unit what they
// are then multiplied by. A kernel that attends to a head it stores
// itself (attention_lane with Rope) reads it as kv_unpack(kv_pack(x)),
// the same values as from the cache.
fn kv_unit(amax: f32) -> f32 {
{{- if eq .KV "int8"}}
    return amax / 127.0;
{{- else}}
    return 1.0;
{{- end}}
}

fn kv_pack(x: vec4<f32>, amax: f32) -> {{template "kv_elem" .}} {
{{- if eq .KV "int8"}}
    var inv = 0.0;
    if (amax > 0.0) {
        inv = 127.0 / amax;
    }
    let b = vec4<u32>(vec4<i32>(clamp(round(x * inv), vec4<f32>(-127.0), vec4<f32>(127.0)))) & vec4<u32>(0xffu);
    return b.x | (b.y << 8u) | (b.z << 16u) | (b.w << 24u);
{{- else if and (eq .KV "f16") .F16}}
    return vec4<f16>(clamp(x, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
{{- else if eq .KV "f16"}}
    let h = clamp(x, vec4<f32>(-65504.0), vec4<f32>(65504.0));
    return vec2<u32>(pack2x16float(h.xy), pack2x16float(h.zw));
{{- else}}
    return x;
{{- end}}
}

fn kv_unpack(w: {{template "kv_elem" .}}) -> vec4<f32> {
{{- if eq .KV "int8"}}
    return vec4<f32>(vec4<i32>(i32(w << 24u), i32(w << 16u), i32(w << 8u), i32(w)) >> vec4<u32>(24u));
{{- else if and (eq .KV "f16") .F16}}
    return vec4<f32>(w);
{{- else if eq .KV "f16"}}
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
{{- else}}
    return w;
{{- end}}
}
{{end}}

{{define "kv_read"}}
// {{.Buf}}_raw is group e of the record at rec as stored, before its scale.
fn {{.Buf}}_raw(rec: u32, e: u32) -> vec4<f32> {
    return kv_unpack({{.Buf}}[rec + e]);
}

// {{.Buf}}_scale is what the record's raw values are multiplied by.
fn {{.Buf}}_scale(rec: u32, hv: u32) -> f32 {
{{- if eq .KV "int8"}}
    return bitcast<f32>({{.Buf}}[rec + hv]);
{{- else}}
    return 1.0;
{{- end}}
}
{{end}}

{{define "kv_put"}}
// {{.Buf}}_put stores the head of hd values at {{.Src}}[at..] as the record
// at rec, zero past hd.
fn {{.Buf}}_put(rec: u32, at: u32, hd: u32) {
    let hv = (hd + 3u) / 4u;
    var amax = 0.0;
{{- if eq .KV "int8"}}
    for (var d = 0u; d < hd; d++) {
        amax = max(amax, abs({{.Src}}[at + d]));
    }
{{- end}}
    for (var e = 0u; e < hv; e++) {
        var x = vec4<f32>(0.0);
        for (var c = 0u; c < 4u; c++) {
            if (4u * e + c < hd) {
                x[c] = {{.Src}}[at + 4u * e + c];
            }
        }
        {{.Buf}}[rec + e] = kv_pack(x, amax);
    }
{{- if eq .KV "int8"}}
    {{.Buf}}[rec + hv] = bitcast<u32>(kv_unit(amax));
{{- end}}
}
{{end}}

{{define "chunk_span"}}
{{- /* The positions [t0, t1) of chunk (of groups.y) of a decode row's
sequence, within its window, and where its block table starts: the split
of attention_decode and attention_lane. Needs row, chunk, groups, pos, seq,
p. */}}
    let chunks = groups.y;
    let n = min(u32(pos[row]) + 1u, p.table_width * p.block_size);
    var lo = 0u; // the first position the row sees: its window's
    if (p.window > 0u && n > p.window) {
        lo = n - p.window;
    }
    let table = u32(seq[row]) * p.table_width;
    let len = (n - lo + chunks - 1u) / chunks;
    let t0 = min(n, lo + chunk * len);
    let t1 = min(n, t0 + len);
{{- end}}
