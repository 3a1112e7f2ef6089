package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// windowBudgets keep a ring shorter than the tiny models' context of 256
// on WebGPU too (whose default step of 512 rows, capped by the context,
// would make a ring of the whole context: no rings).
var windowBudgets = runtime.Budgets{MaxBatchTokens: 32}

// windowShapes are the synthetic families with sliding-window layers:
// Gemma 2 (every other layer), Gemma 3 (five of six), Gemma 4 (its own
// head sizes in the sliding layers, and shared layers) and gpt-oss (sinks
// and YaRN), with windows of 9 to 12 positions; and those whose every
// layer slides, whose pool's cache then holds no layer: Mistral (a Hugging
// Face folder, window 10), a Gemma 3 file with a window of 16 on every
// layer and a Qwen2 folder with use_sliding_window (tiny-qwen2@swa: a
// window of 12 from max_window_layers 0 on; @swa1 from layer 1 on, a mixed
// model).
var windowShapes = []string{"tiny-gemma2", "tiny-gemma3", "tiny-gemma4", "tiny-gpt-oss", "tiny-mistral", "tiny-gemma3-swa",
	"tiny-qwen2@swa", "tiny-qwen2@swa1"}

// windowFile writes shape's synthetic model: a Hugging Face folder for
// Mistral (GGUF has no Mistral architecture) and for Qwen2 with its
// window (llama.cpp reads none from a qwen2 GGUF), else a GGUF file.
func windowFile(t *testing.T, shape string) string {
	t.Helper()
	switch shape {
	case "tiny-mistral":
		return synthHF(t, shape, dtype.F32, synth.HFOptions{})
	case "tiny-qwen2@swa":
		return editHFConfig(t, synthHF(t, "tiny-qwen2", dtype.F32, synth.HFOptions{}), map[string]any{"use_sliding_window": true, "sliding_window": 12, "max_window_layers": 0})
	case "tiny-qwen2@swa1":
		return editHFConfig(t, synthHF(t, "tiny-qwen2", dtype.F32, synth.HFOptions{}), map[string]any{"use_sliding_window": true, "sliding_window": 12, "max_window_layers": 1})
	}
	return qwen35File(t, shape)
}

// windowPrompts are n prompts of token ids below 300, of lengths 5, 29,
// 53, ...: from within one window to several windows long. The last
// repeats a stretch of itself, so that a prompt-lookup draft proposes.
func windowPrompts(n int) [][]int32 {
	rng := rand.New(rand.NewPCG(42, 2))
	out := make([][]int32, n)
	for i := range out {
		out[i] = make([]int32, 5+24*i)
		for j := range out[i] {
			out[i][j] = 3 + rng.Int32N(297)
		}
	}
	last := out[n-1]
	copy(last[len(last)/2:], last)
	return out
}

// windowEngines loads shape on the CPU and on WebGPU, each with the
// sliding layers' rings (opts) and with every position kept
// (KVOptions.FullWindows), and checks that only the first has rings.
func windowEngines(t *testing.T, shape string, opts runtime.Options) map[string][2]*runtime.Engine {
	t.Helper()
	path := windowFile(t, shape)
	full := opts
	full.KV.FullWindows = true
	full.Draft, full.SpeculateAlways = "", false
	out := map[string][2]*runtime.Engine{}
	for _, device := range []string{"cpu", "webgpu"} {
		var pair [2]*runtime.Engine
		for i, o := range []runtime.Options{opts, full} {
			if device == "webgpu" {
				pair[i] = loadWebGPU(t, path, o)
				continue
			}
			o.Device = "cpu"
			eng, err := runtime.Load(path, o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { eng.Close() })
			pair[i] = eng
		}
		if pair[0].WindowBytes() == 0 || pair[1].WindowBytes() != 0 {
			t.Fatalf("%s: window rings of %d and %d bytes, want some and none", device, pair[0].WindowBytes(), pair[1].WindowBytes())
		}
		out[device] = pair
	}
	return out
}

