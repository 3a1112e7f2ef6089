package runtime_test

import (
	"errors"
	"os"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
)

// TestSpeculativeGreedyLossless: with a draft (prompt lookup, or a model
// draft: here the model itself, once from its other file), greedy decoding
// prints exactly the tokens it prints without one, on the golden story and
// on prompts, on every backend.
func TestSpeculativeGreedyLossless(t *testing.T) {
	want := goldenIDs(t)
	for _, draft := range []string{"ngram", sharedFile(t, "stories260K.bin")} {
		for name, eng := range engines(t, runtime.Options{Context: 512, Draft: draft, DraftQuant: "int4", SpeculateAlways: true}) {
			t.Run(name+"/"+draft, func(t *testing.T) {
				ids, _, st := generate(t, eng, runtime.Request{MaxTokens: 200})
				if !equal(ids, want) {
					t.Fatalf("speculative greedy differs from the golden story:\n got %v\nwant %v", ids, want)
				}
				if st.Drafted == 0 || st.Steps >= st.Generated {
					t.Errorf("no speculation happened: %+v", st)
				}
				t.Logf("acceptance %.2f, %.2f tokens per target step", st.AcceptanceRate(), st.TokensPerStep())
			})
		}
	}
}

func TestSpeculativePromptsLossless(t *testing.T) {
	plain := engines(t, runtime.Options{Context: 512})
	for name, eng := range engines(t, runtime.Options{Context: 512, Draft: "ngram", SpeculateAlways: true}) {
		for _, p := range storyPrompts {
			req := runtime.Request{Prompt: p, MaxTokens: 120}
			want, _, _ := generate(t, plain[name], req)
			got, _, _ := generate(t, eng, req)
			if !equal(got, want) {
				t.Errorf("%s %q:\nspeculative %v\n      plain %v", name, p, got, want)
			}
		}
	}
}

func TestDraftVocabularyRefused(t *testing.T) {
	// A tokenizer file with a different vocabulary makes a different model
	// description; the smallest real mismatch here is the synthetic model.
	path := synthModel(t, "tiny", 0)
	_, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu", Context: 256, Draft: path})
	if !errors.Is(err, runtime.ErrDraftVocab) {
		t.Fatalf("got %v, want ErrDraftVocab", err)
	}
	_ = os.Remove(path)
}

func TestDraftTooLarge(t *testing.T) {
	_, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu", Context: 512, Draft: sharedFile(t, "stories260K.bin")})
	if !errors.Is(err, runtime.ErrDraftTooLarge) {
		t.Fatalf("got %v, want ErrDraftTooLarge", err)
	}
}

// TestMultiStep: greedy decoding chained 8 steps per submission (each step
// reading the last one's token on the device) gives the golden story with
// one round trip per 8 tokens, also when a stop token or the token budget
// falls inside a chain.
func TestMultiStep(t *testing.T) {
	want := goldenIDs(t)
	for name, eng := range engines(t, runtime.Options{Context: 512, MultiStep: 8}) {
		t.Run(name, func(t *testing.T) {
			ids, _, st := generate(t, eng, runtime.Request{MaxTokens: 200})
			if !equal(ids, want) {
				t.Fatalf("chained greedy differs from the golden story:\n got %v\nwant %v", ids, want)
			}
			if r := st.RoundTripsPerToken(); r > 0.2 {
				t.Errorf("%.2f round trips per token with chains of 8", r)
			}
			for _, n := range []int{1, 3, 13, 77} { // budgets that end mid-chain
				ids, _, _ := generate(t, eng, runtime.Request{MaxTokens: n})
				if !equal(ids, want[:n]) {
					t.Errorf("MaxTokens %d: got %v", n, ids)
				}
			}
			// Concurrent sequences chain together.
			plain := engines(t, runtime.Options{Context: 512, MultiStep: 1})[name]
			for _, p := range storyPrompts[:3] {
				a, _, _ := generate(t, eng, runtime.Request{Prompt: p, MaxTokens: 50})
				b, _, _ := generate(t, plain, runtime.Request{Prompt: p, MaxTokens: 50})
				if !equal(a, b) {
					t.Errorf("%q: chained %v, plain %v", p, a, b)
				}
			}
		})
	}
}

// TestSpeculativeSampledKeepsTokens: seeded sampling with prompt lookup
// drafting gives exactly the tokens it gives without a draft (a one-hot
// draft is verified by sampling each row with the plain stream), so the
// policy's timing-driven choices never show in the output.
func TestSpeculativeSampledKeepsTokens(t *testing.T) {
	plain := engines(t, runtime.Options{Context: 512})
	for name, eng := range engines(t, runtime.Options{Context: 512, Draft: "ngram", SpeculateAlways: true}) {
		for i, p := range storyPrompts[:3] {
			req := runtime.Request{Prompt: p, MaxTokens: 100, Sampler: runtime.SamplerOptions{Temperature: 0.8, TopP: 0.95, Seed: uint64(10 + i)}}
			want, _, _ := generate(t, plain[name], req)
			got, _, st := generate(t, eng, req)
			if !equal(got, want) {
				t.Errorf("%s %q:\nspeculative %v\n      plain %v", name, p, got, want)
			}
			if st.Drafted == 0 {
				t.Errorf("%s %q: nothing drafted", name, p)
			}
		}
	}
}
