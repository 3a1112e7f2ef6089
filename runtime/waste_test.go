package runtime_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime"
)

// TestPoolWaste runs a mixed workload (short chats and long stories at
// once) and samples the KV pool's waste (allocated but unused slots over
// allocated slots) while it runs: paged blocks waste at most one partial
// block per sequence.
func TestPoolWaste(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu", Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	rng := rand.New(rand.NewPCG(4, 4))
	var wg sync.WaitGroup
	for i := range 16 {
		n := 20 + rng.IntN(80) // short
		if i%2 == 0 {
			n = 300 + rng.IntN(200) // long
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			generate(t, eng, runtime.Request{Prompt: storyPrompts[i%len(storyPrompts)], MaxTokens: n, IgnoreEOS: true})
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var sum float64
	var samples int
	for {
		select {
		case <-done:
			if samples == 0 {
				t.Fatal("no sample of the pool was taken")
			}
			mean := sum / float64(samples)
			t.Logf("mean waste %.2f%% over %d samples", 100*mean, samples)
			if mean >= 0.04 {
				t.Errorf("mean pool waste %.2f%% is not under 4%%", 100*mean)
			}
			return
		case <-time.After(2 * time.Millisecond):
			if m := eng.Metrics(); m.KV.AllocatedSlots > 0 {
				sum += m.KV.Waste
				samples++
			}
		}
	}
}
