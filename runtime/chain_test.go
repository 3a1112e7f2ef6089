package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime"
)

// TestChainFromPrompt: with multi-step decoding, a prompt that arrives
// while another sequence decodes is read in the first step of a chain and
// decodes on in it (12 tokens take 3 round trips of 4, not 1 + 3), while
// a lone prompt's first token still comes after one step; and sequences
// arriving while others decode get exactly the tokens they get alone.
func TestChainFromPrompt(t *testing.T) {
	for name, eng := range engines(t, runtime.Options{MultiStep: 4}) {
		t.Run(name, func(t *testing.T) {
			_, _, lone := generate(t, eng, runtime.Request{Prompt: storyPrompts[0], MaxTokens: 12, IgnoreEOS: true})
			if lone.Steps != 4 {
				t.Errorf("alone, 12 tokens in %d round trips, want 1 + 3", lone.Steps)
			}
			// The long sequence writes stories260K's whole context in a
			// fraction of a second; where it ended before the joined one
			// (a loaded machine), the count says nothing: try again.
			for try := 1; ; try++ {
				long, err := eng.Start(context.Background(), runtime.Request{Prompt: storyPrompts[1], MaxTokens: 400, IgnoreEOS: true})
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := long.Next(); !ok { // decoding from here on
					t.Fatal("the long generation ended at once")
				}
				_, _, joined := generate(t, eng, runtime.Request{Prompt: storyPrompts[0], MaxTokens: 12, IgnoreEOS: true})
				var beside bool
				select {
				case <-long.Done():
				default:
					beside = true
				}
				long.Cancel()
				<-long.Done()
				if beside {
					if joined.Steps != 3 {
						t.Errorf("beside a decoding sequence, 12 tokens in %d round trips, want 3", joined.Steps)
					}
					break
				}
				if try == 5 {
					t.Fatal("in 5 tries the long sequence ended before the 12 tokens beside it")
				}
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