// TestWindowedMatchesFull: with the sliding layers keeping a ring of
// their window, every family gives the greedy tokens it gives with every
// position kept, prompts several windows long, each alone and all
// together (prompt chunks beside decoding rows; on WebGPU chained
// decoding too), and the rings take fewer bytes than the positions they
// replace.
func TestWindowedMatchesFull(t *testing.T) {
	prompts := windowPrompts(4)
	for _, shape := range windowShapes {
		for device, pair := range windowEngines(t, shape, runtime.Options{Context: 256, Budgets: windowBudgets}) {
			win, full := pair[0], pair[1]
			t.Run(shape+"/"+device, func(t *testing.T) {
				if win.KVBytes() >= full.KVBytes() {
					t.Errorf("kv cache of %d bytes with rings, %d without", win.KVBytes(), full.KVBytes())
				}
				want := make([][]int32, len(prompts))
				reqs := make([]runtime.Request, len(prompts))
				for i, p := range prompts {
					reqs[i] = runtime.Request{Tokens: p, MaxTokens: 24 + 6*i, IgnoreEOS: true}
					want[i], _, _ = generate(t, full, reqs[i])
					if got, _, _ := generate(t, win, reqs[i]); !equal(got, want[i]) {
						t.Errorf("prompt %d alone:\n rings %v\n  full %v", i, got, want[i])
					}
				}
				together := generateTogether(t, win, reqs)
				for i := range prompts {
					if !equal(together[i], want[i]) {
						t.Errorf("prompt %d together:\n rings %v\n  full %v", i, together[i], want[i])
					}
				}
			})
		}
	}
}

// TestWindowedSpeculative: a draft's rejected tokens rolled back in a
// ring (their rows counted in its size) leave the window the next step
// reads: speculative decoding with rings gives the full cache's tokens.
func TestWindowedSpeculative(t *testing.T) {
	prompts := windowPrompts(3)
	for _, shape := range []string{"tiny-gemma3", "tiny-gpt-oss", "tiny-mistral"} {
		for device, pair := range windowEngines(t, shape, runtime.Options{Context: 256, Budgets: windowBudgets, Draft: "ngram", SpeculateAlways: true}) {
			win, full := pair[0], pair[1]
			t.Run(shape+"/"+device, func(t *testing.T) {
				drafted := 0
				for i, p := range prompts {
					req := runtime.Request{Tokens: p, MaxTokens: 40, IgnoreEOS: true}
					want, _, _ := generate(t, full, req)
					got, _, st := generate(t, win, req)
					drafted += st.Drafted
					if !equal(got, want) {
						t.Errorf("prompt %d:\n rings %v\n  full %v", i, got, want)
					}
				}
				if drafted == 0 {
					t.Errorf("the draft proposed nothing: the test checks no rollback")
				}
			})
		}
	}
}

// TestWindowedPreemption: a flood into a pool of one context, with rings
// for two running sequences (any two of which outgrow the pool), preempts
// sequences (their rings freed,
// recomputed from position 0 later); every request that completes has
// the full cache's tokens.
func TestWindowedPreemption(t *testing.T) {
	prompts := windowPrompts(3)
	opts := runtime.Options{Context: 256, KV: runtime.KVOptions{BlockSize: 16, Tokens: 256}, Budgets: runtime.Budgets{MaxBatchTokens: 16}}
	for _, shape := range []string{"tiny-gemma3", "tiny-gemma4", "tiny-mistral"} {
		for device, pair := range windowEngines(t, shape, opts) {
			win, full := pair[0], pair[1]
			t.Run(shape+"/"+device, func(t *testing.T) {
				want := make([][]int32, len(prompts))
				for i, p := range prompts {
					want[i], _, _ = generate(t, full, runtime.Request{Tokens: p, MaxTokens: 150, IgnoreEOS: true})
				}
				floodPreempts(t, win, prompts, want, 8, 150, fmt.Sprintf("%d running at most", win.Budgets().MaxSeqs))
			})
		}
	}
}

