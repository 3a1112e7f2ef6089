package profile_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/profile"
)

// TestProfileStories runs stories260K's decode through the profiler on the
// CPU and checks that every op of a layer is seen once per layer and token,
// named by what it computes, with the matrix products' bytes.
func TestProfileStories(t *testing.T) {
	var pb *profile.Backend
	e, err := runtime.Load("../../../shared/models/stories260K.gguf", runtime.Options{Device: "cpu",
		Wrap: func(be backend.Backend) backend.Backend { pb = profile.New(be); return pb }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	pb.On = true
	if _, err := runtime.Bench(context.Background(), e, runtime.BenchOptions{PromptTokens: 4, GenTokens: 4}); err != nil {
		t.Fatal(err)
	}
	if err := pb.Err(); err != nil {
		t.Fatal(err)
	}
	ops, steps := pb.Ops()
	if steps == 0 {
		t.Fatal("no decode step timed")
	}
	layers := e.Model().Config.Layers
	r := profile.Summarize(ops, steps, time.Millisecond, 10)
	want := map[string]int{"qkv": layers, "rope+kv": layers, "attend": layers, "o": layers, "gate+up": layers, "down": layers, "head": 1, "embed": 1}
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
