package gguf

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

func TestWriteRoundTrip(t *testing.T) {
	kv, tensors := sampleKV(), sampleTensors(t)
	var buf bytes.Buffer
	if err := Write(&buf, kv, tensors); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	f, err := Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 32 || f.DataOffset%32 != 0 || len(b)%32 != 0 {
		t.Errorf("version %d, alignment %d, data offset %d, size %d", f.Version, f.Alignment, f.DataOffset, len(b))
	}
	// The sample has no NaNs, so DeepEqual is an exact comparison.
	if !reflect.DeepEqual(f.KV, kv) {
		for i := range kv {
			if i >= len(f.KV) || !reflect.DeepEqual(f.KV[i], kv[i]) {
				t.Fatalf("metadata entry %d: read %v, wrote %v", i, f.KV[min(i, len(f.KV)-1)], kv[i])
			}
		}
		t.Fatalf("read %d metadata entries, wrote %d", len(f.KV), len(kv))
	}
	if len(f.Tensors) != len(tensors) {
		t.Fatalf("read %d tensors, wrote %d", len(f.Tensors), len(tensors))
	}
	for i, want := range tensors {
		got := &f.Tensors[i]
		if got.Name != want.Name || !slices.Equal(got.Dims, want.Dims) || got.Type != want.Type ||
			got.Size != int64(len(want.Data)) || got.Offset%32 != 0 {
			t.Errorf("tensor %d: read %+v, wrote %s %v %v (%d bytes)", i, got, want.Name, want.Dims, want.Type, len(want.Data))
			continue
		}
		data, err := f.ReadTensor(got)
		if err != nil || !bytes.Equal(data, want.Data) {
			t.Errorf("tensor %s: data differs (err %v)", want.Name, err)
		}
		x, err := f.ReadFloat32(got)
		wantX := make([]float32, got.Elements())
		if derr := dtype.Dequantize(want.Type, want.Data, wantX); err != nil || derr != nil || !slices.Equal(x, wantX) {
			t.Errorf("tensor %s: ReadFloat32 differs (err %v, %v)", want.Name, err, derr)
		}
	}
	// Accessors see the tokenizer arrays as written.
	if toks, _ := f.Strings("tokenizer.ggml.tokens"); !slices.Equal(toks, []string{"<unk>", "<s>", "</s>", "▁the"}) {
		t.Errorf("tokens = %q", toks)
	}
	if scores, _ := f.Float32s("tokenizer.ggml.scores"); !slices.Equal(scores, []float32{0, 0, 0, -1.5}) {
		t.Errorf("scores = %v", scores)
	}
	if types, _ := f.Int32s("tokenizer.ggml.token_type"); !slices.Equal(types, []int32{2, 3, 3, 1}) {
		t.Errorf("token types = %v", types)
	}
}

// TestRewriteStories reads the real model and writes it back: the writer
// must reproduce the file that llama.cpp's tooling wrote, byte for byte.
func TestRewriteStories(t *testing.T) {
	orig, err := os.ReadFile(storiesGGUF)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(orig), int64(len(orig)))
	if err != nil {
		t.Fatal(err)
	}
	var tensors []WriteTensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.ReadTensor(ti)
		if err != nil {
			t.Fatal(err)
		}
		tensors = append(tensors, WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: data})
	}
	var buf bytes.Buffer
	if err := Write(&buf, f.KV, tensors); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes(); !bytes.Equal(got, orig) {
		i := 0
		for i < min(len(got), len(orig)) && got[i] == orig[i] {
			i++
		}
		t.Fatalf("rewritten file (%d bytes) differs from the original (%d bytes) at offset %d", len(got), len(orig), i)
	}
}

func TestWriteAlignment(t *testing.T) {
	kv := append(sampleKV(), KV{alignmentKey, Uint32Value(256)})
	var buf bytes.Buffer
	if err := Write(&buf, kv, sampleTensors(t)); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if f.Alignment != 256 || f.DataOffset%256 != 0 {
		t.Fatalf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}
	for _, ti := range f.Tensors {
		if ti.Offset%256 != 0 {
			t.Errorf("tensor %s at offset %d", ti.Name, ti.Offset)
		}
	}
}

func TestWriteEmpty(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil || len(f.KV) != 0 || len(f.Tensors) != 0 || f.DataOffset != 32 {
		t.Fatalf("empty file: %+v, %v", f, err)
	}
}

