package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
)

// writeEveryBlockType writes a synthetic Llama whose matrices' rows are
// an even number of K-quant super-blocks (512 and 1024 wide: no type's
// layout pads them), its matrices in the GGUF block types in turn (every
// one of dtype.BlockTypes), and returns the bytes of its tensors.
func writeEveryBlockType(t *testing.T, path string) int64 {
	t.Helper()
	s := synth.Shape{Name: "every-type", Config: models.Config{Arch: "llama", Dim: 512, FFN: 1024, Layers: 2, Heads: 8, KVHeads: 4,
		HeadDim: 64, Vocab: 300, Context: 256, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 64}}
	src := filepath.Join(t.TempDir(), "f32.gguf")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, s, dtype.F32, 9); err != nil {
		t.Fatal(err)
	}
	f.Close()
	in, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var ts []gguf.WriteTensor
	var bytes int64
	used := map[dtype.Type]bool{}
	types := map[string]dtype.Type{} // by matrix, the gate's for the up
	for i := range in.Tensors {
		ti := &in.Tensors[i]
		wt := gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type}
		if wt.Data, err = in.ReadTensor(ti); err != nil {
			t.Fatal(err)
		}
		if len(ti.Dims) == 2 {
			vals, err := in.ReadFloat32(ti)
			if err != nil {
				t.Fatal(err)
			}
			// A layer's gate and up share a type, as in llama.cpp's files
			// (the engine fuses them into one weight, whose rows alternate).
			unit := strings.Replace(ti.Name, "."+models.FFNUp+".", "."+models.FFNGate+".", 1)
			typ, ok := types[unit]
			if !ok {
				typ = dtype.BlockTypes[len(types)%len(dtype.BlockTypes)]
				types[unit] = typ
			}
			wt.Type = typ
			used[typ] = true
			if wt.Data, err = dtype.Quantize(wt.Type, vals); err != nil {
				t.Fatal(err)
			}
		}
		bytes += int64(len(wt.Data))
		ts = append(ts, wt)
	}
	if len(used) != len(dtype.BlockTypes) {
		t.Fatalf("%d of the %d block types used", len(used), len(dtype.BlockTypes))
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := gguf.Write(out, in.KV, ts); err != nil {
		t.Fatal(err)
	}
	return bytes
}
