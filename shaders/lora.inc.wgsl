{{define "lora"}}
// The pieces lora_shrink and lora_expand share: their parameters, the
// table of rows (binding 5; each kernel declares 2 to 4, and shrink the
// norm's weights, 6, with Norm), and the scan that finds a workgroup's
// rows.
struct Row { slot: i32, scale: f32 }
// off: the element of the slot's Aᵀ (shrink, gather) or of its B row 0
// (expand) in its buffer (lora_values); rank: Σ padded rank (shrink,
// gather) or quads a row of B (expand).
struct Slot { off: u32, rank: u32, scale: f32, col: u32 }
// width: the inner dimension k (shrink) or the output width n (expand);
// k and nw (expand): the weight part it adds and the parts of the LoRA;
// eps (shrink with Norm): the norm's; ks (shrink): KS. r, maxm and ks
// repeat the override constants, so that call sites of different ones
// never share a cached pipeline.
struct Params { width: u32, cap: u32, nslots: u32, r: u32, maxm: u32, k: u32, nw: u32, eps: f32, ks: u32 }

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(5) var<storage, read> rows: array<Row>;

// R is the stride of h (the largest rank among the slots); MAXM (2, 4 or 8)
// the rows a workgroup takes, the host's choice from the most rows any slot
// has in the step.
override R: u32 = 8u;
override MAXM: u32 = 8u;

// slot_rows sets rs to the rows of slot j from its first-th on (up to MAXM
// of the first n rows: the batch is not sorted by adapter), the rest of rs
// repeating the last of them (summed again, not written), and returns how
// many it found: 0 when the slot has no row there.
fn slot_rows(j: i32, first: u32, n: u32, rs: ptr<function, array<u32, 8>>) -> u32 {
    var found = 0u;
    for (var r = 0u; r < n && found < first + MAXM; r++) {
        if (rows[r].slot == j) {
            if (found >= first) {
                (*rs)[found - first] = r;
            }
            found++;
        }
    }
    if (found <= first) { return 0u; }
    let m = found - first;
    for (var i = m; i < 8u; i++) {
        (*rs)[i] = (*rs)[m - 1u];
    }
    return m;
}
{{end}}

{{define "lora_values"}}
{{- /* The reads of an adapters' buffer (.Name: a or bt; la or lbt in a
fused product), run with shaders.Values. It starts with a table of
4-word entries (NAME_entry) and goes on with quads of values, four
neighbours of a row of Aᵀ or of B (NAME_quad): f32 or, with Half, IEEE
halves, those of an adapter stored in F16 (half the memory, and half the
bytes a decode step streams, which bound it on a GPU). An element of the
binding is a quad (lora_quad), so a table entry is one element, or two of
halves, and the table's offsets count elements. unpack2x16float is core
WGSL: no shader-f16 feature is needed; a device that flushes subnormal
halves (below 6.1e-5) to zero, as WGSL lets it, loses only those. */}}
fn {{.Name}}_entry(j: u32) -> vec4<u32> {
{{- if .Half}}
    return vec4<u32>({{.Name}}[2u * j], {{.Name}}[2u * j + 1u]);
{{- else}}
    return {{.Name}}[j];
{{- end}}
}

fn {{.Name}}_quad(i: u32) -> vec4<f32> {
{{- if .Half}}
    let w = {{.Name}}[i];
    return vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
{{- else}}
    return bitcast<vec4<f32>>({{.Name}}[i]);
{{- end}}
}
{{end}}

{{define "lora_quad"}}{{if .Half}}vec2<u32>{{else}}vec4<u32>{{end}}{{end}}
