package runtime_test

import (
	"errors"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
)

// floodPreempts runs n greedy requests at once over prompts (request i
// takes prompt i mod len(prompts)) on an engine whose pool cannot hold
// them all: each that completes must give want's tokens for its prompt
// (a request may run out of KV, none may fail otherwise), some must
// complete and the engine must have preempted on the way. note is logged
// with the figures.
func floodPreempts(t *testing.T, eng *runtime.Engine, prompts, want [][]int32, n, maxTokens int, note string) {
	t.Helper()
	reqs := make([]runtime.Request, n)
	for i := range reqs {
		reqs[i] = runtime.Request{Tokens: prompts[i%len(prompts)], MaxTokens: maxTokens, IgnoreEOS: true}
	}
	got, errs := generateAll(eng, reqs)
	done := 0
	for i, err := range errs {
		switch {
		case err == nil:
			done++
			if !equal(got[i], want[i%len(prompts)]) {
				t.Errorf("request %d:\n got %v\nwant %v", i, got[i], want[i%len(prompts)])
			}
		case errors.Is(err, runtime.ErrOutOfKV):
		default:
			t.Errorf("request %d: %v", i, err)
		}
	}
	m := eng.Metrics()
	t.Logf("%d of %d completed, %d preemptions %s", done, n, m.Preemptions, note)
	if done == 0 || m.Preemptions == 0 {
		t.Errorf("%d completed, %d preemptions: the flood should preempt and still complete", done, m.Preemptions)
	}
}
