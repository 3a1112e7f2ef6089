{{define "rope"}}
// rope_pair is where the two values of rotation pair `pair` of the head at
// base are: adjacent (layout 0, GGUF and llama2.c) or half a rotation
// apart (layout 1, Hugging Face's halves).
fn rope_pair(base: u32, pair: u32, half: u32, halves: u32) -> vec2<u32> {
    if (halves == 0u) {
        return vec2<u32>(base + 2u * pair, base + 2u * pair + 1u);
    }
    return vec2<u32>(base + pair, base + pair + half);
}

// rope_freq is value i of freqs: a storage array of f32, or, run with
// "uniform", a uniform array of vec4s (for a kernel with no storage
// binding to spare).
fn rope_freq(i: u32) -> f32 {
{{- if eq . "uniform"}}
    return freqs[i / 4u][i % 4u];
{{- else}}
    return freqs[i];
{{- end}}
}

// rope_cos_sin is the cosine and sine of pair's angle at position at, from
// the host's inverse frequencies (freqs: half of them, then the scale of
// every cosine and sine, YaRN's and LongRoPE's attention factor or 1).
fn rope_cos_sin(at: i32, pair: u32, half: u32) -> vec2<f32> {
    let angle = f32(at) * rope_freq(pair);
    return vec2<f32>(cos(angle), sin(angle)) * rope_freq(half);
}
{{end}}

{{define "rope_rotate"}}
// rotate_{{.}} turns rotation pair `pair` of the head at base of {{.}} in
// place, by the angle of position at.
fn rotate_{{.}}(base: u32, pair: u32, half: u32, halves: u32, at: i32) {
    let ab = rope_pair(base, pair, half, halves);
    let cs = rope_cos_sin(at, pair, half);
    let v0 = {{.}}[ab.x];
    let v1 = {{.}}[ab.y];
    {{.}}[ab.x] = v0 * cs.x - v1 * cs.y;
    {{.}}[ab.y] = v0 * cs.y + v1 * cs.x;
}
{{end}}

{{define "rope_value"}}
// rope_{{.}} is value d of the head at base of {{.}} turned by the angle of
// position at, as rotate_{{.}} would leave it, without writing: for a
// kernel that rotates a head in registers. Values past the 2·half rotated
// ones (partial rotary) are as they are.
fn rope_{{.}}(base: u32, d: u32, half: u32, halves: u32, at: i32) -> f32 {
    if (d >= 2u * half) {
        return {{.}}[base + d];
    }
    var pair = d / 2u;
    var first = d % 2u == 0u;
    if (halves != 0u) {
        pair = d % half;
        first = d < half;
    }
    let ab = rope_pair(base, pair, half, halves);
    let cs = rope_cos_sin(at, pair, half);
    let v0 = {{.}}[ab.x];
    let v1 = {{.}}[ab.y];
    if (first) {
        return v0 * cs.x - v1 * cs.y;
    }
    return v0 * cs.y + v1 * cs.x;
}
{{end}}
