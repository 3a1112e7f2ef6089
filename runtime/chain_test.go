package runtime_test

import (
	"sync"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime"
)

// TestChainFromPrompt: with multi-step decoding, the step that reads a
// prompt chains on into decoding (a lone sequence of 12 tokens takes 3
// round trips of 4, not 1 + 3), and sequences that arrive while others
// decode, their prompts read inside chains, get exactly the tokens they
// get alone.
func TestChainFromPrompt(t *testing.T) {
	for name, eng := range engines(t, runtime.Options{MultiStep: 4}) {
		t.Run(name, func(t *testing.T) {
			_, _, st := generate(t, eng, runtime.Request{Prompt: storyPrompts[0], MaxTokens: 12, IgnoreEOS: true})
			if st.Steps != 3 {
				t.Errorf("12 tokens in %d round trips, want 3", st.Steps)
			}
			alone := make([][]int32, len(storyPrompts))
			for i, p := range storyPrompts {
				alone[i], _, _ = generate(t, eng, runtime.Request{Prompt: p, MaxTokens: 40 + 7*i})
			}
			got := make([][]int32, len(storyPrompts))
			var wg sync.WaitGroup
			for i, p := range storyPrompts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got[i], _, _ = generate(t, eng, runtime.Request{Prompt: p, MaxTokens: 40 + 7*i})
				}()
				// Staggered: the next prompt arrives while the others decode.
				deadline := time.Now().Add(5 * time.Second)
				for eng.Metrics().Running < i+1 && time.Now().Before(deadline) {
					time.Sleep(100 * time.Microsecond)
				}
				time.Sleep(2 * time.Millisecond)
			}
			wg.Wait()
			for i := range storyPrompts {
				if !equal(got[i], alone[i]) {
					t.Errorf("prompt %d:\n staggered %v\n     alone %v", i, got[i], alone[i])
				}
			}
		})
	}
}
