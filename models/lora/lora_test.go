package lora_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/lora"
)

func randomTarget(rng *rand.Rand, name string, rank, in, out int, scale float32) *lora.Target {
	t := &lora.Target{Name: name, Rank: rank, In: in, Out: out, Scale: scale, A: make([]float32, rank*in), B: make([]float32, out*rank)}
	for i := range t.A {
		t.A[i] = rng.Float32()*2 - 1
	}
	for i := range t.B {
		t.B[i] = rng.Float32()*2 - 1
	}
	return t
}

// TestCompose: the composite of several adapters adds to each weight what
// the parts add one after the other at their scales, for targets that
// some parts adapt and others not, at different ranks.
func TestCompose(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const in, out = 7, 5
	parts := []*lora.Adapter{
		{Path: "p", Targets: map[string]*lora.Target{"x": randomTarget(rng, "x", 3, in, out, 0.5), "y": randomTarget(rng, "y", 1, in, out, 2)}},
		{Path: "q", Targets: map[string]*lora.Target{"x": randomTarget(rng, "x", 2, in, out, 4)}},
		{Path: "r", Targets: map[string]*lora.Target{"y": randomTarget(rng, "y", 4, in, out, 0.25), "x": randomTarget(rng, "x", 1, in, out, 1)}},
	}
	scales := []float32{1.5, -0.5, 3}
	c, err := lora.Compose(parts, scales)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != "p+q+r" || c.Targets["x"].Rank != 6 || c.Targets["y"].Rank != 5 {
		t.Fatalf("composite %s of ranks x %d, y %d", c.Path, c.Targets["x"].Rank, c.Targets["y"].Rank)
	}
	for _, name := range []string{"x", "y"} {
		got, want := make([]float32, in*out), make([]float32, in*out)
		c.Targets[name].Delta(got, 2)
		for j, p := range parts {
			if tg := p.Targets[name]; tg != nil {
				tg.Delta(want, 2*scales[j])
			}
		}
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-5 {
				t.Fatalf("%s[%d]: %g, want %g", name, i, got[i], want[i])
			}
		}
	}
	if _, err := lora.Compose(parts, scales[:1]); err == nil {
		t.Error("composed 3 adapters with 1 scale")
	}
	bad := &lora.Adapter{Path: "s", Targets: map[string]*lora.Target{"x": randomTarget(rng, "x", 1, in+1, out, 1)}}
	if _, err := lora.Compose([]*lora.Adapter{parts[0], bad}, []float32{1, 1}); err == nil {
		t.Error("composed adapters of different shapes")
	}
}

// TestParseSpec: --lora's "[NAME=]FILE[:SCALE]".
func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		spec, name, path string
		scale            float32
		err              bool
	}{
		{"tales.gguf", "tales", "tales.gguf", 1, false},
		{"tales.gguf:0.5", "tales", "tales.gguf", 0.5, false},
		{"sql=/adapters/tales.gguf:-1.5", "sql", "/adapters/tales.gguf", -1.5, false},
		{"adapters/peft-folder/", "peft-folder", "adapters/peft-folder/", 1, false},
		{"/a/b=c/poems.gguf", "poems", "/a/b=c/poems.gguf", 1, false}, // not a name: the "=" is the path's
		{"a.gguf:v2", "a.gguf:v2", "a.gguf:v2", 1, false},
		{"=a.gguf", "=a", "=a.gguf", 1, false},
		{"x=", "", "", 0, true},
		{"", "", "", 0, true},
		{"a.gguf:1e999", "", "", 0, true},
	} {
		name, path, scale, err := lora.ParseSpec(tc.spec)
		if (err != nil) != tc.err || name != tc.name || path != tc.path || scale != tc.scale {
			t.Errorf("ParseSpec(%q) = %q, %q, %v, %v; want %q, %q, %v (error %v)", tc.spec, name, path, scale, err, tc.name, tc.path, tc.scale, tc.err)
		}
	}
}
