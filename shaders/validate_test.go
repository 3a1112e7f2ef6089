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
// constants (runtime/gpu/webgpu.Specialize keeps their defaults here).
func TestValidate(t *testing.T) {
	override := regexp.MustCompile(`(?m)^(\s*)override(\s)`)
	dir := t.TempDir()
	for _, tool := range [][]string{{"naga"}, {"tint", "--format", "wgsl", "-o", os.DevNull}} {
		if _, err := exec.LookPath(tool[0]); err != nil {
			t.Logf("%s not installed: skipped", tool[0])
			continue
		}
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
		for _, v := range all {
			name := v.name + strings.ReplaceAll(v.f.String(), "+", "_")
			src, err := shaders.Compose(v.name, v.f)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name+".wgsl")
			os.WriteFile(path, []byte(override.ReplaceAllString(src, "${1}const$2")), 0o644)
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
