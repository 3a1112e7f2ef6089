package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
)

var storyPrompts = []string{
	"Once upon a time, there was a dog",
	"Lily and Ben went to the park",
	"The sun was hot. Tom wanted to swim in the big blue sea with his mom and dad, but",
	"One day, a little bird",
	"Sara had a red ball",
	"There was a big tree in the garden. Every day, a small cat",
}

// engines returns stories260K on the CPU and on WebGPU, with opts.
func engines(t *testing.T, opts runtime.Options) map[string]*runtime.Engine {
	path := sharedFile(t, "stories260K.gguf")
	opts.Device = "cpu"
	c, err := runtime.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return map[string]*runtime.Engine{"cpu": c, "webgpu": loadWebGPU(t, path, opts)}
}

// TestConcurrentMatchesAlone: sequences run together (batched into the same
// forward steps) give exactly the tokens each gives alone.
func TestConcurrentMatchesAlone(t *testing.T) {
	for name, eng := range engines(t, runtime.Options{}) {
		t.Run(name, func(t *testing.T) {
			alone := make([][]int32, len(storyPrompts))
			reqs := make([]runtime.Request, len(storyPrompts))
			for i, p := range storyPrompts {
				reqs[i] = runtime.Request{Prompt: p, MaxTokens: 60 + 10*i}
				alone[i], _, _ = generate(t, eng, reqs[i])
			}
			together := generateTogether(t, eng, reqs)
			for i := range storyPrompts {
				if !equal(alone[i], together[i]) {
					t.Errorf("prompt %d:\ntogether %v\n   alone %v", i, together[i], alone[i])
				}
			}
		})
	}
}

// TestSharedPrefix: sequences with one long common prompt share its blocks
// (the prefix cache hits) and still produce their own correct tokens.
func TestSharedPrefix(t *testing.T) {
	system := strings.Repeat("Tom had a big red ball. He liked to play with it in the park. ", 4)
	for name, eng := range engines(t, runtime.Options{}) {
		t.Run(name, func(t *testing.T) {
			want := map[string][]int32{}
			for _, p := range storyPrompts[:3] {
				want[p], _, _ = generate(t, eng, runtime.Request{Prompt: system + p, MaxTokens: 30})
			}
			before := eng.Metrics().KV
			var wg sync.WaitGroup
			var mu sync.Mutex
			for _, p := range storyPrompts[:3] {
				wg.Add(1)
				go func() {
					defer wg.Done()
					got, _, _ := generate(t, eng, runtime.Request{Prompt: system + p, MaxTokens: 30})
					mu.Lock()
					defer mu.Unlock()
					if !equal(got, want[p]) {
						t.Errorf("%q: shared %v, alone %v", p, got, want[p])
					}
				}()
			}
			wg.Wait()
			after := eng.Metrics().KV
			if after.PrefixHits <= before.PrefixHits {
				t.Errorf("no prefix cache hits: before %+v after %+v", before, after)
			}
			t.Logf("%s: prefix hit rate %.2f", name, after.HitRate)
		})
	}
}

// TestFloodOutOfKV sends far more work than a tiny pool holds: every request
// completes with the tokens it gives alone, or fails with ErrOutOfKV; the
// engine stays usable.
func TestFloodOutOfKV(t *testing.T) {
	opts := runtime.Options{Context: 512, KV: runtime.KVOptions{BlockSize: 16, Tokens: 512}}
	for name, eng := range engines(t, opts) {
		t.Run(name, func(t *testing.T) {
			want := map[int][]int32{}
			for i := range 4 {
				want[i], _, _ = generate(t, eng, runtime.Request{Prompt: storyPrompts[i], MaxTokens: 200})
			}
			reqs := make([]runtime.Request, 24)
			for i := range reqs {
				reqs[i] = runtime.Request{Prompt: storyPrompts[i%4], MaxTokens: 200}
			}
			got, errs := generateAll(eng, reqs)
			done := 0
			for i, err := range errs {
				switch {
				case err == nil:
					done++
					if !equal(got[i], want[i%4]) {
						t.Errorf("request %d completed with wrong tokens:\n got %v\nwant %v", i, got[i], want[i%4])
					}
				case errors.Is(err, runtime.ErrOutOfKV):
				default:
					t.Errorf("request %d: unexpected error %v", i, err)
				}
			}
			m := eng.Metrics()
			t.Logf("%s: %d of %d completed, %d preemptions, pool %+v", name, done, len(errs), m.Preemptions, m.KV)
			if done == 0 {
				t.Error("no request completed")
			}
			if m.Preemptions == 0 {
				t.Error("a flood into a tiny pool preempted nothing")
			}
			// Still usable.
			after, _, _ := generate(t, eng, runtime.Request{Prompt: storyPrompts[0], MaxTokens: 200})
			if !equal(after, want[0]) {
				t.Error("the engine gives different tokens after the flood")
			}
		})
	}
}

// TestPromptNeverFits: a prompt larger than the whole pool is refused at
// once with a clear error.
func TestPromptNeverFits(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu", Context: 512, KV: runtime.KVOptions{Tokens: 512}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ids := make([]int32, 511)
	for i := range ids {
		ids[i] = 400
	}
	_, err = eng.Start(context.Background(), runtime.Request{Tokens: ids, MaxTokens: 10})
	if err != nil {
		t.Fatalf("a prompt that fits was refused: %v", err)
	}
	_, err = runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu", Context: 512, KV: runtime.KVOptions{Tokens: 100}})
	if !errors.Is(err, runtime.ErrOutOfKV) {
		t.Fatalf("a pool smaller than one context: got %v, want ErrOutOfKV", err)
	}
}
