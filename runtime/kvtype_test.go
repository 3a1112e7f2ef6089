package runtime_test

import (
	"math"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// loadKV loads stories260K with f32 weights, context 512 (its training
// length) and a cache of type kt on device ("cpu" or "webgpu").
func loadKV(t *testing.T, device string, kt backend.KVType) *runtime.Engine {
	t.Helper()
	path := sharedFile(t, "stories260K.gguf")
	opts := runtime.Options{Quant: "f32", Context: 512, KV: runtime.KVOptions{Type: kt}}
	if device == "webgpu" {
		return loadWebGPU(t, path, opts)
	}
	opts.Device = "cpu"
	eng, err := runtime.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// matching is how many leading tokens a and b share.
func matching(a, b []int32) int {
	n := 0
	for n < min(len(a), len(b)) && a[n] == b[n] {
		n++
	}
	return n
}

// TestKVTypes scores the test text with stories260K on each backend over
// f32, f16 and int8 caches: f16 and int8 keep perplexity within 0.05% and
// 0.5% of f32 (the bound for int8) without being f32 (the
// narrower cache is really used), WebGPU's figures are the CPU's for the
// same cache type, the pool takes the bytes its type says, and greedy
// decoding with a cache shared through the prefix cache (the second
// request reuses the first's blocks) gives the same tokens as the first.
func TestKVTypes(t *testing.T) {
	text := storyText(t)
	ppl := map[string]map[backend.KVType]float64{}
	for _, device := range []string{"cpu", "webgpu"} {
		ppl[device] = map[backend.KVType]float64{}
		for _, kt := range []backend.KVType{backend.KVF32, backend.KVF16, backend.KVInt8} {
			if device == "webgpu" && kt == backend.KVF16 {
				continue // the kernels' f16 path is checked against the CPU's by runtime/gpu's twin tests
			}
			eng := loadKV(t, device, kt)
			if got := eng.KVType(); got != kt {
				t.Fatalf("%s: engine reports a %v cache, want %v", device, got, kt)
			}
			c := eng.Model().Config
			per := backend.KVShape{Layers: c.Layers, Blocks: 1, BlockSize: 1, Heads: c.KVHeads, HeadDim: c.HeadDim, Type: kt}.Bytes()
			if tokens := eng.KVBytes() / per; eng.KVBytes()%per != 0 || tokens < int64(c.Context) {
				t.Errorf("%s %v: pool of %d bytes, not a whole number of %d-byte tokens at least a context long", device, kt, eng.KVBytes(), per)
			}
			p, n := perplexity(t, eng, text)
			ppl[device][kt] = p
			t.Logf("%s, %v kv cache: perplexity %.4f over %d tokens", device, kt, p, n)
			if device == "cpu" && kt == backend.KVInt8 {
				req := runtime.Request{Prompt: "Lily and Ben found a little dog in the park.", MaxTokens: 60}
				first, _, _ := generate(t, eng, req)
				hits := eng.Metrics().KV.PrefixHits
				again, _, _ := generate(t, eng, req)
				if reused := eng.Metrics().KV.PrefixHits - hits; !equal(first, again) || reused == 0 {
					t.Errorf("int8 cache: a request reusing %d cached blocks of the prompt gave\n%v, first\n%v", reused, again, first)
				}
			}
		}
	}
	for device, p := range ppl {
		f32 := p[backend.KVF32]
		for kt, bound := range map[backend.KVType]float64{backend.KVF16: 5e-4, backend.KVInt8: 5e-3} {
			q, ok := p[kt]
			if !ok {
				continue
			}
			if d := math.Abs(q/f32 - 1); d > bound || q == f32 {
				t.Errorf("%s: %v cache perplexity %.5f against f32's %.5f (%+.3f%%): want a difference within %.2f%%, not none", device, kt, q, f32, 100*(q/f32-1), 100*bound)
			}
		}
	}
	for _, kt := range []backend.KVType{backend.KVF32, backend.KVInt8} {
		if c, g := ppl["cpu"][kt], ppl["webgpu"][kt]; math.Abs(g/c-1) > 1e-4 {
			t.Errorf("%v cache: perplexity %.5f on WebGPU, %.5f on the CPU", kt, g, c)
		}
	}
}

// TestKVInt8Greedy decodes 200 greedy tokens of stories260K from BOS with
// an int8 cache on each backend, against the f32 cache. The two caches'
// stories may part (the figure is logged); int8 on WebGPU must match int8
// on the CPU as f32 does, since both store the same codes.
func TestKVInt8Greedy(t *testing.T) {
	req := runtime.Request{MaxTokens: 200}
	want := goldenIDs(t)
	got := map[string][]int32{}
	for _, device := range []string{"cpu", "webgpu"} {
		ids, _, _ := generate(t, loadKV(t, device, backend.KVInt8), req)
		got[device] = ids
		t.Logf("%s: the int8 cache's greedy story has the f32 cache's (llama2.c's) first %d of %d tokens", device, matching(ids, want), len(want))
	}
	f16, _, _ := generate(t, loadKV(t, "cpu", backend.KVF16), req)
	t.Logf("cpu: the f16 cache's greedy story has the f32 cache's first %d of %d tokens", matching(f16, want), len(want))
	if n := matching(got["webgpu"], got["cpu"]); n != len(got["cpu"]) {
		t.Errorf("int8 cache: WebGPU and CPU greedy tokens part after %d of %d:\nwebgpu %v\n   cpu %v", n, len(got["cpu"]), got["webgpu"], got["cpu"])
	}
}
