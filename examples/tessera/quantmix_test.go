package main

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
)

// TestPlanMixSensitivity: of matrices of one shape (64 wide, so every
// llama.cpp type is a fallback and planMix chooses), where llama.cpp puts
// attn_v in Q8_0 by name, a heavy-tailed one
// (cubed normal values, which 4 bits damage most) takes a wider type
// than Gaussian ones, the head (96 wide: 3 blocks of 32, 1 row, no
// multiple of 64) keeps at least llama.cpp's Q8_0, a 40-wide matrix (no
// whole 32-blocks) is F16, and the plan spends no more than llama.cpp's
// bytes.
func TestPlanMixSensitivity(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	matrix := func(name string, cols, rows int, heavy bool) gguf.WriteTensor {
		v := make([]float32, cols*rows)
		for i := range v {
			x := r.NormFloat64()
			if heavy {
				x = x * x * x
			}
			v[i] = float32(x)
		}
		data, err := dtype.Quantize(dtype.F32, v)
		if err != nil {
			t.Fatal(err)
		}
		return gguf.WriteTensor{Name: name, Dims: []uint64{uint64(cols), uint64(rows)}, Type: dtype.F32, Data: data}
	}
	ts := []gguf.WriteTensor{
		matrix("output.weight", 96, 1, false),
		matrix("blk.0.attn_q.weight", 64, 48, false),
		matrix("blk.0.attn_v.weight", 64, 48, false),
		matrix("blk.0.attn_output.weight", 64, 48, true),
		matrix("blk.0.ffn_up.weight", 64, 48, false),
		matrix("blk.0.ffn_down.weight", 40, 64, false),
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(f, []gguf.KV{{Key: "general.architecture", Value: gguf.StringValue("llama")}}, ts); err != nil {
		t.Fatal(err)
	}
	f.Close()
	g, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	p, err := planMix(context.Background(), g, dtype.Q4_K)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan %v: %d bytes, budget %d", p.types, p.bytes, p.budget)
	// llama.cpp: Q8_0 head (1 row of 96: 102 B) and attn_v (use_more_bits
	// of its one layer: 48 rows × 2 blocks × 34 B), Q5_0 for the other
	// three 64-wide (22 B a block), F16 for the 40-wide.
	if want := int64(102 + 48*2*34 + 3*48*2*22 + 40*64*2); p.budget != want || p.bytes > p.budget {
		t.Errorf("plan of %d bytes, budget %d (want %d)", p.bytes, p.budget, want)
	}
	bits := func(name string) float64 { return bitsPerWeight(p.types[name]) }
	heavy := bits("blk.0.attn_output.weight")
	if heavy <= bits("blk.0.attn_q.weight") || heavy <= bits("blk.0.attn_v.weight") || heavy <= bits("blk.0.ffn_up.weight") {
		t.Errorf("the heavy-tailed matrix is not the widest: %v", p.types)
	}
	if p.types["output.weight"] != dtype.Q8_0 || p.types["blk.0.ffn_down.weight"] != dtype.F16 {
		t.Errorf("head %v, 40-wide %v", p.types["output.weight"], p.types["blk.0.ffn_down.weight"])
	}
}
