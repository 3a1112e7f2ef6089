package profile_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/eval"
	"github.com/tessera-llm/tessera/runtime/profile"
)

// profileDecode profiles a few decode steps of the model at path on the
// CPU.
func profileDecode(t *testing.T, path string) (profile.Report, models.Config) {
	t.Helper()
	var pb *profile.Backend
	e, err := runtime.Load(path, runtime.Options{Device: "cpu",
		Wrap: func(be backend.Backend) backend.Backend { pb = profile.New(be); return pb }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pb.On = true
	if _, err := eval.Bench(context.Background(), e, eval.BenchOptions{PromptTokens: 4, GenTokens: 4}); err != nil {
		t.Fatal(err)
	}
	if err := pb.Err(); err != nil {
		t.Fatal(err)
	}
	ops, steps := pb.Ops()
	if steps == 0 {
		t.Fatal("no decode step timed")
	}
	return profile.Summarize(ops, steps, time.Millisecond, 10), e.Model().Config
}

// TestProfileStories runs stories260K's decode through the profiler on the
// CPU and checks that every op of a layer is seen once per layer and token,
// named by what it computes, with the matrix products' bytes.
func TestProfileStories(t *testing.T) {
	r, c := profileDecode(t, "../../../shared/models/stories260K.gguf")
	layers := c.Layers
	want := map[string]int{"qkv": layers, "rope+kv+attend": layers, "o": layers, "gate+up": layers, "down": layers, "head": 1, "embed": 1}
	got := map[string]profile.Share{}
	for _, k := range r.Kinds {
		got[k.Name] = k
	}
	for name, n := range want {
		k, ok := got[name]
		switch {
		case !ok:
			t.Errorf("no %s ops in %v", name, r.Kinds)
		case k.Count != n:
			t.Errorf("%s: %d a token, want %d", name, k.Count, n)
		case name == "qkv" && k.Bytes == 0:
			t.Errorf("qkv moves no bytes")
		}
	}
	if len(r.Layers) != layers+2 || r.Layers[0].Layer != -1 || r.Layers[layers+1].Layer != layers {
		t.Errorf("layers %v, want embed, %d layers and the head", r.Layers, layers)
	}
	var b strings.Builder
	r.Print(&b)
	if !strings.Contains(b.String(), "gate+up") {
		t.Errorf("report without gate+up:\n%s", b.String())
	}
}

// TestProfileMoE: on a synthetic mixture of experts, the profiler names
// the routing and the experts' products once per layer and token, and the
// bytes the experts' products read per token are those of the k experts a
// token uses, not of all E.
func TestProfileMoE(t *testing.T) {
	s, err := synth.Lookup("tiny-qwen3moe")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "moe.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, s, dtype.F32, 3); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r, c := profileDecode(t, path)
	got := map[string]profile.Share{}
	for _, k := range r.Kinds {
		got[k.Name] = k
	}
	for _, name := range []string{"route", "moe-gateup", "moe-down", "combine"} {
		if got[name].Count != c.Layers {
			t.Errorf("%s: %d a token, want %d", name, got[name].Count, c.Layers)
		}
	}
	m := c.MoE
	expert := int64(3*m.FFN*c.Dim) * 4 // gate, up and down of one expert, f32
	rows := int64(m.Used) * 4 * int64(c.Dim+m.FFN+m.FFN+c.Dim)
	want := int64(c.Layers) * (int64(m.Used)*expert + rows)
	if b := got["moe-gateup"].Bytes + got["moe-down"].Bytes; b != want {
		t.Errorf("experts read %d bytes a token, want %d (%d of %d experts)", b, want, m.Used, m.Experts)
	}
}

// TestStepTime: the decode steps of Rows rows run unprofiled are timed
// whole (a batched decode step's time, which the bench's per-sequence
// rate cannot give), and those run while On are not.
func TestStepTime(t *testing.T) {
	pb := profile.New(nil)
	e, err := runtime.Load("../../../shared/models/stories260K.gguf", runtime.Options{Device: "cpu",
		Wrap: func(be backend.Backend) backend.Backend { pb.Backend = be; return pb }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pb.Rows = 3
	if pb.StepTime() != 0 {
		t.Fatalf("a step time %v before any step", pb.StepTime())
	}
	o := eval.BenchOptions{PromptTokens: 8, GenTokens: 8, Concurrency: 3}
	if _, err := eval.Bench(context.Background(), e, o); err != nil {
		t.Fatal(err)
	}
	step := pb.StepTime()
	if step <= 0 {
		t.Fatal("no decode step of three rows timed unprofiled")
	}
	pb.On = true
	if _, err := eval.Bench(context.Background(), e, o); err != nil {
		t.Fatal(err)
	}
	if _, steps := pb.Ops(); steps == 0 {
		t.Fatal("no decode step of three rows profiled")
	}
	if pb.StepTime() != step {
		t.Errorf("step time %v after a profiled run, %v before: profiled steps were counted", pb.StepTime(), step)
	}
}
