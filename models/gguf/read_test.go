package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

func openStories(t *testing.T) *File {
	t.Helper()
	f, err := Open(storiesGGUF)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestReadStories(t *testing.T) {
	f := openStories(t)
	if f.Version != 3 || len(f.Tensors) != 48 || len(f.KV) != 19 {
		t.Fatalf("version %d, %d tensors, %d keys; want 3, 48, 19", f.Version, len(f.Tensors), len(f.KV))
	}
	if f.Alignment != 32 || f.DataOffset%32 != 0 {
		t.Errorf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}

	strs := []struct{ key, want string }{
		{"general.architecture", "llama"},
		{"tokenizer.ggml.model", "llama"},
	}
	for _, tt := range strs {
		if got, ok := f.String(tt.key); !ok || got != tt.want {
			t.Errorf("String(%q) = %q, %v; want %q", tt.key, got, ok, tt.want)
		}
	}
	uints := []struct {
		key  string
		want uint64
	}{
		{"llama.embedding_length", 64},
		{"llama.feed_forward_length", 172},
		{"llama.block_count", 5},
		{"llama.attention.head_count", 8},
		{"llama.attention.head_count_kv", 4},
		{"llama.rope.dimension_count", 8},
		{"llama.context_length", 2048},
		{"tokenizer.ggml.bos_token_id", 1},
		{"tokenizer.ggml.eos_token_id", 2},
		{"tokenizer.ggml.unknown_token_id", 0},
	}
	for _, tt := range uints {
		if got, ok := f.Uint(tt.key); !ok || got != tt.want {
			t.Errorf("Uint(%q) = %d, %v; want %d", tt.key, got, ok, tt.want)
		}
	}
	if eps, ok := f.Float("llama.attention.layer_norm_rms_epsilon"); !ok || float32(eps) != 1e-5 {
		t.Errorf("rms epsilon = %v, %v", eps, ok)
	}

	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) != 512 || tokens[0] != "<unk>" || tokens[1] != "<s>" || tokens[2] != "</s>" {
		t.Errorf("tokens: %d entries, ok=%v, first %q", len(tokens), ok, tokens[:min(3, len(tokens))])
	}
	if scores, ok := f.Float32s("tokenizer.ggml.scores"); !ok || len(scores) != 512 {
		t.Errorf("scores: %d entries, ok=%v", len(scores), ok)
	}
	if types, ok := f.Int32s("tokenizer.ggml.token_type"); !ok || len(types) != 512 || types[0] != 2 {
		t.Errorf("token types: %d entries, ok=%v", len(types), ok)
	}

	tensors := []struct {
		name string
		dims []uint64
	}{
		{"token_embd.weight", []uint64{64, 512}},
		{"output.weight", []uint64{64, 512}},
		{"output_norm.weight", []uint64{64}},
		{"blk.0.attn_k.weight", []uint64{64, 32}},
		{"blk.4.ffn_down.weight", []uint64{172, 64}},
	}
	for _, tt := range tensors {
		ti, ok := f.Tensor(tt.name)
		if !ok || !slices.Equal(ti.Dims, tt.dims) || ti.Type != dtype.F32 || ti.Size != 4*ti.Elements() {
			t.Errorf("Tensor(%q) = %+v, %v; want dims %v F32", tt.name, ti, ok, tt.dims)
		}
	}
	if _, ok := f.Tensor("no.such.tensor"); ok {
		t.Error("Tensor found a tensor that does not exist")
	}
}

