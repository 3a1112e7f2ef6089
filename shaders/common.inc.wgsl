// Declarations shared by every kernel (prepended by shaders.Source).

// Step holds what changes from one forward step to the next. It is written
// once per step; every kernel binds it at @binding(0).
struct Step {
    rows: u32,   // tokens in this step's batch
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}
{{- if .Subgroups}}
const SG = {{.Subgroups}}u; // the device's smallest subgroup size (shaders.Fusion.Subgroups)
{{- end}}
{{template "fusion_decls" .}}
