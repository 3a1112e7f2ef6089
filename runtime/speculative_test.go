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
		for name, eng := range engines(t, runtime.Options{Context: 512, Draft: draft, DraftQuant: "int4"}) {
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
	for name, eng := range engines(t, runtime.Options{Context: 512, Draft: "ngram"}) {
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
