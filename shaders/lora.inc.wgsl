{{define "lora"}}
// The pieces lora_shrink and lora_expand share: their parameters, the
// table of rows (binding 5; each kernel declares 2 to 4, and shrink the
// norm's weights, 6, with Norm), and the scan that finds a workgroup's
// rows.
struct Row { slot: i32, scale: f32 }
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
