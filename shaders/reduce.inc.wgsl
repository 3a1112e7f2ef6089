{{define "sg_ids"}}
{{- /* The subgroup builtins, after a kernel entry point's own parameters
(with Fusion.Subgroups; nothing without). */}}
{{- if .Subgroups}}, @builtin(subgroup_invocation_id) sg_inv: u32, @builtin(subgroup_id) sg_id_in: u32,
        @builtin(num_subgroups) sg_n_in: u32{{end}}
{{- end}}

{{define "sg_init"}}
{{- /* The entry point's first statement: keeps the builtins of sg_ids
where reduce's functions read them (in uniform control flow: it counts
the subgroup's invocations). */}}
{{- if .Subgroups}}
    sg_rank = subgroupExclusiveAdd(1u);
    sg_count = subgroupAdd(1u);
    sg_id = sg_id_in;
    sg_n = sg_n_in;
    sg_lane = sg_inv;
{{- end}}
{{- end}}

{{define "sg_vars"}}
{{- /* What sg_init keeps (with Subgroups): reduce declares them, and a
kernel that uses them without reduce's functions. */}}
var<private> sg_rank: u32;  // among the subgroup's invocations present
var<private> sg_count: u32; // the subgroup's invocations present
var<private> sg_id: u32;
var<private> sg_n: u32;     // subgroups in the workgroup
var<private> sg_lane: u32;  // subgroup_invocation_id
{{- end}}

{{define "reduce"}}
{{- /* Workgroup reductions, written once for both forms: wg_sum (of every
invocation's f32), wg_best (the first of every invocation's (value, index)
in the order of before: larger value first, lower index among equals, NONE
last), and with Subgroups wg_sum4 and wg_max4 (of vec4s). Every invocation
of the workgroup calls them in uniform control flow and gets the result;
they may be called again at once. Needs WG.

Plain: a tree in workgroup memory, log2(WG) barriers. With Subgroups
(Fusion.Subgroups, the entry point taking sg_ids and starting with
sg_init): a subgroup operation within each subgroup, its first invocation
writes the subgroup's result to workgroup memory, and after one barrier
every subgroup reduces those num_subgroups results itself (its
invocations striding over them, then a subgroup operation): two barriers
whatever WG. Nothing assumes how invocations map to subgroups or that
subgroups are full: slots are subgroup_id, strides count the invocations
present. */}}
const NONE = 0xffffffffu;

struct Best { v: f32, i: u32 }

// before reports whether (v, i) comes before (w, j): larger value first,
// lower index among equals, NONE after everything.
fn before(v: f32, i: u32, w: f32, j: u32) -> bool {
    return j == NONE || (i != NONE && (v > w || (v == w && i < j)));
}
{{- if .Subgroups}}

{{template "sg_vars" .}}
var<workgroup> sg_v: array<vec4<f32>, WG>; // a result per subgroup
var<workgroup> sg_i: array<u32, WG>;

fn wg_sum4(v: vec4<f32>, lid: u32) -> vec4<f32> {
    let s = subgroupAdd(v);
    workgroupBarrier(); // the last call's readers are done
    if (sg_rank == 0u) { sg_v[sg_id] = s; }
    workgroupBarrier();
    var t = vec4<f32>(0.0);
    for (var j = sg_rank; j < sg_n; j += sg_count) { t += sg_v[j]; }
    return subgroupAdd(t);
}

fn wg_max4(v: vec4<f32>, lid: u32) -> vec4<f32> {
    let s = subgroupMax(v);
    workgroupBarrier();
    if (sg_rank == 0u) { sg_v[sg_id] = s; }
    workgroupBarrier();
    var t = s;
    for (var j = sg_rank; j < sg_n; j += sg_count) { t = max(t, sg_v[j]); }
    return subgroupMax(t);
}

fn wg_sum(v: f32, lid: u32) -> f32 {
    return wg_sum4(vec4<f32>(v, 0.0, 0.0, 0.0), lid).x;
}

// sg_best is the first of the subgroup's (v, i), with the winner's own
// value (bits and all: a -0 stays -0). The maximum is over the live values
// only (the others stand in with the first live one's: no sentinel lies
// below -Inf, which a masked row holds). A NaN stays where subgroupMax puts
// it: every value not below the maximum is a candidate, so a live index
// always wins over NONE.
fn sg_best(v: f32, i: u32) -> Best {
    let live = i != NONE;
    let first = subgroupMin(select(NONE, sg_lane, live));
    let stand = subgroupShuffle(v, select(0u, first, first != NONE));
    let m = subgroupMax(select(stand, v, live));
    let at = subgroupMin(select(NONE, i, live && !(v < m)));
    let src = subgroupMin(select(NONE, sg_lane, live && i == at));
    return Best(subgroupShuffle(v, select(0u, src, src != NONE)), at);
}

fn wg_best(v: f32, i: u32, lid: u32) -> Best {
    let s = sg_best(v, i);
    workgroupBarrier();
    if (sg_rank == 0u) {
        sg_v[sg_id].x = s.v;
        sg_i[sg_id] = s.i;
    }
    workgroupBarrier();
    var b = Best(0.0, NONE);
    for (var j = sg_rank; j < sg_n; j += sg_count) {
        if (before(sg_v[j].x, sg_i[j], b.v, b.i)) { b = Best(sg_v[j].x, sg_i[j]); }
    }
    return sg_best(b.v, b.i);
}
{{- else}}

var<workgroup> red_v: array<f32, WG>;
var<workgroup> red_i: array<u32, WG>;

fn wg_sum(v: f32, lid: u32) -> f32 {
    red_v[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s) { red_v[lid] += red_v[lid + s]; }
        workgroupBarrier();
    }
    let t = red_v[0];
    workgroupBarrier(); // before red_v is written again
    return t;
}

fn wg_best(v: f32, i: u32, lid: u32) -> Best {
    red_v[lid] = v;
    red_i[lid] = i;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid < s && before(red_v[lid + s], red_i[lid + s], red_v[lid], red_i[lid])) {
            red_v[lid] = red_v[lid + s];
            red_i[lid] = red_i[lid + s];
        }
        workgroupBarrier();
    }
    let b = Best(red_v[0], red_i[0]);
    workgroupBarrier();
    return b;
}
{{- end}}
{{end}}