func TestWriteErrors(t *testing.T) {
	good := sampleTensors(t)[0]
	tensor := func(edit func(*WriteTensor)) []WriteTensor {
		w := good
		edit(&w)
		return []WriteTensor{w}
	}
	tests := []struct {
		name    string
		kv      []KV
		tensors []WriteTensor
		wantErr string
	}{
		{"empty key", []KV{{"", Uint8Value(1)}}, nil, "empty key"},
		{"duplicate key", []KV{{"a", Uint8Value(1)}, {"a", Uint8Value(2)}}, nil, `duplicate key "a"`},
		{"alignment type", []KV{{alignmentKey, Uint64Value(64)}}, nil, "uint32 power of two"},
		{"alignment zero", []KV{{alignmentKey, Uint32Value(0)}}, nil, "uint32 power of two"},
		{"alignment not a power of two", []KV{{alignmentKey, Uint32Value(48)}}, nil, "uint32 power of two"},
		{"scalar in array of arrays", []KV{{"a", ArrayValue([]Value{ArrayValue([]int8{1}), Int8Value(2)})}}, nil, "element 1 of an array of arrays is a int8"},
		{"nesting too deep", []KV{{"a", deepArray(maxNesting + 1)}}, nil, "nested more than"},
		{"empty name", nil, tensor(func(w *WriteTensor) { w.Name = "" }), "empty name"},
		{"duplicate name", nil, append(tensor(func(*WriteTensor) {}), good), `duplicate tensor name "f32.vec"`},
		{"no dims", nil, tensor(func(w *WriteTensor) { w.Dims = nil }), "0 dimensions"},
		{"five dims", nil, tensor(func(w *WriteTensor) { w.Dims = []uint64{5, 1, 1, 1, 1} }), "5 dimensions"},
		{"zero dim", nil, tensor(func(w *WriteTensor) { w.Dims = []uint64{5, 0} }), "zero or overflowing"},
		{"overflowing dims", nil, tensor(func(w *WriteTensor) { w.Dims = []uint64{1 << 32, 1 << 32} }), "zero or overflowing"},
		{"unknown type", nil, tensor(func(w *WriteTensor) { w.Type = 4 }), "unknown tensor type type(4)"},
		{"short data", nil, tensor(func(w *WriteTensor) { w.Data = w.Data[:19] }), "19 bytes of data, want 20"},
		{"partial block", nil, tensor(func(w *WriteTensor) { w.Type = dtype.Q4_0 }), "not a multiple of the Q4_0 block size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tt.kv, tt.tensors)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Write = %v, want error containing %q", err, tt.wantErr)
			}
			if buf.Len() != 0 {
				t.Errorf("Write wrote %d bytes before failing", buf.Len())
			}
		})
	}
}

func deepArray(depth int) Value {
	v := ArrayValue([]uint8{1})
	for range depth - 1 {
		v = ArrayValue([]Value{v})
	}
	return v
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n < len(p) {
		return 0, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteIOError(t *testing.T) {
	err := Write(&failingWriter{n: 10}, sampleKV(), sampleTensors(t))
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Write to a failing writer = %v", err)
	}
}

// TestHeaderThenData fills a file from Header's bytes and offsets, data
// written in reverse order into a buffer of Header's size: it is Write's
// file, byte for byte, for the default alignment and a larger one. The
// tensors passed to Header carry no data, and a wrong shape is refused
// as Write refuses it.
func TestHeaderThenData(t *testing.T) {
	for _, align := range []uint32{0, 64} {
		kv, tensors := sampleKV(), sampleTensors(t)
		if align != 0 {
			kv = append(kv, KV{Key: alignmentKey, Value: Uint32Value(align)})
		}
		var want bytes.Buffer
		if err := Write(&want, kv, tensors); err != nil {
			t.Fatal(err)
		}
		bare := make([]WriteTensor, len(tensors))
		for i, x := range tensors {
			bare[i] = WriteTensor{Name: x.Name, Dims: x.Dims, Type: x.Type}
		}
		header, offsets, a, size, err := Header(kv, bare)
		if err != nil {
			t.Fatal(err)
		}
		if wantA := int64(max(align, defaultAlignment)); a != wantA || int64(len(header))%a != 0 {
			t.Errorf("alignment %d, header %d bytes; want alignment %d", a, len(header), wantA)
		}
		got := make([]byte, size)
		copy(got, header)
		for i := len(tensors) - 1; i >= 0; i-- {
			copy(got[offsets[i]:], tensors[i].Data)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("alignment %d: %d bytes from Header, Write wrote %d (equal lengths: the bytes differ)", align, len(got), want.Len())
		}
	}
	bad := []WriteTensor{{Name: "q4_0.odd", Dims: []uint64{33}, Type: dtype.Q4_0}}
	if _, _, _, _, err := Header(sampleKV(), bad); err == nil || !strings.Contains(err.Error(), "block size") {
		t.Errorf("a row of 33 Q4_0 values: %v, want the block size refused", err)
	}
}
