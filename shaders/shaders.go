// Package shaders holds Tessera's WGSL compute kernels. Each kernel is one
// .wgsl file; pieces that several kernels share live in .inc.wgsl files.
//
// WGSL has no include, so every file is a Go text/template: Compose runs a
// kernel's template with a Fusion, which says what to compose it with (the
// prologue and epilogue of a fused matrix product), and the kernel pulls in
// the shared pieces with {{template "name" .}}. common.inc.wgsl, which
// declares the per-step uniform, goes in front of every kernel. A kernel is
// thus written once and specialised, never copied: one matrix product
// serves plain, residual, GLU and q/k/v-splitting call sites, with or
// without an RMSNorm of its input.
package shaders

import (
	"embed"
	"fmt"
	"slices"
	"strings"
	"text/template"
)

//go:embed *.wgsl
var files embed.FS

// templates holds every file, each under its file name.
var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"bindings": func(f Fusion, first int) string { return f.Bindings(first) },
	"kvbuf":    func(f Fusion, buf, src string) KVBuf { return KVBuf{f.KV, buf, src, f.F16} },
	"values":   func(f Fusion, name string) Values { return Values{name, f.Half} },
}).ParseFS(files, "*.wgsl"))

// Fusion is what a matrix product kernel is composed with (the zero value:
// nothing, a plain product into dst).
type Fusion struct {
	// Norm: the input rows are RMS-normalised on the fly, with the norm's
	// weights (binding nw) and eps; the row's 1/rms scales the sums.
	Norm bool
	// Outs is the number of outputs the columns split into, by the widths
	// in the Fuse uniform: dst, out1, out2 (0 counts as 1).
	Outs int
	// Pairs: the weight's rows alternate between two matrices (gate and
	// up, for a GLU): column 2i is row i of the first, 2i+1 of the second;
	// without GLU they go to two outputs (Outs 2).
	Pairs bool
	// GLU (with Pairs): one output, act(gate)·up.
	GLU bool
	// Add: dst += the product (a residual add).
	Add bool
	// Next (with Add, one output): the epilogue also stores each new value
	// of dst times the weights of the RMSNorm that comes next (binding
	// nwn, one per column) into xn, the x of that norm's Prescaled product:
	// the norm's weights are then applied once per value, not once per
	// load of x in every invocation of the next product.
	Next bool
	// Prescaled (with Norm): x already holds the rows times the norm's
	// weights (a Next epilogue wrote them) and binding xraw the rows
	// themselves, whose squares the workgroup adds up for 1/rms; nw is
	// not bound.
	Prescaled bool
	// Bias: a bias vector (binding bias) is added to every column.
	Bias bool
	// Experts: the weight is a mixture of experts' matrices stacked, and
	// each block of rows is a group of (row, slot) pairs that chose one
	// expert, from the routing (binding routes, moe_route.wgsl): the
	// weight-indexing variant of a GEMV (see the block template), or of
	// a GEMM, whose row tiles are such groups (gemm.inc.wgsl). It
	// composes with Pairs and GLU only.
	Experts bool
	// LoRA: unmerged LoRA adapters are added to each column before the
	// rest of the epilogue (a GLU's activation, the residual add):
	// s·h_r·Bᵀ[slot(r)] of the column's weight part, h = x·Aᵀ having been
	// computed beforehand by lora_shrink (bindings lh, lbt: the LoRA's
	// slot table and Bᵀ rows, lrows: each row's slot and scale). With Norm
	// the shrink normalised its rows itself (lora_shrink composed with
	// Norm: the same 1/rms and weights as the prologue's, or as a
	// Prescaled product's, whose x the residual epilogue before it
	// prepared, adapters and all, with Next). It does not compose with
	// Experts.
	LoRA bool
	// Shrink (with LoRA, GEMVs only): the product computes the adapters'
	// h itself, each workgroup for its block's rows, into workgroup
	// memory (fusion.inc.wgsl's lora_h), from the slots' Aᵀ (binding la,
	// the shrink's slot table and Aᵀ, in place of lh), instead of reading
	// lora_shrink's: no shrink dispatch, for products of so few
	// workgroups that computing h in each costs less than one.
	Shrink bool
	// Half: the adapters' values (bindings la and lbt of a fused product,
	// a and bt of the lora kernels) are IEEE halves, two to a u32, as an
	// adapter stored in F16 keeps them: half the bytes of f32 (lora.inc.wgsl's
	// lora_values). Like KV it is no fusion: lora_shrink, lora_expand and
	// lora_gather take it alone.
	Half bool

	// KV is the KV cache's type that the attention and cache-store kernels
	// (KVKernels) read and write: "" (f32), "f16" or "int8" (kv.inc.wgsl).
	// It is no fusion: a kernel with only KV set binds no Fuse uniform.
	KV string

	// Subgroups is the device's smallest subgroup size (a power of two,
	// 4 to 128) where it has WGSL's subgroups and subgroup_id, 0 where
	// not. Like KV it is no fusion but a device switch: the kernels of
	// SubgroupKernels then reduce across a subgroup with subgroup
	// operations and across subgroups through workgroup memory
	// (reduce.inc.wgsl), in place of a tree of barriers. SG, the size,
	// bounds the levels a GEMV's column sum does by shuffles.
	Subgroups int

	// F16 computes with WGSL's f16 type (the device's shader-f16), in the
	// kernels of F16Kernels, where the error allows it: the f16 cache's
	// kernels (KV "f16") read and write its halves as vec4<f16>, the same
	// bytes as the packed words, converting exactly; matmul_f16_gemm keeps
	// its weight tile in f16 workgroup memory (half the bytes; the values
	// are the weight's own halves, so nothing changes); matmul_f16_gemv
	// multiplies in f16 (x rounded to f16, a dot of four in f16) and
	// accumulates in f32 (F16GEMVTolerance). Like Subgroups it is a device
	// switch, no fusion.
	F16 bool

	// Rope composes attention_lane with rope_kv (backend.RopeAttend): the
	// kernel takes q, k and v as the projection left them, rotates each
	// row's query and its own key in registers, stores the row's key and
	// value records into the cache (bindings k, v and the uniform freqs
	// after its own) and attends to the row's own position from the registers,
	// in one dispatch instead of two (runtime/gpu: on SwiftShader). Only
	// for steps whose rows attend to no position another row stores. Like
	// KV it is no fusion.
	Rope bool

	// Weight is the format of the weight that the grouped integer kernels
	// (QuantKernels) read, one of WeightFormats (quant_formats.inc.wgsl):
	// "int4", "int8", or a GGUF block type ("q4_k"). Like KV it is no
	// fusion, and those kernels need it.
	Weight string
}