// TestWindowedPrefixCache: a repeated prompt on a model with rings hits
// the prefix cache (its blocks up to the last whole one, and its ring
// restored from the snapshot kept there) and gives the same tokens, which
// are the full cache's; a prompt sharing only part of that prefix takes no
// hit (no ring was kept where it would resume) and gives its own tokens.
func TestWindowedPrefixCache(t *testing.T) {
	prompt := windowPrompts(3)[2][:41] // blocks of 8 share 40
	other := append(append([]int32(nil), prompt[:36]...), 7, 8, 9, 10, 11, 12, 13, 14, 15)
	for _, shape := range []string{"tiny-gemma3", "tiny-gemma4", "tiny-gpt-oss", "tiny-mistral"} {
		for device, pair := range windowEngines(t, shape, runtime.Options{Context: 256, Budgets: windowBudgets}) {
			win, full := pair[0], pair[1]
			t.Run(fmt.Sprintf("%s/%s", shape, device), func(t *testing.T) {
				req := runtime.Request{Tokens: prompt, MaxTokens: 30, IgnoreEOS: true}
				want, _, _ := generate(t, full, req)
				first, _, _ := generate(t, win, req)
				// Between the two, a prompt that shares part of the prefix
				// runs in the ring the first left (slots are reused): the
				// repeat must restore its window from the snapshot.
				before := win.Metrics().KV.PrefixHits
				got, _, _ := generate(t, win, runtime.Request{Tokens: other, MaxTokens: 30, IgnoreEOS: true})
				if hits := win.Metrics().KV.PrefixHits - before; hits != 0 {
					t.Errorf("a prompt sharing 36 tokens reused %d", hits)
				}
				if want, _, _ := generate(t, full, runtime.Request{Tokens: other, MaxTokens: 30, IgnoreEOS: true}); !equal(got, want) {
					t.Errorf("partly shared prompt:\n rings %v\n  full %v", got, want)
				}
				before = win.Metrics().KV.PrefixHits
				again, _, _ := generate(t, win, req)
				if hits := win.Metrics().KV.PrefixHits - before; hits != 40 {
					t.Errorf("the repeated prompt reused %d tokens, want 40", hits)
				}
				if !equal(first, want) || !equal(again, want) {
					t.Errorf("repeated prompt:\nfirst %v\nagain %v\n full %v", first, again, want)
				}
			})
		}
	}
}

