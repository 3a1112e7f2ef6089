// lora_gather: the first product of token-embedding adapters, a gather:
// h[r, t] = A_j[t, token_r] for t < rank_j, for each row r whose slot
// j = rows[r].slot is valid, and zero past the slot's rank and for rows
// without one (h's stride is R). A lookup is the one-hot token times the
// table, so x·Aᵀ is the token's row of Aᵀ, which the slot's A holds
// already ([vocab, Σ padded rank], transposed as lora_shrink reads it):
// no product. lora_expand then adds s·h·Bᵀ to the looked-up rows, as
// llama.cpp's llm_build_inp_embd adds its adapters. Each invocation copies
// one quad of h. h is bound as f32s: as a vec4 array (16 bytes at least),
// wgpu-native refused the lora_expand dispatch that follows, which shares
// this bind group layout, for a dst of fewer than 16 bytes (seen on
// lavapipe). Twin: runtime/cpu's EmbedLoRA.
{{template "lora" .}}

@group(0) @binding(2) var<storage, read_write> h: array<f32>;
@group(0) @binding(3) var<storage, read> tokens: array<i32>;
// a: the slot table (an entry per slot: the element where its Aᵀ starts
// and Σ padded rank), then each slot's Aᵀ, as lora_shrink's.
@group(0) @binding(4) var<storage, read> a: array<{{template "lora_quad" .}}>;
{{template "lora_values" (values . "a")}}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let q = R / 4u; // vec4s of h a row
    let i = gid.x + gid.y * groups.x * 64u;
    let n = min(p.cap, step.rows);
    if (i >= n * q) { return; }
    let r = i / q;
    let c = i % q;
    let s = rows[r].slot;
    var v = vec4<f32>(0.0);
    if (s >= 0 && u32(s) < p.nslots) {
        let e = a_entry(u32(s));
        let tok = tokens[r];
        if (4u * c < e.y && tok >= 0 && u32(tok) < p.width) {
            v = a_quad(e.x + u32(tok) * (e.y / 4u) + c);
        }
    }
    let at = 4u * (r * q + c);
    h[at] = v.x;
    h[at + 1u] = v.y;
    h[at + 2u] = v.z;
    h[at + 3u] = v.w;
}