// QuantKernels read a grouped integer weight, and are specialised by
// Fusion.Weight to each of WeightFormats.
var (
	QuantKernels  = []string{"matmul_quant_gemv", "matmul_quant_gemm", "embed_quant"}
	WeightFormats = []string{"int4", "int8", "q4_0", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl", "iq4_xs", "mxfp4"}
)

// KVKernels read or write the KV cache, and are specialised by
// Fusion.KV to each of KVTypes.
var (
	KVKernels = []string{"store_kv", "rope_kv", "attention_decode", "attention_lane", "attention_lane_rows", "attention_prefill"}
	KVTypes   = []string{"", "f16", "int8"}
)

// KVBuf is what kv.inc.wgsl's templates are run with: the cache's type,
// the cache binding they serve (kc or vc) and, for stores, the f32 source
// binding (k or v).
type KVBuf struct {
	KV, Buf, Src string
	F16          bool // Fusion.F16: halves as f16
}

// Values is what lora.inc.wgsl's lora_values template is run with: the
// adapters' binding whose reads it declares, and whether it holds halves.
type Values struct {
	Name string
	Half bool
}

// SubgroupKernels are the kernels with reductions that Fusion.Subgroups
// specialises: the norms, argmax, top-k, the sampler's ranking and
// softmax sums, decode attention's running maximum and sum, and the
// GEMVs' column sums.
var SubgroupKernels = []string{"rmsnorm", "rmsnorm_heads", "layernorm", "argmax", "topk", "sample", "attention_decode",
	"matmul_gemv", "matmul_f16_gemv", "matmul_quant_gemv"}

// F16Kernels are the kernels that Fusion.F16 specialises: the f16
// weights' products, and the cache kernels with an f16 cache.
var F16Kernels = append([]string{"matmul_f16_gemv", "matmul_f16_gemm"}, KVKernels...)

// F16GEMVTolerance bounds matmul_f16_gemv's error with F16 against its
// f32 twin, relative to Σ|x·w| (the sum of the products' magnitudes):
// x rounded to f16 (2⁻¹¹ relative) and the dot of four in f16 (a product
// and two additions, each 2⁻¹¹ of their magnitude) give at most
// 4·2⁻¹¹ ≈ 2e-3 of it before the f32 sum; TestF16GEMVTolerance emulates the
// arithmetic on the CPU and finds about half of that (1.0e-3).
const F16GEMVTolerance = 2e-3

// SubgroupSizes are the subgroup sizes WGSL allows, the values of
// Fusion.Subgroups but 0.
var SubgroupSizes = []int{4, 8, 16, 32, 64, 128}

// LoRAKernels are the kernels of unmerged adapters, which read their
// values in f32 or, with Fusion.Half alone, in halves.
var LoRAKernels = []string{"lora_shrink", "lora_expand", "lora_gather"}

// Fused reports whether f composes anything: a plain kernel binds no
// Fuse uniform.
func (f Fusion) Fused() bool {
	f.KV, f.Half, f.Weight, f.Subgroups, f.F16, f.Rope = "", false, "", 0, false, false
	return f != Fusion{} && f != Fusion{Outs: 1}
}

// String names the variant for cache keys and errors: "" for a plain one.
func (f Fusion) String() string {
	kv := ""
	if f.KV != "" {
		kv = "+kv" + f.KV
	}
	if f.Half {
		kv += "+half"
	}
	if f.Weight != "" {
		kv = "+" + f.Weight + kv
	}
	if f.F16 {
		kv += "+f16"
	}
	if f.Rope {
		kv = "+rope" + kv
	}
	if f.Subgroups > 0 {
		kv += fmt.Sprintf("+sg%d", f.Subgroups)
	}
	if !f.Fused() {
		return kv
	}
	var parts []string
	for _, p := range []struct {
		on   bool
		name string
	}{{f.Norm, "norm"}, {f.Outs > 1, fmt.Sprintf("split%d", f.Outs)}, {f.Pairs, "pairs"}, {f.GLU, "glu"}, {f.Add, "add"}, {f.Next, "next"}, {f.Prescaled, "prescaled"}, {f.Bias, "bias"}, {f.Experts, "experts"}, {f.LoRA, "lora"}, {f.Shrink, "shrink"}} {
		if p.on {
			parts = append(parts, p.name)
		}
	}
	return "+" + strings.Join(parts, "+") + kv
}

// Extra lists the bindings a fused kernel has after its own, in order:
// the Fuse uniform, then out1 and out2, bias, nw (xraw when Prescaled),
// nwn and xn, routes, and LoRA's lh, lbt and lrows as f asks for them.
// Each is "uniform", "read_write" or "read".
func (f Fusion) Extra() []string {
	if !f.Fused() {
		return nil
	}
	extra := []string{"uniform"}
	for range max(f.Outs, 1) - 1 {
		extra = append(extra, "read_write")
	}
	if f.Bias {
		extra = append(extra, "read")
	}
	if f.Norm {
		extra = append(extra, "read")
	}
	if f.Next {
		extra = append(extra, "read", "read_write")
	}
	if f.Experts {
		extra = append(extra, "read")
	}
	if f.LoRA {
		extra = append(extra, "read", "read", "read")
	}
	return extra
}

// Bindings declares Extra's bindings in WGSL, numbered from first.
func (f Fusion) Bindings(first int) string {
	if !f.Fused() {
		return ""
	}
	names := []string{"fz"}
	for i := 1; i < len(f.Extra()); i++ {
		names = append(names, "")
	}
	i := 1
	for o := 1; o < max(f.Outs, 1); o++ {
		names[i] = fmt.Sprintf("out%d", o)
		i++
	}
	if f.Bias {
		names[i] = "bias"
		i++
	}
	if f.Norm {
		names[i] = "nw"
		if f.Prescaled {
			names[i] = "xraw"
		}
		i++
	}
	if f.Next {
		names[i], names[i+1] = "nwn", "xn"
		i += 2
	}
	if f.Experts {
		names[i] = "routes"
		i++
	}
	switch {
	case f.Shrink:
		names[i], names[i+1], names[i+2] = "la", "lbt", "lrows"
	case f.LoRA:
		names[i], names[i+1], names[i+2] = "lh", "lbt", "lrows"
	}
	var b strings.Builder
	for i, access := range f.Extra() {
		switch {
		case access == "uniform":
			fmt.Fprintf(&b, "@group(0) @binding(%d) var<uniform> %s: Fuse;\n", first+i, names[i])
		case names[i] == "nw" || names[i] == "xraw":
			fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, read> %s: array<vec4<f32>>;\n", first+i, names[i])
		case names[i] == "routes":
			fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, read> routes: array<u32>;\n", first+i)
		case names[i] == "lbt" || names[i] == "la": // lora_values' quads
			quad := "vec4<u32>"
			if f.Half {
				quad = "vec2<u32>"
			}
			fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, read> %s: array<%s>;\n", first+i, names[i], quad)
		case names[i] == "lh":
			fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, read> lh: array<vec4<f32>>;\n", first+i)
		case names[i] == "lrows":
			fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, read> lrows: array<LoRARow>;\n", first+i)
		default:
			fmt.Fprintf(&b, "@group(0) @binding(%d) var<storage, %s> %s: array<f32>;\n", first+i, access, names[i])
		}
	}
	return b.String()
}

// Source returns the WGSL of the named kernel ("rmsnorm" for rmsnorm.wgsl)
// as a plain kernel, with the common declarations in front.
func Source(name string) (string, error) { return Compose(name, Fusion{}) }

// Compose returns the WGSL of the named kernel composed with f.
func Compose(name string, f Fusion) (string, error) {
	t := templates.Lookup(name + ".wgsl")
	if t == nil || strings.HasSuffix(name, ".inc") {
		return "", fmt.Errorf("shader %s: no such kernel", name)
	}
	if !slices.Contains(KVTypes, f.KV) {
		return "", fmt.Errorf("shader %s: unknown kv cache type %q", name, f.KV)
	}
	if slices.Contains(QuantKernels, name) != slices.Contains(WeightFormats, f.Weight) {
		return "", fmt.Errorf("shader %s: weight format %q (the grouped integer kernels take one of %v, the others none)", name, f.Weight, WeightFormats)
	}
	if f.GLU && (!f.Pairs || f.Outs > 1) || f.Pairs && !f.GLU && f.Outs != 2 || f.Outs > 3 {
		return "", fmt.Errorf("shader %s%s: pairs feed a GLU or split into two outputs", name, f)
	}
	if f.Next && (!f.Add || f.Outs > 1 || f.Pairs) || f.Prescaled && !f.Norm {
		return "", fmt.Errorf("shader %s%s: a next norm's input comes from a residual add into one output, and feeds a norm", name, f)
	}
	if f.Experts && (f.Norm || f.Next || f.Outs > 1 || f.Add || f.Bias || f.Pairs != f.GLU) {
		return "", fmt.Errorf("shader %s%s: experts compose with a GLU only", name, f)
	}
	if f.LoRA && f.Experts {
		return "", fmt.Errorf("shader %s%s: adapters adapt no experts", name, f)
	}
	if f.Shrink && (!f.LoRA || !slices.Contains(GEMVs, name)) {
		return "", fmt.Errorf("shader %s%s: a GEMV with adapters computes their h itself", name, f)
	}
	if f.Half && !f.LoRA && (!slices.Contains(LoRAKernels, name) || f.Fused() && name != "lora_shrink") {
		return "", fmt.Errorf("shader %s%s: halves are adapters' values", name, f)
	}
	if f.Subgroups != 0 && (!slices.Contains(SubgroupKernels, name) || !slices.Contains(SubgroupSizes, f.Subgroups)) {
		return "", fmt.Errorf("shader %s%s: subgroup variants are of %v, with a size of %v", name, f, SubgroupKernels, SubgroupSizes)
	}
	if f.F16 && (!slices.Contains(F16Kernels, name) || slices.Contains(KVKernels, name) && f.KV != "f16") {
		return "", fmt.Errorf("shader %s%s: f16 variants are of %v, the cache's kernels with an f16 cache", name, f, F16Kernels)
	}
	if f.Rope && name != "attention_lane" {
		return "", fmt.Errorf("shader %s%s: rope composes with attention_lane only", name, f)
	}
	var b strings.Builder
	if f.F16 {
		b.WriteString("enable f16;\n")
	}
	if f.Subgroups > 0 {
		// Directives come before every declaration.
		b.WriteString("enable subgroups;\nrequires subgroup_id;\n")
	}
	if err := templates.ExecuteTemplate(&b, "common.inc.wgsl", f); err != nil {
		return "", fmt.Errorf("shader %s: %w", name, err)
	}
	b.WriteString("\n")
	if err := t.Execute(&b, f); err != nil {
		return "", fmt.Errorf("shader %s%s: %w", name, f, err)
	}
	return b.String(), nil
}

// Names lists the kernels.
func Names() []string {
	entries, _ := files.ReadDir(".")
	var names []string
	for _, e := range entries {
		if n := e.Name(); !strings.HasSuffix(n, ".inc.wgsl") {
			names = append(names, strings.TrimSuffix(n, ".wgsl"))
		}
	}
	return names
}

// Fusable lists the kernels that compose with a Fusion, and Fusions the
// fusions the forward pass asks of them (for validation).
var Fusable = []string{"matmul_quant_gemv", "matmul_gemv", "matmul_f16_gemv", "fuse_epilogue"}

// GEMVs are the Fusable kernels that compose with Shrink.
var GEMVs = []string{"matmul_quant_gemv", "matmul_gemv", "matmul_f16_gemv"}

// ShrinkFusionsOf are fs's LoRA fusions with Shrink set: what the GEMVs
// compose with where they compute the adapters' h themselves.
func ShrinkFusionsOf(fs []Fusion) []Fusion {
	var out []Fusion
	for _, f := range fs {
		if f.LoRA {
			f.Shrink = true
			out = append(out, f)
		}
	}
	return out
}

// GEMMs are the tiled GEMMs, which compose with the experts' fusions only
// (ExpertFusions): the grouped GEMM of a mixture of experts' prompt steps.
var GEMMs = []string{"matmul_gemm", "matmul_f16_gemm", "matmul_quant_gemm"}

// ExpertFusions are the compositions of the expert products: down, and
// gate and up with the GLU.
var ExpertFusions = []Fusion{{Experts: true}, {Experts: true, Pairs: true, GLU: true}}

// Fusions lists the compositions of the forward pass: q/k/v with and
// without biases and norm, gate/up with GLU or split, residual adds (that
// prepare the next norm's input), the normalised head, the norms of
// prescaled inputs, and those of them that add LoRA adapters.
func Fusions() []Fusion {
	return []Fusion{
		{}, {Norm: true}, {Add: true}, {Add: true, Next: true},
		{Norm: true, Prescaled: true}, {Outs: 3, Norm: true, Prescaled: true}, {Outs: 3, Bias: true, Norm: true, Prescaled: true},
		{Pairs: true, GLU: true, Norm: true, Prescaled: true}, {Pairs: true, Outs: 2, Norm: true, Prescaled: true},
		{Outs: 3}, {Outs: 3, Norm: true}, {Outs: 3, Bias: true}, {Outs: 3, Bias: true, Norm: true},
		{Pairs: true, GLU: true}, {Pairs: true, GLU: true, Norm: true}, {Pairs: true, Outs: 2}, {Pairs: true, Outs: 2, Norm: true},
		{Experts: true}, {Experts: true, Pairs: true, GLU: true},
		{LoRA: true}, {Add: true, LoRA: true}, {Outs: 3, LoRA: true}, {Outs: 3, Bias: true, LoRA: true},
		{Pairs: true, GLU: true, LoRA: true}, {Pairs: true, Outs: 2, LoRA: true},
		{Norm: true, LoRA: true}, {Outs: 3, Norm: true, LoRA: true}, {Outs: 3, Bias: true, Norm: true, LoRA: true},
		{Pairs: true, GLU: true, Norm: true, LoRA: true},
		{Add: true, Next: true, LoRA: true}, {Norm: true, Prescaled: true, LoRA: true},
		{Outs: 3, Norm: true, Prescaled: true, LoRA: true}, {Outs: 3, Bias: true, Norm: true, Prescaled: true, LoRA: true},
		{Pairs: true, GLU: true, Norm: true, Prescaled: true, LoRA: true}, {Pairs: true, Outs: 2, Norm: true, Prescaled: true, LoRA: true},
	}
}

// ShrinkFusions are the compositions of lora_shrink: plain, and applying
// the RMSNorm of its rows itself.
var ShrinkFusions = []Fusion{{}, {Norm: true}}
