package runtime_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// synthModel writes the named synthetic shape to a temporary GGUF.
func synthModel(t testing.TB, shape string, typ dtype.Type) string {
	t.Helper()
	s, err := synth.Lookup(shape)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), shape+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := synth.Write(f, s, typ, 11); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSynthWebGPUMatchesCPU: a synthetic model of each family (Llama with
// an untied head, Llama 3.1 RoPE scaling, Qwen2 biases, Qwen3 q/k norms)
// gives the same greedy tokens on both backends, from f32 and f16 weights.
func TestSynthWebGPUMatchesCPU(t *testing.T) {
	for _, tc := range []struct {
		shape string
		typ   dtype.Type
	}{{"tiny", dtype.F32}, {"tiny", dtype.F16}, {"tiny-llama3", dtype.F32}, {"tiny-qwen2", dtype.F32}, {"tiny-qwen3", dtype.F16},
		{"tiny-gemma2", dtype.F32}, {"tiny-gemma3", dtype.F16}} {
		typ := tc.typ
		path := synthModel(t, tc.shape, typ)
		c, err := runtime.Load(path, runtime.Options{Device: "cpu"})
		if err != nil {
			t.Fatal(err)
		}
		g := loadWebGPU(t, path, runtime.Options{})
		req := runtime.Request{Prompt: "abc def ghi", MaxTokens: 100, IgnoreEOS: true}
		want, _, _ := generate(t, c, req)
		got, _, _ := generate(t, g, req)
		c.Close()
		if !equal(got, want) {
			t.Errorf("%s %s:\nwebgpu %v\n   cpu %v", tc.shape, typ, got, want)
		}
	}
}
