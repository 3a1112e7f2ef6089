package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// browserFamilies are the tiny synthetic files of the families issue 42
// added (Qwen3.5's linear attention, Gemma 4 with per-layer inputs, keys as
// values and experts, gpt-oss's sinks and biased experts, Phi-3's fused
// projections and LongRoPE, SmolLM3's layers without RoPE).
var browserFamilies = []string{"tiny-qwen35", "tiny-qwen35moe", "tiny-gemma4", "tiny-gemma4-kv", "tiny-gemma4-moe",
	"tiny-gpt-oss", "tiny-phi3", "tiny-smollm3"}

// TestBrowserFamilies: each family's tiny synthetic file (f32, seed 1)
// gives the native CPU engine's greedy tokens and text in the page, on
// WebGPU (Chromium's SwiftShader), past the Gemma and gpt-oss sliding
// windows; one page load serves them all, each engine loaded and unloaded
// in turn.
func TestBrowserFamilies(t *testing.T) {
	exe := needChromium(t)
	wasmDir, modelDir := buildWasm(t), t.TempDir()
	for _, shape := range browserFamilies {
		s, err := synth.Lookup(shape)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(modelDir, shape+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		if err := synth.Write(f, s, dtype.F32, 1); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cons, _ := openAPIPage(t, exe, wasmDir, modelDir, nil)
	const prompt, steps = "abc def ghi jkl mno", 24 // 25+ positions: past windows of 9 to 12
	for _, shape := range browserFamilies {
		t.Run(shape, func(t *testing.T) {
			want := runNative(t, filepath.Join(modelDir, shape+".gguf"), runtime.Request{Prompt: prompt, MaxTokens: steps, IgnoreEOS: true})
			args, _ := json.Marshal(map[string]any{"model": "/models/" + shape + ".gguf", "prompt": prompt, "steps": steps})
			r, err := chromedp.Run(ctx, chromedp.Evaluate[apiResult](`(async () => {
				const p = `+string(args)+`;
				try {
					const engine = await tessera.createEngine({model: p.model, quant: "f32", context: 256});
					const a = await engine.completions.create({prompt: p.prompt, temperature: 0, max_tokens: p.steps, ignore_eos: true});
					const out = {IDs: a.tessera.token_ids, Content: a.choices[0].text, LoadMs: engine.model.loadMs, DecodeTPS: a.tessera.decode_tps};
					await engine.unload();
					return out;
				} catch (e) { return {Err: e.code + ": " + e.message}; }
			})()`, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatalf("%v (console %q)", err, cons.all())
			}
			if r.Err != "" {
				t.Fatalf("in the page: %s", r.Err)
			}
			if len(want.IDs) != steps || !slices.Equal(r.IDs, want.IDs) || r.Content != want.Text {
				t.Errorf("greedy completion:\n browser %v %q\n  native %v %q", r.IDs, r.Content, want.IDs, want.Text)
			}
			t.Logf("browser load %.0f ms, %.1f tokens/s", r.LoadMs, r.DecodeTPS)
		})
	}
	time.Sleep(200 * time.Millisecond)
	for _, m := range cons.problems() {
		t.Errorf("console: %s", m)
	}
}

// TestBrowserAllSlidingRings: a model whose every layer slides
// (tiny-gemma3-swa, a window of 16) keeps rings alone in the page too:
// engine.model reports KV bytes that are all rings, and the greedy
// completion, which wraps the windows around the rings, is the native
// engine's with every position kept (KVOptions.FullWindows). (The page
// sizes its pool as one context: at 256 tokens that buys the four rings
// one running sequence needs, fewer tokens none; the bytes at two contexts
// are runtime.TestWindowedKVFollowsWindow's and `bench`'s.)
func TestBrowserAllSlidingRings(t *testing.T) {
	exe := needChromium(t)
	wasmDir, modelDir := buildWasm(t), t.TempDir()
	const shape = "tiny-gemma3-swa"
	s, err := synth.Lookup(shape)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, shape+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, s, dtype.F32, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	const prompt, steps = "abc def ghi jkl mno", 60 // past a ring of 7 blocks of 8 (window, 32 rows, a partial block)
	want := runNativeWith(t, path, runtime.Request{Prompt: prompt, MaxTokens: steps, IgnoreEOS: true},
		runtime.Options{Quant: "f32", KV: runtime.KVOptions{FullWindows: true}})
	ctx, cons, _ := openAPIPage(t, exe, wasmDir, modelDir, nil)
	type result struct {
		IDs                    []int
		Content, Err           string
		KVBytes, KVWindowBytes float64
	}
	args, _ := json.Marshal(map[string]any{"model": "/models/" + shape + ".gguf", "prompt": prompt, "steps": steps})
	r, err := chromedp.Run(ctx, chromedp.Evaluate[result](`(async () => {
		const p = `+string(args)+`;
		try {
			const engine = await tessera.createEngine({model: p.model, quant: "f32", context: 256, maxBatchTokens: 32, maxSeqs: 2});
			const a = await engine.completions.create({prompt: p.prompt, temperature: 0, max_tokens: p.steps, ignore_eos: true});
			const out = {IDs: a.tessera.token_ids, Content: a.choices[0].text, KVBytes: engine.model.kvBytes, KVWindowBytes: engine.model.kvWindowBytes};
			await engine.unload();
			return out;
		} catch (e) { return {Err: e.code + ": " + e.message}; }
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%v (console %q)", err, cons.all())
	}
	if r.Err != "" {
		t.Fatalf("in the page: %s", r.Err)
	}
	if r.KVBytes == 0 || r.KVBytes != r.KVWindowBytes {
		t.Errorf("kv of %.0f bytes, %.0f of them rings: want rings alone", r.KVBytes, r.KVWindowBytes)
	}
	if len(want.IDs) != steps || !slices.Equal(r.IDs, want.IDs) || r.Content != want.Text {
		t.Errorf("greedy completion:\n browser %v %q\n  native %v %q", r.IDs, r.Content, want.IDs, want.Text)
	}
	time.Sleep(200 * time.Millisecond)
	for _, m := range cons.problems() {
		t.Errorf("console: %s", m)
	}
}
