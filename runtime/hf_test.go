package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// synthHF writes the named synthetic shape as a Hugging Face folder with
// the weights synthModel writes to its GGUF.
func synthHF(t *testing.T, shape string, typ dtype.Type, opts synth.HFOptions) string {
	t.Helper()
	s, err := synth.Lookup(shape)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), shape)
	if err := synth.WriteHF(dir, s, typ, 11, opts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// editHFConfig sets keys of the config.json of the folder dir and returns
// dir.
func editHFConfig(t *testing.T, dir string, set map[string]any) string {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	maps.Copy(cfg, set)
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// logits scores tokens and returns the logits of every position.
func logits(t *testing.T, eng *runtime.Engine, tokens []int32) [][]float32 {
	t.Helper()
	var out [][]float32
	err := eng.Score(context.Background(), tokens, func(i int, l []float32) error {
		out = append(out, append([]float32(nil), l...))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHFMatchesGGUF: the GGUF and the Hugging Face folder of one synthetic
// model of each family are the same model: the same greedy tokens on the
// CPU and on WebGPU, and the same logits on the CPU. Qwen's and Gemma's
// files hold the same values in the same layout (Gemma's norms as w in the
// folder, exactly 1 + w once loaded), so their logits are identical (but
// Qwen3.5's, whose A_log the folder holds, to rounding); Llama's q
// and k rows are permuted between the files (pairs vs halves RoPE), which
// reorders the sums of q·k, so its logits agree to rounding. Gemma 4's
// folders (its dense, shared-kv and double-wide E2B kind, the 31B's
// values-from-keys kind at two head widths, the 26B-A4B's experts) hold
// the GGUF's weights bit for bit (norms as stored, experts' gate and up
// split the same way), so their logits are identical too.
func TestHFMatchesGGUF(t *testing.T) {
	for _, tc := range []struct {
		shape  string
		typ    dtype.Type
		shards int
	}{{"tiny", dtype.F32, 0}, {"tiny", dtype.F16, 2}, {"tiny-llama3", dtype.F32, 0}, {"tiny-qwen2", dtype.F32, 3}, {"tiny-qwen3", dtype.F16, 0},
		{"tiny-gemma2", dtype.F32, 0}, {"tiny-gemma3", dtype.F16, 2}, {"tiny-smollm3", dtype.F32, 0},
		{"tiny-qwen35", dtype.F32, 0}, {"tiny-qwen35", dtype.F16, 2},
		{"tiny-gemma4", dtype.F32, 0}, {"tiny-gemma4", dtype.F16, 2}, {"tiny-gemma4-kv", dtype.F32, 0},
		{"tiny-gemma4-wide", dtype.F16, 0}, {"tiny-gemma4-moe", dtype.F32, 3}} {
		t.Run(tc.shape+"-"+tc.typ.String(), func(t *testing.T) {
			gguf := synthModel(t, tc.shape, tc.typ)
			hf := synthHF(t, tc.shape, tc.typ, synth.HFOptions{Shards: tc.shards})
			req := runtime.Request{Prompt: "abc def ghi", MaxTokens: 100, IgnoreEOS: true}

			var cpu [2][]int32
			var scores [2][][]float32
			for i, path := range []string{gguf, hf} {
				eng, err := runtime.Load(path, runtime.Options{Device: "cpu"})
				if err != nil {
					t.Fatal(err)
				}
				if i == 1 && (eng.Model().Format != "hf" || eng.Model().Config.Rope != models.RopeHalves) {
					t.Errorf("folder loaded as %s with %s RoPE", eng.Model().Format, eng.Model().Config.Rope)
				}
				cpu[i], _, _ = generate(t, eng, req)
				scores[i] = logits(t, eng, append([]int32{1}, cpu[0][:40]...))
				eng.Close()
			}
			if !equal(cpu[1], cpu[0]) {
				t.Errorf("cpu:\n  hf %v\ngguf %v", cpu[1], cpu[0])
			}
			// Halves in both files; but Qwen3.5's folder holds A_log, which
			// −exp at load gives back to a rounding.
			exact := (strings.HasPrefix(tc.shape, "tiny-qwen") || strings.HasPrefix(tc.shape, "tiny-gemma")) && tc.shape != "tiny-qwen35"
			worst := logitsAgree(t, "cpu", scores, exact)
			t.Logf("cpu: %d tokens agree, logits differ by up to %g", len(cpu[0]), worst)

			var gpu [2][]int32
			for i, path := range []string{gguf, hf} {
				eng := loadWebGPU(t, path, runtime.Options{})
				gpu[i], _, _ = generate(t, eng, req)
				scores[i] = logits(t, eng, append([]int32{1}, cpu[0][:40]...))
			}
			t.Logf("webgpu: logits differ by up to %g", logitsAgree(t, "webgpu", scores, exact))
			if !equal(gpu[1], gpu[0]) {
				t.Errorf("webgpu:\n  hf %v\ngguf %v", gpu[1], gpu[0])
			}
			if !equal(gpu[0], cpu[0]) {
				t.Errorf("webgpu and cpu differ:\nwebgpu %v\n   cpu %v", gpu[0], cpu[0])
			}
		})
	}
}

// logitsAgree checks the folder's logits (scores[1]) against the GGUF's
// (scores[0]): equal where exact, else within 1e-4; it returns the
// largest difference.
func logitsAgree(t *testing.T, device string, scores [2][][]float32, exact bool) float64 {
	t.Helper()
	worst := 0.0
	for p := range scores[0] {
		for j, want := range scores[0][p] {
			d := math.Abs(float64(scores[1][p][j] - want))
			worst = max(worst, d)
			if exact && d != 0 {
				t.Fatalf("%s: position %d, logit %d: hf %g, gguf %g", device, p, j, scores[1][p][j], want)
			}
		}
	}
	if worst > 1e-4 {
		t.Errorf("%s: logits differ by up to %g", device, worst)
	}
	return worst
}

// TestMistralSlidingWindow: a Mistral folder whose config has a sliding
// window of 10 gives the same greedy tokens on the CPU and on WebGPU past
// the window, and its logits are those of the same weights without a
// window for the first 10 positions and differ after them.
func TestMistralSlidingWindow(t *testing.T) {
	dir := synthHF(t, "tiny-mistral", dtype.F32, synth.HFOptions{})
	req := runtime.Request{Prompt: "abc def ghi", MaxTokens: 60, IgnoreEOS: true}
	eng, err := runtime.Load(dir, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if c := eng.Model().Config; c.SlidingWindow != 10 || !c.LayerSliding(1) {
		t.Fatalf("window %d, layer 1 sliding %v", c.SlidingWindow, c.LayerSliding(1))
	}
	want, _, _ := generate(t, eng, req)
	got, _, _ := generate(t, loadWebGPU(t, dir, runtime.Options{}), req)
	if !equal(got, want) {
		t.Errorf("webgpu:\n%v\ncpu:\n%v", got, want)
	}

	config := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	windowed := logits(t, eng, append([]int32{1}, want[:30]...))
	if err := os.WriteFile(config, bytes.Replace(raw, []byte(`"sliding_window": 10`), []byte(`"sliding_window": null`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	full, err := runtime.Load(dir, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	if full.Model().Config.SlidingWindow != 0 {
		t.Fatal("the edited config still has a window")
	}
	global := logits(t, full, append([]int32{1}, want[:30]...))
	for p := range windowed {
		same := slices.Equal(windowed[p], global[p])
		if same != (p < 10) {
			t.Errorf("position %d: logits with and without the window equal: %v", p, same)
		}
	}
}
