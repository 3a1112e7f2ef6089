package runtime_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/eval"
	"github.com/tessera-llm/tessera/runtime/gpu"
)

// loraBase is a base model for the LoRA tests: stories260K (a converted
// llama2.c model, GGUF's pairs RoPE layout, tied head) or a synthetic shape.
func loraBase(t *testing.T, name string) (string, models.Config) {
	t.Helper()
	path := ""
	if name == "stories260K" {
		path = sharedFile(t, "stories260K.gguf")
	} else {
		path = synthModel(t, name, dtype.F32)
	}
	m, err := models.Open(path, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	return path, m.Config
}

// writeAdapter draws a random adapter for c and writes it in both forms:
// a GGUF LoRA file and a PEFT folder, its tensors in f32.
func writeAdapter(t *testing.T, c models.Config, rank int, targets []string, seed uint64) (ggufPath, peftDir string) {
	return writeAdapterAs(t, c, rank, targets, seed, dtype.F32)
}

// writeAdapterAs is writeAdapter with tensors of type typ.
func writeAdapterAs(t *testing.T, c models.Config, rank int, targets []string, seed uint64, typ dtype.Type) (ggufPath, peftDir string) {
	t.Helper()
	a, err := synth.LoRA(c, rank, targets, seed)
	if err != nil {
		t.Fatal(err)
	}
	a.Type = typ
	dir := t.TempDir()
	ggufPath, peftDir = filepath.Join(dir, "adapter.gguf"), filepath.Join(dir, "peft")
	if err := lora.WriteGGUF(ggufPath, a, c.Arch); err != nil {
		t.Fatal(err)
	}
	if err := lora.WritePEFT(peftDir, a, c); err != nil {
		t.Fatal(err)
	}
	return ggufPath, peftDir
}

func loadDevice(t *testing.T, device, path string, opts runtime.Options) *runtime.Engine {
	t.Helper()
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

// scoreLogits returns the logits after each of tokens[:len-1].
func scoreLogits(t *testing.T, e *runtime.Engine, tokens []int32, refs []runtime.AdapterRef) []float32 {
	t.Helper()
	var all []float32
	if err := e.ScoreAdapters(context.Background(), tokens, refs, func(_ int, l []float32) error {
		all = append(all, l...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return all
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestLoRAUnmergedMatchesMerged: an adapter applied unmerged (two small
// products per projection, gathered per row) computes what the same
// adapter merged into the weights computes: logits within 1e-4 and the
// same greedy tokens, on both backends, at ranks 1, 8 and 64; on WebGPU
// also with a GPU's composition (the norms as the products' prologue,
// which the shrinks then apply themselves), which lavapipe, a CPU
// adapter, does not take by itself; and with adapters stored in F16,
// which both backends keep in halves.
func TestLoRAUnmergedMatchesMerged(t *testing.T) {
	for _, tc := range []struct {
		base, device string
		rank         int
		targets      []string
		prologue     bool
		typ          dtype.Type
	}{
		{"stories260K", "cpu", 8, nil, false, 0},
		{"stories260K", "cpu", 1, []string{"q", "v"}, false, 0},
		{"stories260K", "webgpu", 8, nil, false, 0},
		{"stories260K", "webgpu", 8, nil, true, 0},
		{"tiny-qwen3", "cpu", 8, nil, false, 0},
		{"tiny-qwen3", "cpu", 64, []string{"o", "down"}, false, 0},
		{"tiny-qwen3", "webgpu", 64, nil, false, 0},
		{"tiny-qwen3", "webgpu", 64, nil, true, 0},
		{"tiny", "cpu", 8, []string{"q", "k", "v", "o", "gate", "up", "down", "head"}, false, 0}, // untied head
		{"tiny", "webgpu", 1, []string{"k", "up", "head"}, false, 0},
		{"tiny", "webgpu", 8, []string{"q", "k", "v", "o", "gate", "up", "down", "head"}, true, 0},
		{"stories260K", "cpu", 8, nil, false, dtype.F16},
		{"tiny-qwen3", "cpu", 64, nil, false, dtype.F16},
		{"tiny-qwen3", "webgpu", 8, nil, false, dtype.F16},
		// Token-embedding adapters: a gather and an expand after the lookup.
		{"stories260K", "cpu", 8, []string{"embed"}, false, 0},
		{"stories260K", "webgpu", 8, []string{"embed", "q", "down"}, false, 0},
		{"tiny", "cpu", 4, []string{"embed", "head"}, false, dtype.F16},
		{"tiny", "webgpu", 64, []string{"embed"}, true, dtype.F16},
		// Gemma: post-norms after the adapted projections, a scaled
		// embedding, a tied head.
		{"tiny-gemma2", "cpu", 8, nil, false, 0},
		{"tiny-gemma3", "webgpu", 8, nil, false, 0},
		{"tiny-gemma3", "webgpu", 8, nil, true, 0},
	} {
		name := tc.base + "/" + tc.device + "/r" + itoa(tc.rank)
		if slices.Contains(tc.targets, "embed") {
			name += "/embed"
		}
		if tc.typ != dtype.F32 {
			name += "/" + tc.typ.String()
		}
		var wrap func(backend.Backend) backend.Backend
		if tc.prologue {
			name += "/prologue"
			wrap = withPlan(gpu.Plan{NormPrologue: "on"})
		}
		t.Run(name, func(t *testing.T) {
			path, c := loraBase(t, tc.base)
			ad, _ := writeAdapterAs(t, c, tc.rank, tc.targets, 3, tc.typ)
			spec := []runtime.AdapterSpec{{Name: "a", Path: ad}}
			un := loadDevice(t, tc.device, path, runtime.Options{Adapters: spec, Wrap: wrap})
			merged := loadDevice(t, tc.device, path, runtime.Options{Adapters: spec, LoRAMerge: true, Wrap: wrap})
			refs := []runtime.AdapterRef{{Name: "a"}}
			prompt, err := un.PromptTokens(runtime.Request{Prompt: "Once upon a time, there was a little"})
			if err != nil {
				t.Fatal(err)
			}
			got, want := scoreLogits(t, un, prompt, refs), scoreLogits(t, merged, prompt, nil)
			base := scoreLogits(t, un, prompt, nil)
			if d := maxDiff(got, want); d > 1e-4 {
				t.Errorf("unmerged logits differ from merged by %g", d)
			}
			if d := maxDiff(base, want); d < 1e-2 {
				t.Errorf("the adapter hardly changes the logits (%g): the test proves nothing", d)
			}
			req := runtime.Request{Prompt: "Once upon a time", MaxTokens: 40, IgnoreEOS: true}
			wantIDs, _, _ := generate(t, merged, req)
			req.Adapters = refs
			gotIDs, _, _ := generate(t, un, req)
			if !equal(gotIDs, wantIDs) {
				t.Errorf("greedy tokens:\nunmerged %v\n  merged %v", gotIDs, wantIDs)
			}
		})
	}
}

// withPlan is an Options.Wrap that gives a WebGPU backend plan (and
// leaves the CPU's alone): a composition lavapipe does not choose itself.
func withPlan(plan gpu.Plan) func(backend.Backend) backend.Backend {
	return func(be backend.Backend) backend.Backend {
		if g, ok := be.(*gpu.Backend); ok {
			g.SetPlan(plan)
		}
		return be
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestLoRAMixedBatch: six sequences, three with different adapters, one
// at a doubled scale and two with none, decode in one batch and each gets
// the tokens it gets alone.
func TestLoRAMixedBatch(t *testing.T) {
	for _, tc := range []struct{ base, device string }{{"stories260K", "cpu"}, {"stories260K", "webgpu"}, {"tiny-qwen3", "cpu"}, {"tiny-qwen3", "webgpu"}} {
		t.Run(tc.base+"/"+tc.device, func(t *testing.T) {
			path, c := loraBase(t, tc.base)
			var specs []runtime.AdapterSpec
			for i, r := range []int{1, 8, 64} {
				p, _ := writeAdapter(t, c, r, nil, uint64(10+i))
				specs = append(specs, runtime.AdapterSpec{Name: "ad" + itoa(i), Path: p})
			}
			e := loadDevice(t, tc.device, path, runtime.Options{Adapters: specs})
			refs := [][]runtime.AdapterRef{{{Name: "ad0"}}, {{Name: "ad1"}}, nil, {{Name: "ad2"}}, {{Name: "ad1", Scale: 2}}, nil}
			reqs := make([]runtime.Request, len(refs))
			solo := make([][]int32, len(refs))
			for i := range reqs {
				reqs[i] = runtime.Request{Prompt: "Once upon a time", MaxTokens: 24 + 3*i, IgnoreEOS: true, Adapters: refs[i]}
				solo[i], _, _ = generate(t, e, reqs[i])
			}
			if equal(solo[0], solo[2]) || equal(solo[1], solo[4]) {
				t.Fatal("adapters do not change the tokens: the test proves nothing")
			}
			got := generateTogether(t, e, reqs)
			for i := range reqs {
				if !equal(got[i], solo[i]) {
					t.Errorf("sequence %d (%v): batched %v, alone %v", i, refs[i], got[i], solo[i])
				}
			}
		})
	}
}

// TestLoRAFormats: the GGUF and PEFT forms of one adapter give the same
// tokens (PEFT's q and k rows come in Hugging Face's halves layout, which a
// pairs-layout base reorders; the token embeddings' A is transposed in the
// GGUF and lora_embedding_A in PEFT).
func TestLoRAFormats(t *testing.T) {
	for _, base := range []string{"stories260K", "tiny-qwen3"} {
		t.Run(base, func(t *testing.T) {
			path, c := loraBase(t, base)
			g, p := writeAdapter(t, c, 8, []string{"embed", "q", "k", "v", "o", "gate", "up", "down"}, 5)
			e := loadDevice(t, "cpu", path, runtime.Options{Adapters: []runtime.AdapterSpec{{Name: "g", Path: g}, {Name: "p", Path: p}}})
			req := runtime.Request{Prompt: "Once upon a time", MaxTokens: 40, IgnoreEOS: true}
			req.Adapters = []runtime.AdapterRef{{Name: "g"}}
			a, _, _ := generate(t, e, req)
			req.Adapters = []runtime.AdapterRef{{Name: "p"}}
			b, _, _ := generate(t, e, req)
			if !equal(a, b) {
				t.Errorf("gguf %v\npeft %v", a, b)
			}
			info := e.Adapters()
			if len(info) != 2 || info[0].Format != "gguf" || info[1].Format != "peft" || info[0].Rank != 8 {
				t.Errorf("adapters %+v", info)
			}
		})
	}
}

// TestLoRABadAdapters: adapters that do not fit the base, or are broken,
// are refused with an error that says why.
func TestLoRABadAdapters(t *testing.T) {
	path, c := loraBase(t, "stories260K")
	_, qc := loraBase(t, "tiny-qwen3")
	wrong, wrongPEFT := writeAdapter(t, qc, 4, nil, 1)
	good, goodPEFT := writeAdapter(t, c, 4, nil, 1)
	wc := c // the same architecture, twice as wide
	wc.Dim, wc.FFN, wc.HeadDim = 2*c.Dim, 2*c.FFN, 2*c.HeadDim
	wide, _ := writeAdapter(t, wc, 4, []string{"k"}, 1)
	dir := t.TempDir()
	raw, _ := os.ReadFile(good)
	corrupt := filepath.Join(dir, "corrupt.gguf")
	os.WriteFile(corrupt, raw[:len(raw)/2], 0o644)
	// A GGUF with the A of one target and not its B.
	a, _ := synth.LoRA(c, 4, []string{"q"}, 1)
	half := filepath.Join(dir, "half.gguf")
	if err := lora.WriteGGUF(half, a, c.Arch); err != nil {
		t.Fatal(err)
	}
	dropLoRAB(t, half)
	noConfig := filepath.Join(dir, "noconfig")
	os.CopyFS(noConfig, os.DirFS(goodPEFT))
	os.Remove(filepath.Join(noConfig, lora.PEFTConfig))
	e := loadDevice(t, "cpu", path, runtime.Options{})
	for _, tc := range []struct {
		name, path, want string
	}{
		{"wrong architecture", wrong, `the adapter is for a "qwen3" model, the base is "llama"`},
		{"wrong shape", wide, "tensor blk.0.attn_k.weight adapts a 64×128 matrix but the base model's is 32×64"},
		{"wrong shape peft", wrongPEFT, "but the base model's is"},
		{"missing tensor", half, "has only one of lora_a and lora_b"},
		{"corrupt", corrupt, "bad LoRA adapter"},
		{"no config", noConfig, "needs adapter_config.json"},
		{"missing file", filepath.Join(dir, "nothing.gguf"), "no such file"},
	} {
		err := e.LoadAdapter(tc.name, tc.path, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := runtime.Load(path, runtime.Options{Device: "cpu", Adapters: []runtime.AdapterSpec{{Path: wrong}}}); err == nil {
		t.Error("Load took an adapter of another model")
	}
	if err := e.LoadAdapter("ok", good, 1); err != nil {
		t.Fatal(err)
	}
	_, err := e.Start(context.Background(), runtime.Request{Prompt: "a", MaxTokens: 2, Adapters: []runtime.AdapterRef{{Name: "nope"}}})
	if !errors.Is(err, runtime.ErrUnknownAdapter) {
		t.Errorf("an unknown adapter: %v", err)
	}
}

// dropLoRAB rewrites a GGUF adapter with its lora_a tensors only.
func dropLoRAB(t *testing.T, path string) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []gguf.WriteTensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if strings.HasSuffix(ti.Name, ".lora_a") {
			data, err := f.ReadTensor(ti)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: data})
		}
	}
	out, err := os.Create(path + ".tmp")
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(out, f.KV, ts); err != nil {
		t.Fatal(err)
	}
	out.Close()
	os.Rename(path+".tmp", path)
}

// TestLoRAUnloadWhileRunning: unloading an adapter that a running sequence
// uses refuses new requests at once and frees it when the sequence ends;
// the sequence keeps its tokens.
func TestLoRAUnloadWhileRunning(t *testing.T) {
	path, c := loraBase(t, "stories260K")
	p, _ := writeAdapter(t, c, 8, nil, 2)
	e := loadDevice(t, "cpu", path, runtime.Options{})
	if err := e.LoadAdapter("x", p, 1); err != nil {
		t.Fatal(err)
	}
	// Long enough that the sequence is still running when the reader
	// unloads at its third token: a run of 60 could end before that on a
	// loaded machine (the engine does not wait for the reader).
	req := runtime.Request{Prompt: "Once upon a time", MaxTokens: 400, IgnoreEOS: true, Adapters: []runtime.AdapterRef{{Name: "x"}}}
	want, _, _ := generate(t, e, req)
	st, err := e.Start(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var got []int32
	n := 0
	for tok, err := range st.Tokens() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, tok.ID)
		if n++; n == 3 {
			if err := e.UnloadAdapter("x"); err != nil {
				t.Fatal(err)
			}
			if info := e.Adapters(); len(info) != 1 || !info[0].Unloading {
				t.Errorf("while running: %+v", info)
			}
			if _, err := e.Start(context.Background(), req); !errors.Is(err, runtime.ErrUnknownAdapter) {
				t.Errorf("a request for an adapter being unloaded: %v", err)
			}
		}
	}
	if !equal(got, want) {
		t.Errorf("tokens after the unload: %v, want %v", got, want)
	}
	if info := e.Adapters(); len(info) != 0 {
		t.Errorf("after the sequence: %+v", info)
	}
	// The slot is free and the base model is back.
	if err := e.LoadAdapter("x", p, 1); err != nil {
		t.Fatal(err)
	}
}

// TestLoRASeveralAdapters: a request naming two adapters with scales runs
// with both, y = x·W + Σ s_j·(x·A_j)·B_j, which is both merged into the
// weights (logits within 1e-4, the same greedy tokens), beside sequences
// of one adapter and of none in the same batch; the composite is freed
// with its last sequence, and its parts stay loaded.
func TestLoRASeveralAdapters(t *testing.T) {
	for _, tc := range []struct{ base, device string }{{"stories260K", "cpu"}, {"stories260K", "webgpu"}, {"tiny-qwen3", "cpu"}, {"tiny-qwen3", "webgpu"}} {
		t.Run(tc.base+"/"+tc.device, func(t *testing.T) {
			path, c := loraBase(t, tc.base)
			p0, _ := writeAdapter(t, c, 8, nil, 21)
			p1, _ := writeAdapter(t, c, 4, []string{"q", "v", "down"}, 22)
			specs := []runtime.AdapterSpec{{Name: "a", Path: p0, Scale: 0.5}, {Name: "b", Path: p1, Scale: 1.5}}
			un := loadDevice(t, tc.device, path, runtime.Options{Adapters: specs})
			mem := un.Backend().Stats().Memory
			// Merged at the request's scales: a's 0.5·0.6 and b's 1.5·2.
			mergedSpecs := []runtime.AdapterSpec{{Path: p0, Scale: 0.5 * 0.6}, {Path: p1, Scale: 1.5 * 2}}
			merged := loadDevice(t, tc.device, path, runtime.Options{Adapters: mergedSpecs, LoRAMerge: true})
			refs := []runtime.AdapterRef{{Name: "a", Scale: 0.6}, {Name: "b", Scale: 2}}
			prompt, err := un.PromptTokens(runtime.Request{Prompt: "Once upon a time, there was a little"})
			if err != nil {
				t.Fatal(err)
			}
			got, want := scoreLogits(t, un, prompt, refs), scoreLogits(t, merged, prompt, nil)
			if d := maxDiff(got, want); d > 1e-4 {
				t.Errorf("two adapters unmerged differ from both merged by %g", d)
			}
			if d := maxDiff(got, scoreLogits(t, un, prompt, refs[:1])); d < 1e-2 {
				t.Errorf("the second adapter hardly changes the logits (%g): the test proves nothing", d)
			}

			reqs := []runtime.Request{
				{Adapters: refs},
				{Adapters: refs[:1]},
				{},
				{Adapters: []runtime.AdapterRef{refs[1], refs[0]}}, // the same sum in the other order
				{Adapters: refs[1:]},
			}
			want0, _, _ := generate(t, merged, runtime.Request{Prompt: "Once upon a time", MaxTokens: 32, IgnoreEOS: true})
			solo := make([][]int32, len(reqs))
			for i := range reqs {
				reqs[i].Prompt, reqs[i].MaxTokens, reqs[i].IgnoreEOS = "Once upon a time", 32, true
				solo[i], _, _ = generate(t, un, reqs[i])
			}
			if !equal(solo[0], want0) {
				t.Errorf("greedy tokens:\nunmerged %v\n  merged %v", solo[0], want0)
			}
			got2 := make([][]int32, len(reqs))
			var wg sync.WaitGroup
			for i := range reqs {
				wg.Go(func() { got2[i], _, _ = generate(t, un, reqs[i]) })
			}
			wg.Wait()
			for i := range reqs {
				if !equal(got2[i], solo[i]) {
					t.Errorf("sequence %d (%v): batched %v, alone %v", i, reqs[i].Adapters, got2[i], solo[i])
				}
			}
			if info := un.Adapters(); len(info) != 2 || info[0].Running+info[1].Running+info[0].Waiting+info[1].Waiting != 0 {
				t.Errorf("after the requests: %+v", info)
			}
			// The next step drops the composites' weights (the CPU backend
			// counts adapter memory exactly; WebGPU keeps its buffers).
			generate(t, un, runtime.Request{Prompt: "a", MaxTokens: 1})
			if got := un.Backend().Stats().Memory; tc.device == "cpu" && got != mem {
				t.Errorf("backend memory %d after the composites are gone, %d before them", got, mem)
			}
			if _, err := un.Start(context.Background(), runtime.Request{Prompt: "a", MaxTokens: 2, Adapters: []runtime.AdapterRef{{Name: "a"}, {Name: "nope"}}}); !errors.Is(err, runtime.ErrUnknownAdapter) {
				t.Errorf("an unknown second adapter: %v", err)
			}
		})
	}
}

// TestLoRACombinationsBounded: at most MaxCombinations combinations of
// several adapters run at once; one more is refused with
// ErrTooManyCombinations (one already running is shared, and a single
// adapter at any scale needs no combination), and passes once one ends.
func TestLoRACombinationsBounded(t *testing.T) {
	path, c := loraBase(t, "stories260K")
	p0, _ := writeAdapter(t, c, 4, nil, 31)
	p1, _ := writeAdapter(t, c, 4, []string{"q"}, 32)
	eng := loadDevice(t, "cpu", path, runtime.Options{Adapters: []runtime.AdapterSpec{{Name: "a", Path: p0}, {Name: "b", Path: p1}}})
	pair := func(i int) []runtime.AdapterRef {
		return []runtime.AdapterRef{{Name: "a", Scale: 1 + float32(i)/16}, {Name: "b"}}
	}
	start := func(refs []runtime.AdapterRef) (*runtime.Stream, error) {
		return eng.Start(context.Background(), runtime.Request{Prompt: "Once", MaxTokens: 400, IgnoreEOS: true, Adapters: refs})
	}
	var running []*runtime.Stream
	defer func() {
		for _, st := range running {
			st.Cancel()
		}
	}()
	for i := range runtime.MaxCombinations {
		st, err := start(pair(i))
		if err != nil {
			t.Fatalf("combination %d: %v", i, err)
		}
		running = append(running, st)
	}
	if _, err := start(pair(runtime.MaxCombinations)); !errors.Is(err, runtime.ErrTooManyCombinations) {
		t.Fatalf("combination %d: %v, want ErrTooManyCombinations", runtime.MaxCombinations, err)
	}
	for _, refs := range [][]runtime.AdapterRef{pair(0), {{Name: "a", Scale: 3}}} {
		st, err := start(refs)
		if err != nil {
			t.Fatalf("%v beside the full set: %v", refs, err)
		}
		running = append(running, st)
	}
	running[1].Cancel()
	<-running[1].Done()
	st, err := start(pair(runtime.MaxCombinations))
	if err != nil {
		t.Fatalf("a new combination once one ended: %v", err)
	}
	running = append(running, st)
}

// adapterSteps counts the batches begun with a row that runs an adapter.
type adapterSteps struct {
	backend.Backend
	n *atomic.Int32
}

func (a adapterSteps) Begin(b backend.Batch) error {
	if b.HasAdapters() {
		a.n.Add(1)
	}
	return a.Backend.Begin(b)
}

// TestBenchAdapters: Bench with Adapters runs its sequences with them (one
// each, in turn) and says so; without, no step runs an adapter.
func TestBenchAdapters(t *testing.T) {
	path, c := loraBase(t, "stories260K")
	a0, _ := writeAdapter(t, c, 4, nil, 1)
	a1, _ := writeAdapter(t, c, 4, nil, 2)
	var steps atomic.Int32
	e := loadDevice(t, "cpu", path, runtime.Options{
		Adapters: []runtime.AdapterSpec{{Name: "a0", Path: a0}, {Name: "a1", Path: a1}},
		Wrap:     func(be backend.Backend) backend.Backend { return adapterSteps{be, &steps} },
	})
	for _, conc := range []int{1, 3} {
		steps.Store(0)
		r, err := eval.Bench(context.Background(), e, eval.BenchOptions{PromptTokens: 8, GenTokens: 8, Concurrency: conc})
		if err != nil {
			t.Fatal(err)
		}
		if n := steps.Load(); n != 0 || r.Adapters != nil {
			t.Errorf("concurrency %d without adapters: %d steps ran one, result names %v", conc, n, r.Adapters)
		}
		refs := []runtime.AdapterRef{{Name: "a0"}, {Name: "a1"}}
		r, err = eval.Bench(context.Background(), e, eval.BenchOptions{PromptTokens: 8, GenTokens: 8, Concurrency: conc, Adapters: refs})
		if err != nil {
			t.Fatal(err)
		}
		if n := steps.Load(); n < 8 || !slices.Equal(r.Adapters, []string{"a0", "a1"}) {
			t.Errorf("concurrency %d with adapters: %d steps ran one, result names %v", conc, n, r.Adapters)
		}
	}
	if _, err := eval.Bench(context.Background(), e, eval.BenchOptions{PromptTokens: 8, GenTokens: 8, Adapters: []runtime.AdapterRef{{Name: "none"}}}); err == nil {
		t.Error("Bench with an adapter that is not loaded: no error")
	}
}

// TestLoRASpeculative: speculative decoding verifies drafted tokens with
// the sequence's adapter on every verified row (here the token
// embeddings' too): the tokens are those of plain decoding.
func TestLoRASpeculative(t *testing.T) {
	path, c := loraBase(t, "stories260K")
	ad, _ := writeAdapter(t, c, 8, []string{"embed", "q", "down"}, 3)
	spec := []runtime.AdapterSpec{{Name: "a", Path: ad}}
	for _, dev := range []string{"cpu", "webgpu"} {
		t.Run(dev, func(t *testing.T) {
			plain := loadDevice(t, dev, path, runtime.Options{Adapters: spec})
			fast := loadDevice(t, dev, path, runtime.Options{Adapters: spec, Draft: "ngram", SpeculateAlways: true, Context: 512})
			req := runtime.Request{Prompt: "Once upon a time, there was a little girl. Once upon a time", MaxTokens: 60, IgnoreEOS: true,
				Adapters: []runtime.AdapterRef{{Name: "a", Scale: 0.7}}}
			want, _, _ := generate(t, plain, req)
			got, _, st := generate(t, fast, req)
			if !equal(got, want) || st.Drafted == 0 {
				t.Errorf("speculative (%d drafted, %d accepted) %v\nplain %v", st.Drafted, st.Accepted, got, want)
			}
		})
	}
}
