package lora_test

import (
	"bytes"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/safetensors"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// tinyLlama is a base small enough to write adapters of by hand.
var tinyLlama = models.Config{Arch: "llama", Dim: 8, FFN: 12, Layers: 1, Heads: 2, KVHeads: 1, HeadDim: 4, Vocab: 16,
	Context: 32, NormEps: 1e-5, RopeTheta: 10000, Rope: models.RopePairs}

func f32(t *testing.T, v []float32) []byte {
	t.Helper()
	b, err := dtype.Quantize(dtype.F32, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seq(n int, start, step float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = start + step*float32(i)
	}
	return v
}

// converterKV is the metadata llama.cpp's convert_lora_to_gguf.py writes
// (general.type through gguf-py's add_type, then the adapter keys), less
// the model card's general.* strings.
func converterKV(arch string, alpha float32) []gguf.KV {
	return []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue(arch)},
		{Key: "general.type", Value: gguf.StringValue("adapter")},
		{Key: "adapter.type", Value: gguf.StringValue("lora")},
		{Key: "adapter.lora.alpha", Value: gguf.Float32Value(alpha)},
	}
}

func writeFile(t *testing.T, kv []gguf.KV, ts []gguf.WriteTensor) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "a.gguf")
	var buf bytes.Buffer
	if err := gguf.Write(&buf, kv, ts); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOpenGGUFAsLlamaCpp: a file laid out as llama.cpp's converter lays
