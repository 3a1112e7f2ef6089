package runtime_test

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// togetherAndAlone runs prompts one at a time, then all at once, and fails
// where a sequence's greedy tokens differ, or differ from want (if given).
func togetherAndAlone(t *testing.T, eng *runtime.Engine, prompts []string, want [][]int32) [][]int32 {
	t.Helper()
	alone := make([][]int32, len(prompts))
	reqs := make([]runtime.Request, len(prompts))
	for i, p := range prompts {
		reqs[i] = runtime.Request{Prompt: p, MaxTokens: 24 + 4*i}
		alone[i], _, _ = generate(t, eng, reqs[i])
	}
	together := generateTogether(t, eng, reqs)
	for i := range prompts {
		if !equal(alone[i], together[i]) {
			t.Errorf("prompt %d:\ntogether %v\n   alone %v", i, together[i], alone[i])
		}
		if want != nil && !equal(alone[i], want[i]) {
			t.Errorf("prompt %d:\n     %v\nwant %v (default budgets)", i, alone[i], want[i])
		}
	}
	return alone
}

// TestBudgets: the budgets at one token and one sequence a step, at an odd
// pair, and at their largest (the tokens capped by the context) give every
// sequence the greedy tokens of the default budgets, alone and together,
// on the CPU and on WebGPU; Engine.Budgets reports them.
func TestBudgets(t *testing.T) {
	var want map[string][][]int32
	for _, c := range []struct {
		name      string
		b, engine runtime.Budgets
	}{
		{"default", runtime.Budgets{}, runtime.Budgets{}},
		{"one", runtime.Budgets{MaxBatchTokens: 1, MaxSeqs: 1}, runtime.Budgets{MaxBatchTokens: 1, MaxSeqs: 1}},
		{"odd", runtime.Budgets{MaxBatchTokens: 7, MaxSeqs: 3}, runtime.Budgets{MaxBatchTokens: 7, MaxSeqs: 3}},
		{"seqs only", runtime.Budgets{MaxSeqs: 2}, runtime.Budgets{}},
		{"max", runtime.Budgets{MaxBatchTokens: runtime.MaxBatchTokensLimit, MaxSeqs: runtime.MaxSeqsLimit}, runtime.Budgets{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := map[string][][]int32{}
			for dev, eng := range engines(t, runtime.Options{Budgets: c.b}) {
				b, ctx := eng.Budgets(), eng.Model().Config.Context
				wantB := c.engine
				switch {
				case c.name == "default" && dev == "cpu":
					wantB = runtime.Budgets{MaxBatchTokens: runtime.DefaultBatchTokensCPU, MaxSeqs: runtime.DefaultMaxSeqs}
				case c.name == "default":
					wantB = runtime.Budgets{MaxBatchTokens: runtime.DefaultBatchTokensGPU, MaxSeqs: runtime.DefaultMaxSeqs}
				case c.name == "seqs only" && dev == "cpu":
					wantB = runtime.Budgets{MaxBatchTokens: runtime.DefaultBatchTokensCPU, MaxSeqs: 2}
				case c.name == "seqs only":
					wantB = runtime.Budgets{MaxBatchTokens: runtime.DefaultBatchTokensGPU, MaxSeqs: 2}
				case c.name == "max":
					wantB = runtime.Budgets{MaxBatchTokens: min(runtime.MaxBatchTokensLimit, ctx), MaxSeqs: runtime.MaxSeqsLimit}
				}
				if b != wantB {
					t.Errorf("%s: budgets %+v gave an engine of %+v, want %+v", dev, c.b, b, wantB)
				}
				t.Run(dev, func(t *testing.T) { got[dev] = togetherAndAlone(t, eng, storyPrompts, want[dev]) })
			}
			if want == nil {
				want = got
			}
		})
	}
}

// TestBudgetsBlocks: a model at its file's bits (Q4_0 blocks), whose
// products take four rows at a time on an AVX-512 CPU, gives each
// sequence its own greedy tokens with the default budgets and with
// budgets that split steps into odd shares.
func TestBudgetsBlocks(t *testing.T) {
	path := q4_0Model(t, synthModel(t, "tiny", dtype.F32))
	var want [][]int32
	for _, b := range []runtime.Budgets{{}, {MaxBatchTokens: 9, MaxSeqs: 5}} {
		eng, err := runtime.Load(path, runtime.Options{Device: "cpu", Budgets: b})
		if err != nil {
			t.Fatal(err)
		}
		if mix := runtime.FormatMix(eng.WeightMix()); !strings.Contains(mix, "blocks") {
			t.Fatalf("weights kept as %s, not at the file's bits", mix)
		}
		got := togetherAndAlone(t, eng, storyPrompts, want)
		if want == nil {
			want = got
		}
		eng.Close()
	}
}

