package shaders_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/shaders"
)

// TestValidate runs naga and tint, where they are installed, over every
// kernel as the backend compiles it: with its override constants written as
// constants (runtime/gpu/webgpu.Specialize keeps their defaults here), and
// over the subgroup and f16 variants. CI installs neither (no Debian package has
// them): the test skips saying so where both are missing, and runs
// wherever they are on PATH.
func TestValidate(t *testing.T) {
	override := regexp.MustCompile(`(?m)^(\s*)override(\s)`)
	directives := regexp.MustCompile(`(?m)^(enable subgroups|requires subgroup_id);$`)
	dir := t.TempDir()
	ran := 0
	defer func() {
		if ran == 0 {
			t.Skip("neither naga nor tint is on PATH: no kernel validated")
		}
	}()
	for _, tool := range [][]string{{"naga"}, {"tint", "--format", "wgsl", "-o", os.DevNull}} {
		if _, err := exec.LookPath(tool[0]); err != nil {
			t.Logf("%s is not on PATH: skipped", tool[0])
			continue
		}
		ran++
		type variant struct {
			name string
			f    shaders.Fusion
		}
		var all []variant
		for _, name := range shaders.Names() {
			all = append(all, variant{name, shaders.Fusion{}})
		}
		for _, name := range shaders.KVKernels {
			for _, kv := range shaders.KVTypes[1:] {
				all = append(all, variant{name, shaders.Fusion{KV: kv}})
			}
		}
		for _, kv := range shaders.KVTypes {
			all = append(all, variant{"attention_lane", shaders.Fusion{KV: kv, Rope: true}})
		}
		for _, name := range shaders.Fusable {
			for _, f := range shaders.Fusions() {
				if f.Fused() {
					all = append(all, variant{name, f})
				}
			}
		}
		for _, name := range shaders.GEMVs {
			for _, f := range shaders.ShrinkFusionsOf(shaders.Fusions()) {
				all = append(all, variant{name, f})
			}
		}
		for _, f := range shaders.ShrinkFusions[1:] {
			all = append(all, variant{"lora_shrink", f})
		}
		for _, v := range all { // adapters' values in halves
			if v.f.LoRA || slices.Contains(shaders.LoRAKernels, v.name) {
				v.f.Half = true
				all = append(all, v)
			}
		}
		for _, name := range shaders.GEMMs {
			for _, f := range shaders.ExpertFusions {
				all = append(all, variant{name, f})
			}
		}
		// The grouped integer kernels take every composition in int4, and
		// every format plain, with the experts' fusions and with the
		// largest composition of the forward pass (the format is the
		// kernel's own declarations, apart from the fusion's).
		var formats []variant
		for i, v := range all {
			if !slices.Contains(shaders.QuantKernels, v.name) {
				continue
			}
			all[i].f.Weight = "int4"
			if v.f == (shaders.Fusion{}) || v.f.Experts || v.f == (shaders.Fusion{Pairs: true, GLU: true, Norm: true, Prescaled: true, LoRA: true}) {
				for _, w := range shaders.WeightFormats[1:] {
					v.f.Weight = w
					formats = append(formats, v)
				}
			}
		}
		all = append(all, formats...)
		// The f16 variants (shader-f16): every composition of the kernels
		// that have them, with an f16 cache for the cache's kernels.
		for _, v := range all {
			if slices.Contains(shaders.F16Kernels, v.name) && (!slices.Contains(shaders.KVKernels, v.name) || v.f.KV == "f16") {
				v.f.F16 = true
				all = append(all, v)
			}
		}
		// The subgroup variants: every kernel that has them plain, the
		// cache types of attention and the GEMVs' compositions, at the
		// smallest subgroup size and a GPU's.
		var subgroups []variant
		for _, v := range all {
			if slices.Contains(shaders.SubgroupKernels, v.name) && !v.f.Half && (v.f.Weight == "" || v.f.Weight == "int4" || v.f == (shaders.Fusion{Weight: v.f.Weight})) {
				for _, sg := range []int{4, 32} {
					v.f.Subgroups = sg
					subgroups = append(subgroups, v)
				}
			}
		}
		all = append(all, subgroups...)
		for _, v := range all {
			name := v.name + strings.ReplaceAll(v.f.String(), "+", "_")
			src, err := shaders.Compose(v.name, v.f)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name+".wgsl")
			src = override.ReplaceAllString(src, "${1}const$2")
			if tool[0] == "naga" {
				// naga 30 parses subgroup operations and builtins but not
				// yet the directives that WGSL asks for them.
				src = directives.ReplaceAllString(src, "")
			}
			os.WriteFile(path, []byte(src), 0o644)
			args := append(append([]string{}, tool[1:]...), path)
			if tool[0] == "naga" {
				args = []string{path}
			}
			if out, err := exec.Command(tool[0], args...).CombinedOutput(); err != nil {
				t.Errorf("%s %s: %v\n%s", tool[0], name, err, out)
			}
		}
	}
}
