package runtime_test

import (
	"fmt"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
)

// TestSampledWebGPUMatchesCPU: sampled decoding with a seed gives the CPU
// sampler's tokens on WebGPU, whose kernels draw them (the CPU backend
// samples on the host), for every sampling parameter, in single steps and
// in chains of 4; sampled chains need few round trips, and no step reads
// a logits row back (a flat row's draw too is the device's).
func TestSampledWebGPUMatchesCPU(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	c, err := runtime.Load(path, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gpus := map[string]*runtime.Engine{
		"steps":  loadWebGPU(t, path, runtime.Options{MultiStep: 1}),
		"chains": loadWebGPU(t, path, runtime.Options{MultiStep: 4}),
	}
	for i, o := range []runtime.SamplerOptions{
		{Temperature: 0.8},
		{Temperature: 1, TopK: 40},
		{Temperature: 0.9, TopP: 0.9},
		{Temperature: 1.1, MinP: 0.05, LogitBias: map[int32]float32{13: 3, 260: -100}},
		{Temperature: 0.7, TopK: 100, TopP: 0.95, MinP: 0.02},
		{Temperature: 2},
		{Temperature: 8}, // flat: draws past the 256 ranked candidates
		{Temperature: 1, RepeatPenalty: 1.3, RepeatLastN: 32, FrequencyPenalty: 0.4, PresencePenalty: 0.2},
		{RepeatPenalty: 1.5, RepeatLastN: 16}, // greedy after penalties
	} {
		o.Seed = uint64(40 + i)
		req := runtime.Request{Prompt: storyPrompts[i%len(storyPrompts)], MaxTokens: 48, IgnoreEOS: true, Sampler: o}
		want, _, _ := generate(t, c, req)
		for name, g := range gpus {
			t.Run(fmt.Sprintf("%s/%d", name, i), func(t *testing.T) {
				read := g.Backend().Stats().ReadBytes
				got, _, st := generate(t, g, req)
				if b := float64(g.Backend().Stats().ReadBytes-read) / float64(st.Generated); b > 64 {
					t.Errorf("options %+v: %.1f bytes read back a token, want at most 64 (one sequence)", o, b)
				}
				if !equal(got, want) {
					t.Fatalf("options %+v:\nwebgpu %v\n   cpu %v", o, got, want)
				}
				t.Logf("%d tokens in %d round trips", st.Generated, st.Steps)
				if name == "chains" && o.RepeatPenalty == 0 && o.FrequencyPenalty == 0 && st.Steps > st.Generated/2 {
					t.Errorf("options %+v: %d tokens in %d round trips: sampled steps did not chain", o, st.Generated, st.Steps)
				}
				if rt := st.RoundTripsPerToken(); name == "chains" && i == 0 && rt > 0.3 {
					t.Errorf("temperature 0.8 in chains of 4: %.2f round trips a token, want <= 0.3", rt)
				}
			})
		}
	}
}
