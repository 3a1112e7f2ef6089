package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// The real model files shared by the project, never copied into the repo.
const (
	storiesGGUF = "../../../shared/models/stories260K.gguf"
	storiesBin  = "../../../shared/models/stories260K.bin"
)

// sampleKV exercises every value type, empty and nested arrays, and a
// llama tokenizer's three arrays.
func sampleKV() []KV {
	return []KV{
		{"general.architecture", StringValue("llama")},
		{"general.name", StringValue("sample ✓ \x00 with NUL")},
		{"test.empty_string", StringValue("")},
		{"test.u8", Uint8Value(200)},
		{"test.i8", Int8Value(-100)},
		{"test.u16", Uint16Value(60000)},
		{"test.i16", Int16Value(-30000)},
		{"test.u32", Uint32Value(4000000000)},
		{"test.i32", Int32Value(-2000000000)},
		{"test.f32", Float32Value(1e-5)},
		{"test.bool_true", BoolValue(true)},
		{"test.bool_false", BoolValue(false)},
		{"test.u64", Uint64Value(math.MaxUint64)},
		{"test.i64", Int64Value(math.MinInt64)},
		{"test.f64", Float64Value(-math.Pi)},
		{"test.f32_inf", Float32Value(float32(math.Inf(-1)))},
		{"test.arr_u8", ArrayValue([]uint8{0, 1, 255})},
		{"test.arr_i8", ArrayValue([]int8{-128, 0, 127})},
		{"test.arr_u16", ArrayValue([]uint16{1, 65535})},
		{"test.arr_i16", ArrayValue([]int16{-32768, 32767})},
		{"test.arr_u32", ArrayValue([]uint32{7})},
		{"test.arr_i32", ArrayValue([]int32{-1, 1})},
		{"test.arr_f32", ArrayValue([]float32{0.5, -0.25})},
		{"test.arr_bool", ArrayValue([]bool{true, false, true})},
		{"test.arr_string", ArrayValue([]string{"a", "", "ünï"})},
		{"test.arr_u64", ArrayValue([]uint64{math.MaxUint64, 0})},
		{"test.arr_i64", ArrayValue([]int64{math.MinInt64})},
		{"test.arr_f64", ArrayValue([]float64{1e300})},
		{"test.arr_empty", ArrayValue([]float32{})},
		{"test.arr_nested", ArrayValue([]Value{
			ArrayValue([]int32{1, 2, 3}),
			ArrayValue([]string{"x"}),
			ArrayValue([]Value{ArrayValue([]bool{true}), ArrayValue([]Value{})}),
		})},
		{"tokenizer.ggml.model", StringValue("llama")},
		{"tokenizer.ggml.tokens", ArrayValue([]string{"<unk>", "<s>", "</s>", "▁the"})},
		{"tokenizer.ggml.scores", ArrayValue([]float32{0, 0, 0, -1.5})},
		{"tokenizer.ggml.token_type", ArrayValue([]int32{2, 3, 3, 1})},
	}
}

// ramp returns n distinct, smoothly varying values to quantize.
func ramp(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.37)) * (1 + float32(i%7))
	}
	return x
}

// sampleTensors has one tensor of each type the writer is likely to see,
// with sizes that are not multiples of the alignment so that padding
// between tensors is exercised.
func sampleTensors(t testing.TB) []WriteTensor {
	t.Helper()
	specs := []struct {
		name string
		dims []uint64
		typ  dtype.Type
	}{
		{"f32.vec", []uint64{5}, dtype.F32},
		{"f16.mat", []uint64{3, 2}, dtype.F16},
		{"bf16.mat", []uint64{7, 1, 1}, dtype.BF16},
		{"q8_0.mat", []uint64{32, 3}, dtype.Q8_0},
		{"q4_0.mat", []uint64{64, 1, 2}, dtype.Q4_0},
		{"q4_1.vec", []uint64{32}, dtype.Q4_1},
		{"q4_k.mat", []uint64{256, 2}, dtype.Q4_K},
		{"q6_k.4d", []uint64{256, 1, 1, 1}, dtype.Q6_K},
	}
	var out []WriteTensor
	for _, s := range specs {
		n := 1
		for _, d := range s.dims {
			n *= int(d)
		}
		data, err := dtype.Quantize(s.typ, ramp(n))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, WriteTensor{Name: s.name, Dims: s.dims, Type: s.typ, Data: data})
	}
	// An integer tensor, written from raw bytes.
	out = append(out, WriteTensor{Name: "i32.ids", Dims: []uint64{3}, Type: dtype.I32,
		Data: []byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0}})
	return out
}

// sampleFile returns the encoded sample file.
func sampleFile(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, sampleKV(), sampleTensors(t)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// raw builds byte-level GGUF files, including malformed ones that Write
// refuses to produce.
type raw struct{ bytes.Buffer }

func (r *raw) u8(v uint8) *raw   { r.WriteByte(v); return r }
func (r *raw) u32(v uint32) *raw { r.Write(binary.LittleEndian.AppendUint32(nil, v)); return r }
func (r *raw) u64(v uint64) *raw { r.Write(binary.LittleEndian.AppendUint64(nil, v)); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.WriteString(s); return r }

// header writes magic, version 3 and the two counts.
func (r *raw) header(tensors, kvs uint64) *raw {
	r.WriteString("GGUF")
	return r.u32(3).u64(tensors).u64(kvs)
}

// kvU32 writes a metadata entry holding a uint32.
func (r *raw) kvU32(key string, v uint32) *raw { return r.str(key).u32(uint32(TypeUint32)).u32(v) }

// tensor writes a tensor info.
func (r *raw) tensor(name string, dims []uint64, typ dtype.Type, off uint64) *raw {
	r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r.u64(d)
	}
	return r.u32(uint32(typ)).u64(off)
}

// data appends zeros up to a multiple of 32 (the default alignment), then
// n bytes of tensor data.
func (r *raw) data(n int) *raw {
	for r.Len()%32 != 0 {
		r.u8(0)
	}
	r.Write(make([]byte, n))
	return r
}
