package runtime_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// loadWebGPU loads a model on WebGPU, skipping (outside CI) or failing (in
// CI) when the machine has no adapter. Weights stay f32 unless opts says
// otherwise, so that results compare with the f32 Go reference.
func loadWebGPU(t *testing.T, path string, opts runtime.Options) *runtime.Engine {
	t.Helper()
	opts.Device = "webgpu"
	if opts.Quant == "" {
		opts.Quant = "f32"
	}
	eng, err := runtime.Load(path, opts)
	if errors.Is(err, webgpu.ErrNoAdapter) {
		gputest.NoDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// TestGoldenGreedyWebGPU: the whole forward pass as WGSL gives llama2.c's
// greedy story, from both files of the model.
func TestGoldenGreedyWebGPU(t *testing.T) {
	want := goldenIDs(t)
	wantText, err := os.ReadFile(sharedFile(t, "stories260K.greedy200.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for path, opts := range stories260K(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			eng := loadWebGPU(t, path, opts)
			ids, text, _ := generate(t, eng, runtime.Request{MaxTokens: 200})
			if !equal(ids, want) {
				t.Fatalf("tokens differ from llama2.c's:\n got %v\nwant %v", ids, want)
			}
			if text+"\n" != string(wantText) {
				t.Errorf("text differs:\n got %q\nwant %q", text, wantText)
			}
		})
	}
}

// TestWebGPUMatchesCPU compares greedy continuations of prompts, whose
// prefill runs as batched matrix-matrix work, on both backends.
func TestWebGPUMatchesCPU(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	g := loadWebGPU(t, path, runtime.Options{})
	c, err := runtime.Load(path, runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, prompt := range []string{
		"Once upon a time, there was a dog",
		"The little bird",
		"Tom and Sue went to the park to play with their big red ball. They ran and ran. Then they saw a cat. The cat was sad because it was lost. Tom said, \"Let's help the cat find its home.\"",
	} {
		req := runtime.Request{Prompt: prompt, MaxTokens: 80}
		want, _, _ := generate(t, c, req)
		got, _, _ := generate(t, g, req)
		if !equal(got, want) {
			t.Errorf("%q:\nwebgpu %v\n   cpu %v", prompt, got, want)
		}
	}
}

// TestWebGPUSplitWeights loads the model with a storage binding limit so low
// that the embedding table and output head (128 KiB each) are split across
// bindings, though the largest activation (32 rows of logits) fits, and
// still gets the golden tokens.
func TestWebGPUSplitWeights(t *testing.T) {
	if _, err := webgpu.Adapters(); err != nil {
		gputest.NoDevice(t, err)
	}
	want := goldenIDs(t)
	// Weights split across bindings; activations do not, so the default
	// budgets shrink to what fits one: 95 rows of the feed-forward's 172,
	// 32 rows of logits.
	eng := loadWebGPU(t, sharedFile(t, "stories260K.gguf"), runtime.Options{MaxStorageBinding: 64 << 10, Context: 256, KV: runtime.KVOptions{Tokens: 256}})
	if b := eng.Budgets(); b.MaxBatchTokens != 95 || b.MaxSeqs != 32 {
		t.Errorf("budgets %+v under a 64 KiB binding, want 95 tokens and 32 sequences", b)
	}
	ids, _, _ := generate(t, eng, runtime.Request{MaxTokens: 200})
	if !equal(ids, want) {
		t.Fatalf("tokens differ with split weights:\n got %v\nwant %v", ids, want)
	}
}

// TestWebGPUDeviceAcrossLoads: engines loaded one after another onto one
// device (Options.GPU) share its compiled pipelines: the second load of a
// model compiles nothing, and closing an engine leaves the device usable.
func TestWebGPUDeviceAcrossLoads(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	dev, err := webgpu.Open(webgpu.Options{})
	if errors.Is(err, webgpu.ErrNoAdapter) {
		gputest.NoDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	counter, ok := dev.(webgpu.Compiler)
	if !ok {
		t.Fatalf("%T does not count its compilations", dev)
	}
	want := goldenIDs(t)[:20]
	compiled := make([]int, 3)
	for i := range compiled {
		eng, err := runtime.Load(path, runtime.Options{Device: "webgpu", GPU: dev, Quant: "f32"})
		if err != nil {
			t.Fatal(err)
		}
		ids, _, _ := generate(t, eng, runtime.Request{MaxTokens: len(want)})
		eng.Close()
		if !equal(ids, want) {
			t.Fatalf("load %d: tokens %v, want %v", i+1, ids, want)
		}
		compiled[i] = counter.Compiled()
	}
	if compiled[0] == 0 || compiled[1] != compiled[0] || compiled[2] != compiled[0] {
		t.Errorf("pipelines compiled after each load: %v; want the first load's count, unchanged", compiled)
	}
	t.Logf("%d pipelines, compiled by the first load only", compiled[0])
}
