package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// TestQwen35MatchesLlamaCpp: Qwen3.5's synthetic GGUFs (tiny-qwen35: six
// Gated DeltaNet layers and two gated full-attention layers, value heads
// twice the key heads; tiny-qwen35moe: with routed and shared experts)
// give llama.cpp's greedy tokens on the CPU and on WebGPU, and its
// log-probabilities within 1e-3 (testdata/families/qwen35.json, recorded
// as testdata/families/README.md says).
func TestQwen35MatchesLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile("../testdata/families/qwen35.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden familiesGolden
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	for name, want := range golden.Shapes {
		t.Run(name, func(t *testing.T) {
			path := qwen35File(t, name)
			checkFamily(t, path, golden.Prompt, want.Context, want.Tokens, want.Logprobs, want.Top, 1e-3, true)
		})
	}
}

// qwen35File writes shape's synthetic GGUF (seed 1, f32) in a temporary
// folder.
func qwen35File(t *testing.T, shape string) string {
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
	if err := synth.Write(f, s, dtype.F32, 1); err != nil {
		t.Fatal(err)
	}
	return path
}

// qwen35Engines loads tiny-qwen35 on the CPU and on WebGPU with opts.
func qwen35Engines(t *testing.T, opts runtime.Options) map[string]*runtime.Engine {
	t.Helper()
	path := qwen35File(t, "tiny-qwen35")
	opts.Device = "cpu"
	c, err := runtime.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return map[string]*runtime.Engine{"cpu": c, "webgpu": loadWebGPU(t, path, opts)}
}

// qwen35Prompts are n prompts of token ids (tiny-qwen35's vocabulary of
// 300), of lengths 5, 17, 29, ...: short and longer than a prompt chunk.
func qwen35Prompts(n int) [][]int32 {
	rng := rand.New(rand.NewPCG(35, 1))
	out := make([][]int32, n)
	for i := range out {
		out[i] = make([]int32, 5+12*i)
		for j := range out[i] {
			out[i][j] = 3 + rng.Int32N(297)
		}
	}
	return out
}

// TestQwen35Batched: sequences of a hybrid model decoded together (their
// recurrent states in their own slots, prompt chunks beside decoding rows)
// give the tokens each gives alone, with chained decoding too.
func TestQwen35Batched(t *testing.T) {
	prompts := qwen35Prompts(6)
	for _, multi := range []int{1, 4} {
		for name, eng := range qwen35Engines(t, runtime.Options{Context: 256, MultiStep: multi}) {
			t.Run(fmt.Sprintf("%s/multistep%d", name, multi), func(t *testing.T) {
				alone := make([][]int32, len(prompts))
				reqs := make([]runtime.Request, len(prompts))
				for i, p := range prompts {
					reqs[i] = runtime.Request{Tokens: p, MaxTokens: 20 + 7*i, IgnoreEOS: true}
					alone[i], _, _ = generate(t, eng, reqs[i])
				}
				together := generateTogether(t, eng, reqs)
				for i := range prompts {
					if !equal(alone[i], together[i]) {
						t.Errorf("prompt %d:\ntogether %v\n   alone %v", i, together[i], alone[i])
					}
				}
			})
		}
	}
}

// TestQwen35Preemption: a flood into a pool of one context preempts
// sequences (their state slots freed, recomputed from position 0 later);
// every request that completes has the tokens it gives alone.
func TestQwen35Preemption(t *testing.T) {
	prompts := qwen35Prompts(4)
	for name, eng := range qwen35Engines(t, runtime.Options{Context: 256, KV: runtime.KVOptions{BlockSize: 16, Tokens: 256}}) {
		t.Run(name, func(t *testing.T) {
			want := make([][]int32, len(prompts))
			for i, p := range prompts {
				want[i], _, _ = generate(t, eng, runtime.Request{Tokens: p, MaxTokens: 120, IgnoreEOS: true})
			}
			floodPreempts(t, eng, prompts, want, 12, 120, "")
		})
	}
}

// TestQwen35PrefixCache: a repeated prompt hits the prefix cache (its
// blocks up to the last whole one, and the linear layers' state kept as a
// snapshot there) and gives the same tokens; so do parallel samples of
// one prompt. A prompt that shares only part of that prefix takes no hit
// (no state was kept where it would resume) and still gives its own
// tokens, as on an engine that never saw the first.
func TestQwen35PrefixCache(t *testing.T) {
	prompt := qwen35Prompts(4)[3] // 41 tokens: blocks of 8 share 40
	other := append(append([]int32(nil), prompt[:36]...), 7, 8, 9, 10, 11, 12, 13, 14, 15)
	for name, eng := range qwen35Engines(t, runtime.Options{Context: 256}) {
		t.Run(name, func(t *testing.T) {
			fresh := loadLike(t, eng, name)
			req := runtime.Request{Tokens: prompt, MaxTokens: 30, IgnoreEOS: true}
			first, _, _ := generate(t, eng, req)
			before := eng.Metrics().KV.PrefixHits
			again, _, _ := generate(t, eng, req)
			if hits := eng.Metrics().KV.PrefixHits - before; hits != 40 {
				t.Errorf("the repeated prompt reused %d tokens, want 40", hits)
			}
			if !equal(first, again) {
				t.Errorf("repeated prompt:\nagain %v\nfirst %v", again, first)
			}
			sts, err := eng.StartN(context.Background(), req, 3)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range sts {
				var ids []int32
				for tok, err := range st.Tokens() {
					if err != nil {
						t.Fatal(err)
					}
					if tok.ID >= 0 {
						ids = append(ids, tok.ID)
					}
				}
				if !equal(ids, first) {
					t.Errorf("sample %d: %v, want %v", i, ids, first)
				}
			}
			before = eng.Metrics().KV.PrefixHits
			got, _, _ := generate(t, eng, runtime.Request{Tokens: other, MaxTokens: 30, IgnoreEOS: true})
			if hits := eng.Metrics().KV.PrefixHits - before; hits != 0 {
				t.Errorf("a prompt sharing 36 tokens reused %d", hits)
			}
			want, _, _ := generate(t, fresh, runtime.Request{Tokens: other, MaxTokens: 30, IgnoreEOS: true})
			if !equal(got, want) {
				t.Errorf("partly shared prompt:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// loadLike loads another engine of e's model on the same kind of device.
func loadLike(t *testing.T, e *runtime.Engine, device string) *runtime.Engine {
	t.Helper()
	opts := runtime.Options{Context: 256}
	if device == "webgpu" {
		return loadWebGPU(t, e.Model().Path, opts)
	}
	opts.Device = "cpu"
	f, err := runtime.Load(e.Model().Path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestQwen35RefusesSpeculation: speculative decoding rolls rejected
// tokens back, which a recurrent state cannot: loading with a draft fails
// with a reason.
func TestQwen35RefusesSpeculation(t *testing.T) {
	_, err := runtime.Load(qwen35File(t, "tiny-qwen35"), runtime.Options{Device: "cpu", Draft: "ngram"})
	if err == nil || !strings.Contains(err.Error(), "linear-attention state") {
		t.Fatalf("load with a draft: %v", err)
	}
}
