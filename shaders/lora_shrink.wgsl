// lora_shrink: the first product of unmerged LoRA adapters, gathered per
// row (after Punica's "shrink"): row r of the batch runs with slot
// j = rows[r].slot (-1: none), and h[r, t] = x[r, :] · a[off_j + t, :] for
// t < rank_j, 0 up to R. a holds the A rows of every slot of one weight
// ([ΣRank, k]), so one dispatch serves a batch that mixes adapters.
// Specialised by R, the stride of h: the largest rank of the weight's slots.
// Twin: runtime/cpu LoRAShrink.
struct Params { k: u32, cap: u32, nslots: u32 }
struct Row { slot: i32, scale: f32 }
struct Slot { off: u32, rank: u32, scale: f32, _pad: u32 }

override R: u32 = 8u;

@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<storage, read_write> h: array<f32>;
@group(0) @binding(3) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read> a: array<f32>;
@group(0) @binding(5) var<storage, read> rows: array<Row>;
@group(0) @binding(6) var<storage, read> slots: array<Slot>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.x + id.y * groups.x * 256u;
    if (i >= min(p.cap, step.rows) * R) { return; }
    let r = i / R;
    let t = i % R;
    let j = rows[r].slot;
    if (j < 0 || u32(j) >= p.nslots) { return; }
    let sl = slots[u32(j)];
    var s = 0.0;
    if (t < sl.rank) {
        let base = (sl.off + t) * p.k;
        for (var c = 0u; c < p.k; c++) {
            s += x[r * p.k + c] * a[base + c];
        }
    }
    h[r * R + t] = s;
}