// TestWindowedAllSlidingLlamaCpp: a Gemma 3 file whose every layer slides
// over 16 positions (sliding_window_pattern 0, which llama.cpp reads as
// every layer: set_swa_pattern(0)) runs with rings alone, its pool's cache
// holding no layer, and generates llama.cpp's 80 greedy tokens after a
// prompt of 15 (testdata/families/llamacpp.json), their log-probabilities
// within 1e-3, on the CPU and on WebGPU: the windows wrap around the rings
// several times.
func TestWindowedAllSlidingLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile("../testdata/families/llamacpp.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden familiesGolden
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	want, ok := golden.Shapes["tiny-gemma3-swa"]
	if !ok {
		t.Fatal("no tiny-gemma3-swa in the recording")
	}
	for device, pair := range windowEngines(t, "tiny-gemma3-swa", runtime.Options{Context: want.Context, Budgets: windowBudgets}) {
		t.Run(device, func(t *testing.T) {
			win := pair[0]
			var got []int32
			worst := 0.0
			_, err := win.Generate(context.Background(), runtime.Request{Tokens: golden.Prompt, MaxTokens: len(want.Tokens), IgnoreEOS: true, Logprobs: true},
				func(tok runtime.Token) error {
					if i := len(got); tok.ID >= 0 && i < len(want.Logprobs) {
						worst = max(worst, math.Abs(float64(tok.Logprob)-want.Logprobs[i]))
						got = append(got, tok.ID)
					}
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if !equal(got, want.Tokens) {
				t.Errorf("rings:\n%v\nllama.cpp:\n%v", got, want.Tokens)
			}
			t.Logf("%d tokens, log-probabilities within %.2g of llama.cpp's", len(got), worst)
			if worst > 1e-3 {
				t.Errorf("log-probabilities differ from llama.cpp's by up to %.3g", worst)
			}
		})
	}
}

// TestWindowedKVFollowsWindow: the KV cache of a model whose every layer
// slides (tiny-mistral, a window of 10) is its rings alone: the same bytes
// at a context of 64 and of 256 (running+3 rings of RingBlocks(10, 32, 8)
// blocks: the running sequences', the scratch one and two prefix
// snapshots), where keeping every position grows with the context; and
// one sequence of either context keeps a ring of its window (SequenceKV,
// which `tessera info` prints). A byte budget under one context of every
// layer, which kept every position could not load, runs the whole
// context in rings and gives the full cache's tokens.
func TestWindowedKVFollowsWindow(t *testing.T) {
	dir := synthHF(t, "tiny-mistral", dtype.F32, synth.HFOptions{})
	budgets := runtime.Budgets{MaxBatchTokens: 32, MaxSeqs: 2}
	type figures struct{ rings, full, seqRing, seqFull int64 }
	at := map[int]figures{}
	for _, ctx := range []int{64, 256} {
		var f figures
		for _, fullWindows := range []bool{false, true} {
			eng, err := runtime.Load(dir, runtime.Options{Device: "cpu", Context: ctx, Budgets: budgets, KV: runtime.KVOptions{FullWindows: fullWindows}})
			if err != nil {
				t.Fatal(err)
			}
			c := eng.Model().Config
			// Keys and values of one position in every layer, f32.
			perPos := int64(2 * c.Layers * c.KVHeads * c.HeadDim * 4)
			if fullWindows {
				f.full = eng.KVBytes()
				if eng.WindowBytes() != 0 {
					t.Errorf("context %d: FullWindows kept %d bytes of rings", ctx, eng.WindowBytes())
				}
			} else {
				f.rings = eng.KVBytes()
				ring := backend.RingBlocks(c.SlidingWindow, budgets.MaxBatchTokens, runtime.DefaultBlockSize)
				slots := int64(eng.Budgets().MaxSeqs + 1 + 2)
				if want := slots * int64(ring*runtime.DefaultBlockSize) * perPos; f.rings != want || eng.WindowBytes() != want {
					t.Errorf("context %d: kv %d bytes, rings %d, want %d rings of %d blocks = %d", ctx, f.rings, eng.WindowBytes(), slots, ring, want)
				}
				f.seqFull, f.seqRing = runtime.SequenceKV(c, backend.KVF32, ctx, runtime.DefaultBlockSize, budgets.MaxBatchTokens)
				if want := int64(ring*runtime.DefaultBlockSize) * perPos; f.seqRing != want {
					t.Errorf("context %d: one sequence keeps %d bytes, want a ring's %d", ctx, f.seqRing, want)
				}
			}
			eng.Close()
		}
		t.Logf("context %d: kv %d bytes with rings, %d with every position; one sequence %d and %d", ctx, f.rings, f.full, f.seqRing, f.seqFull)
		at[ctx] = f
	}
	short, long := at[64], at[256]
	if short.rings != long.rings || short.seqRing != long.seqRing {
		t.Errorf("rings grew with the context: %d → %d bytes (one sequence %d → %d)", short.rings, long.rings, short.seqRing, long.seqRing)
	}
	if long.full <= short.full || long.seqFull != 4*short.seqFull {
		t.Errorf("every position kept: %d → %d bytes (one sequence %d → %d), want growth with the context", short.full, long.full, short.seqFull, long.seqFull)
	}
	if long.rings >= long.full {
		t.Errorf("at 256 tokens the rings take %d bytes, every position %d", long.rings, long.full)
	}

	// Budgets under one context of every layer (32 blocks of 4 KiB): 25
	// blocks buy four rings of 6 (one running sequence, the scratch ring,
	// two prefix snapshots), 12 blocks two (no snapshot: a repeated prompt
	// takes no prefix hit, having no ring to resume from).
	ref, err := runtime.Load(dir, runtime.Options{Device: "cpu", Context: 256, Budgets: budgets, KV: runtime.KVOptions{FullWindows: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	req := runtime.Request{Tokens: windowPrompts(4)[3], MaxTokens: 256 - 77, IgnoreEOS: true}
	want, _, _ := generate(t, ref, req)
	for _, tc := range []struct {
		memory      int64
		rings, hits int
	}{{100 << 10, 4, 72}, {50 << 10, 2, 0}} {
		small := runtime.Options{Device: "cpu", Context: 256, Budgets: budgets, KV: runtime.KVOptions{Memory: tc.memory}}
		full := small
		full.KV.FullWindows = true
		if eng, err := runtime.Load(dir, full); !errors.Is(err, runtime.ErrOutOfKV) {
			if err == nil {
				eng.Close()
			}
			t.Fatalf("%d bytes with every position kept: %v, want ErrOutOfKV", tc.memory, err)
		}
		eng, err := runtime.Load(dir, small)
		if err != nil {
			t.Fatal(err)
		}
		defer eng.Close()
		ring := int64(backend.RingBlocks(10, budgets.MaxBatchTokens, runtime.DefaultBlockSize) * runtime.DefaultBlockSize * 512) // 512 bytes a position
		if eng.WindowBytes() != int64(tc.rings)*ring || eng.Budgets().MaxSeqs != 1 {
			t.Errorf("%d bytes: rings of %d bytes for %d running, want %d rings of %d", tc.memory, eng.WindowBytes(), eng.Budgets().MaxSeqs, tc.rings, ring)
		}
		for run := range 2 {
			before := eng.Metrics().KV.PrefixHits
			got, _, _ := generate(t, eng, req)
			if !equal(got, want) || len(got) != 256-77 {
				t.Errorf("%d bytes of rings:\n%v\nevery position:\n%v", tc.memory, got, want)
			}
			if hits := eng.Metrics().KV.PrefixHits - before; run == 1 && hits != tc.hits {
				t.Errorf("%d bytes: the repeated prompt reused %d tokens, want %d", tc.memory, hits, tc.hits)
			}
		}
	}
}

// TestWindowedGemma4AllSliding: Gemma 4's caches (a shape of layer each)
// take the same path when every layer slides, which no published Gemma 4
// does but a file may say (sliding_window_pattern of flags): the pool's
// cache of no layers first, then the rings, and the full cache's tokens.
func TestWindowedGemma4AllSliding(t *testing.T) {
	s, err := synth.Lookup("tiny-gemma4-kv")
	if err != nil {
		t.Fatal(err)
	}
	s.Config.Gemma4.VFromK = make([]bool, s.Config.Layers) // a sliding layer has its own values
	for l := range s.Config.Sliding {
		s.Config.Sliding[l] = true
	}
	path := filepath.Join(t.TempDir(), "gemma4-swa.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, s, dtype.F32, 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	opts := runtime.Options{Device: "cpu", Context: 256, Budgets: windowBudgets}
	eng, err := runtime.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if eng.WindowBytes() == 0 || eng.WindowBytes() != eng.KVBytes() {
		t.Fatalf("kv of %d bytes, %d of them rings: want rings alone", eng.KVBytes(), eng.WindowBytes())
	}
	opts.KV.FullWindows = true
	full, err := runtime.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	opts.KV.FullWindows = false
	gpu := loadWebGPU(t, path, opts)
	for _, p := range windowPrompts(4)[2:] {
		req := runtime.Request{Tokens: p, MaxTokens: 60, IgnoreEOS: true}
		want, _, _ := generate(t, full, req)
		got, _, _ := generate(t, eng, req)
		onGPU, _, _ := generate(t, gpu, req)
		if !equal(got, want) || !equal(onGPU, want) {
			t.Errorf("prompt of %d:\n   cpu %v\nwebgpu %v\n  full %v", len(p), got, onGPU, want)
		}
	}
}

// TestQwen2SlidingWindow: a Qwen2 folder with use_sliding_window slides
// the layers from max_window_layers on (every layer from 0, the second
// from 1), as transformers does: its logits are those of the same weights
// without a window for the first 12 positions and differ after them.
func TestQwen2SlidingWindow(t *testing.T) {
	plain, err := runtime.Load(synthHF(t, "tiny-qwen2", dtype.F32, synth.HFOptions{}), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	tokens := windowPrompts(3)[2][:30]
	global := logits(t, plain, tokens)
	for shape, want := range map[string][]bool{"tiny-qwen2@swa": {true, true}, "tiny-qwen2@swa1": {false, true}} {
		t.Run(shape, func(t *testing.T) {
			eng, err := runtime.Load(windowFile(t, shape), runtime.Options{Device: "cpu"})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			if c := eng.Model().Config; c.SlidingWindow != 12 || c.LayerSliding(0) != want[0] || c.LayerSliding(1) != want[1] {
				t.Fatalf("window %d, layers sliding %v, want 12 and %v", c.SlidingWindow, c.Sliding, want)
			}
			for p, l := range logits(t, eng, tokens) {
				if same := slices.Equal(l, global[p]); same != (p < 12) {
					t.Errorf("position %d: logits with and without the window equal: %v", p, same)
				}
			}
		})
	}
}