// TestBudgetsCheck: budgets out of range, or fewer tokens than sequences,
// fail the load with a clear error.
func TestBudgetsCheck(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	for _, b := range []runtime.Budgets{{MaxBatchTokens: -1}, {MaxSeqs: -2}, {MaxSeqs: runtime.MaxSeqsLimit + 1},
		{MaxBatchTokens: runtime.MaxBatchTokensLimit + 1}, {MaxBatchTokens: 4, MaxSeqs: 8}} {
		eng, err := runtime.Load(path, runtime.Options{Device: "cpu", Budgets: b})
		if err == nil {
			eng.Close()
			t.Errorf("budgets %+v: loaded", b)
			continue
		}
		t.Logf("budgets %+v: %v", b, err)
	}
}

// TestOptionsCheck: a negative context, a chain outside 0..MaxChain, or
// a negative or absurd goroutine count fails the load (an encoder
// embedder's too, and the calibration, for the goroutines) with a clear
// error, and a goroutine count in range is the CPU backend's.
func TestOptionsCheck(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	for _, c := range []struct {
		opts runtime.Options
		want string
	}{
		{runtime.Options{Threads: -1}, "threads -1"},
		{runtime.Options{Threads: runtime.MaxThreads + 1}, "threads 1025"},
		{runtime.Options{Threads: 1 << 20}, "threads 1048576"},
		{runtime.Options{Context: -5}, "context -5"},
		{runtime.Options{MultiStep: -1}, "multi-step -1"},
		{runtime.Options{MultiStep: backend.MaxChain + 1}, "multi-step 17"},
	} {
		c.opts.Device = "cpu"
		eng, err := runtime.Load(path, c.opts)
		if err == nil {
			eng.Close()
			t.Errorf("%+v: loaded", c.opts)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, which does not say %q", c.opts, err, c.want)
		}
	}
	mini := filepath.Join(t.TempDir(), "mini.gguf")
	if f, err := os.Create(mini); err != nil {
		t.Fatal(err)
	} else {
		s, _ := synth.Lookup("all-minilm-l6")
		if err := synth.Write(f, s, dtype.F32, 1); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if _, err := runtime.LoadEmbedder(mini, runtime.Options{Device: "cpu", Threads: -1}); err == nil || !strings.Contains(err.Error(), "threads -1") {
		t.Errorf("an encoder embedder at -1 threads: %v", err)
	}
	m, err := models.Open(path, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, _, err := runtime.CalibrateInt4(context.Background(), m, runtime.Calibration{Threads: -3}); err == nil || !strings.Contains(err.Error(), "threads") {
		t.Errorf("calibration at -3 threads: %v", err)
	}
	eng, err := runtime.Load(path, runtime.Options{Device: "cpu", Threads: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if got := backend.Describe(eng.Backend()).Threads; got != 3 {
		t.Errorf("3 threads asked, the backend has %d", got)
	}
}

// q4_0Model writes the f32 GGUF model at path with its matrices in Q4_0,
// as llama.cpp's quantize would (the quantize command's own path is its
// package's), and returns the new file's path.
func q4_0Model(t *testing.T, path string) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []gguf.WriteTensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.ReadTensor(ti)
		if err != nil {
			t.Fatal(err)
		}
		wt := gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: data}
		if len(ti.Dims) == 2 && ti.Type == dtype.F32 && ti.Dims[0]%32 == 0 {
			x := make([]float32, len(data)/4)
			for j := range x {
				x[j] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*j:]))
			}
			if wt.Data, err = dtype.Quantize(dtype.Q4_0, x); err != nil {
				t.Fatal(err)
			}
			wt.Type = dtype.Q4_0
		}
		ts = append(ts, wt)
	}
	out := filepath.Join(t.TempDir(), "q4_0.gguf")
	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := gguf.Write(w, f.KV, ts); err != nil {
		t.Fatal(err)
	}
	return out
}
