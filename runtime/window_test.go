package runtime_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// windowBudgets keep a ring shorter than the tiny models' context of 256
// on WebGPU too (whose default step of 512 rows, capped by the context,
// would make a ring of the whole context: no rings).
var windowBudgets = runtime.Budgets{MaxBatchTokens: 32}

// windowShapes are the synthetic families with sliding-window layers:
// Gemma 2 (every other layer), Gemma 3 (five of six), Gemma 4 (its own
// head sizes in the sliding layers, and shared layers) and gpt-oss (sinks
// and YaRN), with windows of 9 to 12 positions; and two whose every layer
// slides, whose pool's cache then holds no layer: Mistral (a Hugging Face
// folder, window 10) and a Gemma 3 file with a window of 16 on every layer.
var windowShapes = []string{"tiny-gemma2", "tiny-gemma3", "tiny-gemma4", "tiny-gpt-oss", "tiny-mistral", "tiny-gemma3-swa"}

// windowFile writes shape's synthetic model: a Hugging Face folder for
// Mistral (GGUF has no Mistral architecture), else a GGUF file.
func windowFile(t *testing.T, shape string) string {
	t.Helper()
	if shape == "tiny-mistral" {
		return synthHF(t, shape, dtype.F32, synth.HFOptions{})
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
				for i, p := range prompts {
					want[i], _, _ = generate(t, full, runtime.Request{Tokens: p, MaxTokens: 24 + 6*i, IgnoreEOS: true})
					if got, _, _ := generate(t, win, runtime.Request{Tokens: p, MaxTokens: 24 + 6*i, IgnoreEOS: true}); !equal(got, want[i]) {
						t.Errorf("prompt %d alone:\n rings %v\n  full %v", i, got, want[i])
					}
				}
				together := make([][]int32, len(prompts))
				var wg sync.WaitGroup
				for i, p := range prompts {
					wg.Add(1)
					go func() {
						defer wg.Done()
						together[i], _, _ = generate(t, win, runtime.Request{Tokens: p, MaxTokens: 24 + 6*i, IgnoreEOS: true})
					}()
				}
				wg.Wait()
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