// it out reads as llama.cpp's loader reads it: lora_a of ggml dims [in, r]
// is A's r rows of in values, lora_b of dims [r, out] is B's out rows of
// r, the scale is alpha over r, and the norm vectors mergekit adds are
// skipped; files llama.cpp refuses are refused.
func TestOpenGGUFAsLlamaCpp(t *testing.T) {
	const r = 2
	q := models.LayerTensor(0, models.AttnQ) // [8, 8]
	k := models.LayerTensor(0, models.AttnK) // [4, 8]
	A, B := seq(r*8, -1, 0.125), seq(4*r, 0.5, -0.25)
	pair := func(name string, a, b []float32, in, out int) []gguf.WriteTensor {
		return []gguf.WriteTensor{
			{Name: name + ".lora_a", Dims: []uint64{uint64(in), r}, Type: dtype.F32, Data: f32(t, a)},
			{Name: name + ".lora_b", Dims: []uint64{r, uint64(out)}, Type: dtype.F32, Data: f32(t, b)},
		}
	}
	norm := gguf.WriteTensor{Name: "blk.0.attn_norm.weight", Dims: []uint64{8}, Type: dtype.F32, Data: f32(t, seq(8, 1, 0))}
	ts := append(pair(k, A, B, 8, 4), norm)
	path := writeFile(t, converterKV("llama", 16), ts)
	a, err := lora.Open(path, tinyLlama)
	if err != nil {
		t.Fatal(err)
	}
	got := a.Targets[k]
	if len(a.Targets) != 1 || got == nil || got.Rank != r || got.In != 8 || got.Out != 4 || got.Scale != 16.0/r ||
		!slices.Equal(got.A, A) || !slices.Equal(got.B, B) {
		t.Fatalf("read %+v", got)
	}
	// No alpha: llama.cpp applies the user's scale alone.
	if a, err := lora.Open(writeFile(t, converterKV("llama", 16)[:3], ts), tinyLlama); err != nil || a.Targets[k].Scale != 1 {
		t.Errorf("without alpha: scale %v, %v", a.Targets[k].Scale, err)
	}
	// A Mistral base is a llama to llama.cpp.
	mistral := tinyLlama
	mistral.Arch = "mistral"
	if _, err := lora.Open(path, mistral); err != nil {
		t.Errorf("a llama adapter on a mistral base: %v", err)
	}

	kv := converterKV("llama", 16)
	alora := append(slices.Clone(kv), gguf.KV{Key: "adapter.alora.invocation_tokens", Value: gguf.ArrayValue([]uint32{1, 2})})
	model := slices.Clone(kv)
	model[1].Value = gguf.StringValue("model")
	untransposed := pair(q, seq(r*8, 0, 1), seq(8*r, 0, 1), 8, 8)
	untransposed[0].Dims = []uint64{r, 8}
	// The token embeddings' lora_a is transposed: ggml dims [r, vocab],
	// a row of r values per token (llm_build_inp_embd gathers it).
	embd := []gguf.WriteTensor{
		{Name: "token_embd.weight.lora_a", Dims: []uint64{r, 16}, Type: dtype.F32, Data: f32(t, seq(16*r, 0, 1))},
		{Name: "token_embd.weight.lora_b", Dims: []uint64{r, 8}, Type: dtype.F32, Data: f32(t, seq(8*r, 0, 1))},
	}
	e, err := lora.Open(writeFile(t, converterKV("llama", 16), embd), tinyLlama)
	if err != nil {
		t.Fatal(err)
	}
	if et := e.Targets[models.TokenEmbedding]; et.Rank != r || et.In != 16 || et.Out != 8 || et.A[1] != 2 || et.A[16] != 1 || et.B[1] != 1 || et.Scale != 8 {
		t.Errorf("token embeddings read as rank %d, %d×%d, A[0][1] %g, A[1][0] %g, B[0][1] %g, scale %g; want 2, 8×16, 2, 1, 1, 8",
			et.Rank, et.Out, et.In, et.A[1], et.A[16], et.B[1], et.Scale)
	}
	embdUntransposed := slices.Clone(embd)
	embdUntransposed[0].Dims = []uint64{16, r}
	for _, tc := range []struct {
		name string
		kv   []gguf.KV
		ts   []gguf.WriteTensor
		want string
	}{
		{"a model, not an adapter", model, ts, `general.type is "model", want "adapter"`},
		{"no general.type", append(kv[:1:1], kv[2:]...), ts, `general.type is "", want "adapter"`},
		{"another architecture", converterKV("qwen3", 16), ts, `the adapter is for a "qwen3" model, the base is "llama"`},
		{"activated LoRA", alora, ts, "activated LoRA"},
		{"lora_a not transposed", kv, untransposed, "lora_a has rank 8, lora_b 2 (lora_a must be transposed"},
		{"token embeddings' lora_a not transposed", kv, embdUntransposed, "an embedding's lora_a has ggml dims [rank, vocab]"},
		{"a lone lora_b", kv, ts[1:], "has only one of lora_a and lora_b"},
		{"an infinite alpha", converterKV("llama", float32(math.Inf(1))), ts, "scale +Inf (alpha over rank) is not finite"},
		{"a NaN alpha", converterKV("llama", float32(math.NaN())), ts, "scale NaN (alpha over rank) is not finite"},
		{"another suffix", kv, []gguf.WriteTensor{{Name: q + ".lora_c", Dims: []uint64{2}, Type: dtype.F32, Data: f32(t, seq(2, 0, 1))}}, "neither a lora_a nor a lora_b"},
	} {
		_, err := lora.Open(writeFile(t, tc.kv, tc.ts), tinyLlama)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestWriteGGUFGolden: what WriteGGUF writes (what `tessera synth --lora
// --format gguf` writes) is the committed golden file byte for byte, and
// reads back as the adapter it was: the keys llama.cpp's loader checks
// with their types, lora_a transposed, every tensor f32.
func TestWriteGGUFGolden(t *testing.T) {
	q, down := models.LayerTensor(0, models.AttnQ), models.LayerTensor(0, models.FFNDown)
	a := &lora.Adapter{Alpha: 4, Targets: map[string]*lora.Target{
		q:    {Name: q, Rank: 2, In: 8, Out: 8, A: seq(2*8, -1, 0.125), B: seq(8*2, 1, -0.0625), Scale: 2},
		down: {Name: down, Rank: 2, In: 12, Out: 8, A: seq(2*12, 0.25, 0.03125), B: seq(8*2, -0.5, 0.0625), Scale: 2},
	}}
	path := filepath.Join(t.TempDir(), "a.gguf")
	if err := lora.WriteGGUF(path, a, "mistral"); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "rank2.gguf")
	if *update {
		os.WriteFile(golden, raw, 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, want) {
		t.Errorf("WriteGGUF wrote %d bytes that differ from %s (%d bytes); go test -update rewrites it", len(raw), golden, len(want))
	}
	f, err := gguf.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for key, typ := range map[string]gguf.ValueType{"general.architecture": gguf.TypeString, "general.type": gguf.TypeString,
		"adapter.type": gguf.TypeString, "adapter.lora.alpha": gguf.TypeFloat32} {
		if v, ok := f.Lookup(key); !ok || v.Type() != typ {
			t.Errorf("%s: %v of type %v, want %v", key, v, v.Type(), typ)
		}
	}
	if arch, _ := f.String("general.architecture"); arch != "llama" {
		t.Errorf("general.architecture %q for a mistral base: llama.cpp calls it llama", arch)
	}
	for _, tc := range []struct {
		name string
		dims []uint64
	}{{q + ".lora_a", []uint64{8, 2}}, {q + ".lora_b", []uint64{2, 8}}, {down + ".lora_a", []uint64{12, 2}}, {down + ".lora_b", []uint64{2, 8}}} {
		ti, ok := f.Tensor(tc.name)
		if !ok || !slices.Equal(ti.Dims, tc.dims) || ti.Type != dtype.F32 {
			t.Errorf("tensor %s: %+v, want dims %v f32", tc.name, ti, tc.dims)
		}
	}
	back, err := lora.Open(golden, tinyLlama)
	if err != nil {
		t.Fatal(err)
	}
	// ReadGGUF (a browser's Blob) reads the bytes as Open reads the file.
	read, err := lora.ReadGGUF(bytes.NewReader(want), int64(len(want)), "rank2", tinyLlama)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range a.Targets {
		for _, b := range []*lora.Adapter{back, read} {
			got := b.Targets[name]
			if got == nil || !slices.Equal(got.A, want.A) || !slices.Equal(got.B, want.B) || got.Scale != want.Scale {
				t.Errorf("%s: %s read back as %+v", b.Path, name, got)
			}
		}
	}
	cut := want[:len(want)-10]
	if _, err := lora.ReadGGUF(bytes.NewReader(cut), int64(len(cut)), "cut", tinyLlama); !errors.Is(err, lora.ErrBadAdapter) {
		t.Errorf("a truncated adapter: %v, want ErrBadAdapter", err)
	}
}

// TestOpenPEFTAsLlamaCpp: in a PEFT folder, base-layer weights and norm
// vectors (mergekit-extract-lora's) are skipped as llama.cpp's converter
// and loader skip them, and an embedding's lora_embedding_A/B are read.
func TestOpenPEFTAsLlamaCpp(t *testing.T) {
	k := models.LayerTensor(0, models.AttnK)
	a := &lora.Adapter{Alpha: 8, Targets: map[string]*lora.Target{
		k: {Name: k, Rank: 2, In: 8, Out: 4, A: seq(2*8, -1, 0.125), B: seq(4*2, 0.5, -0.25), Scale: 4},
	}}
	write := func(extra ...safetensors.WriteTensor) string {
		dir := t.TempDir()
		if err := lora.WritePEFT(dir, a, tinyLlama); err != nil {
			t.Fatal(err)
		}
		st, err := safetensors.Open(filepath.Join(dir, lora.PEFTWeights))
		if err != nil {
			t.Fatal(err)
		}
		var ts []safetensors.WriteTensor
		for _, x := range st.Tensors {
			raw, err := x.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, safetensors.WriteTensor{Name: x.Name, DType: x.DType, Shape: x.Shape, Data: raw})
		}
		st.Close()
		f, err := os.Create(filepath.Join(dir, lora.PEFTWeights))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := safetensors.Write(f, nil, append(ts, extra...)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	vec := func(name string, n int) safetensors.WriteTensor {
		return safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: []int{n}, Data: f32(t, seq(n, 1, 0))}
	}
	dir := write(vec("base_model.model.model.layers.0.input_layernorm.weight", 8), vec("base_model.model.model.norm.weight", 8),
		safetensors.WriteTensor{Name: "base_model.model.model.layers.0.self_attn.k_proj.base_layer.weight", DType: safetensors.F32, Shape: []int{4, 8}, Data: f32(t, seq(32, 0, 1))})
	got, err := lora.Open(dir, tinyLlama)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Targets) != 1 || !slices.Equal(got.Targets[k].A, a.Targets[k].A) || got.Targets[k].Scale != 4 {
		t.Errorf("read %+v", got.Targets)
	}
	// An nn.Embedding's adapter: lora_embedding_A [r, vocab] and
	// lora_embedding_B [dim, r], without ".weight"; a lone one is refused.
	embA := safetensors.WriteTensor{Name: "base_model.model.model.embed_tokens.lora_embedding_A", DType: safetensors.F32, Shape: []int{2, 16}, Data: f32(t, seq(32, 0, 1))}
	embB := safetensors.WriteTensor{Name: "base_model.model.model.embed_tokens.lora_embedding_B", DType: safetensors.F32, Shape: []int{8, 2}, Data: f32(t, seq(16, 1, 1))}
	got, err = lora.Open(write(embA, embB), tinyLlama)
	if err != nil {
		t.Fatal(err)
	}
	if et := got.Targets[models.TokenEmbedding]; et == nil || et.Rank != 2 || et.In != 16 || et.Out != 8 || !slices.Equal(et.A, seq(32, 0, 1)) || et.Scale != 4 {
		t.Errorf("the embeddings' adapter read as %+v", et)
	}
	if _, err := lora.Open(write(embA), tinyLlama); err == nil || !strings.Contains(err.Error(), "has only one of lora_A and lora_B") {
		t.Errorf("a lone lora_embedding_A: %v", err)
	}
}

// TestWriteTypes: an adapter written as F16 or BF16, in either format,
// holds tensors of that type and reads back as its values rounded to it
// (values chosen off both grids, so a writer that ignored Type would
// read back unrounded); other types are refused.
func TestWriteTypes(t *testing.T) {
	q := models.LayerTensor(0, models.AttnQ)
	target := func() *lora.Target {
		return &lora.Target{Name: q, Rank: 2, In: 8, Out: 8, A: seq(2*8, -1, 0.1), B: seq(8*2, 1, -0.07), Scale: 2}
	}
	for _, typ := range []dtype.Type{dtype.F16, dtype.BF16} {
		rounded := func(v []float32) []float32 {
			raw, err := dtype.Quantize(typ, v)
			if err != nil {
				t.Fatal(err)
			}
			out := make([]float32, len(v))
			if err := dtype.Dequantize(typ, raw, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		for _, format := range []string{"gguf", "peft"} {
			t.Run(typ.String()+"/"+format, func(t *testing.T) {
				a := &lora.Adapter{Alpha: 2, Type: typ, Targets: map[string]*lora.Target{q: target()}}
				path := filepath.Join(t.TempDir(), "a")
				var err error
				if format == "gguf" {
					path += ".gguf"
					err = lora.WriteGGUF(path, a, "llama")
				} else {
					err = lora.WritePEFT(path, a, tinyLlama)
				}
				if err != nil {
					t.Fatal(err)
				}
				if format == "gguf" {
					f, err := gguf.Open(path)
					if err != nil {
						t.Fatal(err)
					}
					ti, _ := f.Tensor(q + ".lora_a")
					f.Close()
					if ti.Type != typ {
						t.Errorf("lora_a written as %v, want %v", ti.Type, typ)
					}
				}
				back, err := lora.Open(path, tinyLlama)
				if err != nil {
					t.Fatal(err)
				}
				want, got := target(), back.Targets[q]
				if !slices.Equal(got.A, rounded(want.A)) || !slices.Equal(got.B, rounded(want.B)) {
					t.Errorf("read back A %v B %v, want %v and %v", got.A, got.B, rounded(want.A), rounded(want.B))
				}
				if slices.Equal(got.A, want.A) {
					t.Errorf("A read back unrounded")
				}
			})
		}
	}
	a := &lora.Adapter{Type: dtype.Q8_0, Targets: map[string]*lora.Target{q: target()}}
	if err := lora.WriteGGUF(filepath.Join(t.TempDir(), "a.gguf"), a, "llama"); err == nil || !strings.Contains(err.Error(), "Q8_0") {
		t.Errorf("a Q8_0 adapter: %v, want a refusal naming the type", err)
	}
}