// TestReadStoriesData checks tensor data against the same weights in the
// llama2.c checkpoint, whose token embedding table follows a 28-byte
// header, and checks the tied output matrix.
func TestReadStoriesData(t *testing.T) {
	f := openStories(t)
	emb, _ := f.Tensor("token_embd.weight")
	got, err := f.ReadFloat32(emb)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(storiesBin)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 64*512)
	if err := binary.Read(bytes.NewReader(bin[28:]), binary.LittleEndian, want); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatal("token_embd.weight differs from the llama2.c checkpoint's embedding table")
	}
	out, _ := f.Tensor("output.weight")
	tied, err := f.ReadFloat32(out)
	if err != nil || !slices.Equal(tied, got) {
		t.Fatalf("output.weight differs from token_embd.weight (err %v)", err)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		x, err := f.ReadFloat32(ti)
		if err != nil {
			t.Fatalf("%s: %v", ti.Name, err)
		}
		for _, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: non-finite weight %v", ti.Name, v)
			}
		}
		rawBytes := make([]byte, ti.Size)
		if _, err := f.TensorReader(ti).ReadAt(rawBytes, 0); err != nil {
			t.Fatalf("%s: TensorReader: %v", ti.Name, err)
		}
		if viaRead, _ := f.ReadTensor(ti); !bytes.Equal(viaRead, rawBytes) {
			t.Fatalf("%s: ReadTensor and TensorReader disagree", ti.Name)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open("testdata/does-not-exist.gguf"); err == nil {
		t.Error("Open of a missing file succeeded")
	}
	// A file that is not GGUF: the error names the path and the problem.
	_, err := Open(storiesBin)
	if err == nil || !strings.Contains(err.Error(), "stories260K.bin") || !strings.Contains(err.Error(), "magic") {
		t.Errorf("Open(llama2.c checkpoint) = %v", err)
	}
}

func TestReadVersions(t *testing.T) {
	good := sampleFile(t)
	tests := []struct {
		version uint32
		wantErr string
	}{
		{2, ""},
		{3, ""},
		{1, "version 1 is not supported"},
		{4, "unsupported GGUF version 4"},
		{0x03000000, "big-endian"},
	}
	for _, tt := range tests {
		b := slices.Clone(good)
		binary.LittleEndian.PutUint32(b[4:], tt.version)
		_, err := Read(bytes.NewReader(b), int64(len(b)))
		if tt.wantErr == "" && err != nil {
			t.Errorf("version %d: %v", tt.version, err)
		}
		if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("version %#x: error %v, want %q", tt.version, err, tt.wantErr)
		}
	}
}

// TestTensorChecks feeds the data readers TensorInfos that did not come
// from the file: they must be refused, not read out of bounds.
func TestTensorChecks(t *testing.T) {
	f := openStories(t)
	tests := map[string]TensorInfo{
		"past the end":   {Name: "x", Dims: []uint64{64}, Type: dtype.F32, Offset: 1 << 40, Size: 256},
		"size mismatch":  {Name: "x", Dims: []uint64{64}, Type: dtype.F32, Offset: 0, Size: 1 << 40},
		"overflow":       {Name: "x", Dims: []uint64{1 << 62, 1 << 62}, Type: dtype.F32},
		"partial block":  {Name: "x", Dims: []uint64{31}, Type: dtype.Q4_0, Size: 18},
		"unknown type":   {Name: "x", Dims: []uint64{1}, Type: 99, Size: 4},
		"wraps offset":   {Name: "x", Dims: []uint64{64}, Type: dtype.F32, Offset: math.MaxUint64 - 8, Size: 256},
		"one byte short": {Name: "x", Dims: []uint64{64}, Type: dtype.F32, Offset: uint64(f.size - f.DataOffset - 252), Size: 256},
	}
	for name, ti := range tests {
		if _, err := f.ReadFloat32(&ti); err == nil {
			t.Errorf("%s: ReadFloat32 succeeded", name)
		}
		if _, err := f.ReadTensor(&ti); err == nil {
			t.Errorf("%s: ReadTensor succeeded", name)
		}
	}
}

func BenchmarkReadStories(b *testing.B) {
	data, err := os.ReadFile(storiesGGUF)
	if err != nil {
		b.Fatal(err)
	}
	r := bytes.NewReader(data)
	b.Run("metadata", func(b *testing.B) {
		for b.Loop() {
			if _, err := Read(r, int64(len(data))); err != nil {
				b.Fatal(err)
			}
		}
	})
	f, err := Read(r, int64(len(data)))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("all tensors", func(b *testing.B) {
		b.SetBytes(int64(len(data)) - f.DataOffset)
		for b.Loop() {
			for i := range f.Tensors {
				if _, err := f.ReadFloat32(&f.Tensors[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
