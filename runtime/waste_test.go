package runtime_test

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
)

// TestPoolWaste runs a mixed workload (8 short and 8 long generations at
// once) and reads the KV pool's waste over it: allocated but unused slots
// over allocated slots, summed after every step. Paged blocks waste at
// most one partial block per sequence, so the waste falls with the block
// size: the default 8-token blocks keep it under 4% on this workload,
// whose sequences are short (16-token blocks give about 4.2%).
func TestPoolWaste(t *testing.T) {
	for _, tc := range []struct {
		block int
		limit float64
	}{{8, 0.04}, {16, 0.06}} {
		eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"),
			runtime.Options{Device: "cpu", Context: 512, KV: runtime.KVOptions{BlockSize: tc.block}})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(4, 4))
		var wg sync.WaitGroup
		for i := range 16 {
			n := 40 + rng.IntN(120) // short
			if i%2 == 0 {
				n = 300 + rng.IntN(190) // long
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				generate(t, eng, runtime.Request{Prompt: storyPrompts[i%len(storyPrompts)], MaxTokens: n, IgnoreEOS: true})
			}()
		}
		wg.Wait()
		m := eng.Metrics()
		eng.Close()
		t.Logf("%d-token blocks: waste %.2f%% of allocated slots", tc.block, 100*m.MeanWaste)
		if m.MeanWaste <= 0 || m.MeanWaste >= tc.limit {
			t.Errorf("%d-token blocks: waste %.2f%% is not in (0, %.0f%%)", tc.block, 100*m.MeanWaste, 100*tc.limit)
		}
	}
}
