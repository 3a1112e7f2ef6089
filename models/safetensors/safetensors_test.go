package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// sampleTensors covers every shape kind: matrices of the three float types,
// a scalar, an integer vector and an empty tensor.
func sampleTensors(t testing.TB) []WriteTensor {
	q := func(typ dtype.Type, vals ...float32) []byte {
		b, err := dtype.Quantize(typ, vals)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return []WriteTensor{
		{Name: "model.embed_tokens.weight", DType: F32, Shape: []int{2, 3}, Data: q(dtype.F32, 1, 2, 3, 4, 5, 6)},
		{Name: "h", DType: F16, Shape: []int{4}, Data: q(dtype.F16, 0.5, -1, 2, 65504)},
		{Name: "b", DType: BF16, Shape: []int{2, 2}, Data: q(dtype.BF16, 1, -2.5, 0x1p100, 0)},
		{Name: "scalar", DType: I64, Shape: []int{}, Data: []byte{7, 0, 0, 0, 0, 0, 0, 0}},
		{Name: "mask", DType: BOOL, Shape: []int{3}, Data: []byte{1, 0, 1}},
		{Name: "empty", DType: F32, Shape: []int{0, 5}, Data: []byte{}},
	}
}

func sampleFile(t testing.TB) []byte {
	var buf bytes.Buffer
	if err := Write(&buf, map[string]string{"format": "pt", "note": "ünïcode \"quoted\""}, sampleTensors(t)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readBytes parses b and requires any error to be a *FormatError: with an
// in-memory reader there is no I/O to fail.
func readBytes(t *testing.T, b []byte) (*File, error) {
	t.Helper()
	f, err := Read(bytes.NewReader(b), int64(len(b)))
	var fe *FormatError
	if err != nil && !errors.As(err, &fe) {
		t.Fatalf("error is not a *FormatError: %v", err)
	}
	return f, err
}

func TestRoundTrip(t *testing.T) {
	b := sampleFile(t)
	f, err := readBytes(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if f.DataOffset%8 != 0 {
		t.Errorf("data offset %d is not a multiple of 8", f.DataOffset)
	}
	if want := map[string]string{"format": "pt", "note": "ünïcode \"quoted\""}; !reflect.DeepEqual(f.Metadata, want) {
		t.Errorf("metadata %v, want %v", f.Metadata, want)
	}
	want := sampleTensors(t)
	if len(f.Tensors) != len(want) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(want))
	}
	for i, w := range want {
		got := f.Tensors[i]
		if got.Name != w.Name || got.DType != w.DType || !reflect.DeepEqual(got.Shape, w.Shape) {
			t.Errorf("tensor %d: %s %s %v, want %s %s %v", i, got.Name, got.DType, got.Shape, w.Name, w.DType, w.Shape)
		}
		if byName, ok := f.Tensor(w.Name); !ok || byName != got {
			t.Errorf("Tensor(%q) = %v, %v", w.Name, byName, ok)
		}
		data, err := got.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, w.Data) {
			t.Errorf("%s: data %v, want %v", w.Name, data, w.Data)
		}
	}
	if f.Tensors[3].Elements() != 1 || f.Tensors[5].Elements() != 0 {
		t.Errorf("scalar has %d elements, empty %d", f.Tensors[3].Elements(), f.Tensors[5].Elements())
	}
	// Writing what was read reproduces the file.
	var again bytes.Buffer
	if err := Write(&again, f.Metadata, rewrite(t, f)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), b) {
		t.Error("re-encoding differs from the original")
	}
	// No metadata: no __metadata__ entry.
	var bare bytes.Buffer
	if err := Write(&bare, nil, want[:1]); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(bare.String(), metadataKey) {
		t.Error("nil metadata written")
	}
	if f, err := readBytes(t, bare.Bytes()); err != nil || f.Metadata != nil {
		t.Errorf("bare file: %v, metadata %v", err, f.Metadata)
	}
}

// rewrite turns a read file back into tensors to write.
func rewrite(t testing.TB, f *File) []WriteTensor {
	var ws []WriteTensor
	for _, ti := range f.Tensors {
		data, err := ti.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: data})
	}
	return ws
}

func TestDTypes(t *testing.T) {
	for d, want := range map[DType]dtype.Type{F32: dtype.F32, F16: dtype.F16, BF16: dtype.BF16} {
		got, ok := d.Type()
		if !ok || got != want {
			t.Errorf("%s.Type() = %v, %v", d, got, ok)
		}
		if back, ok := DTypeOf(want); !ok || back != d {
			t.Errorf("DTypeOf(%v) = %q, %v", want, back, ok)
		}
	}
	for _, d := range []DType{U8, BOOL, F8E4M3, "F17"} {
		if _, ok := d.Type(); ok {
			t.Errorf("%s maps to a ggml type", d)
		}
	}
	if _, ok := DTypeOf(dtype.Q4_K); ok {
		t.Error("Q4_K has a safetensors dtype")
	}
}

func TestWriteRejects(t *testing.T) {
	f32 := func(n int) []byte { return make([]byte, 4*n) }
	for _, tc := range []struct {
		name    string
		tensors []WriteTensor
		want    string
	}{
		{"empty name", []WriteTensor{{DType: F32, Shape: []int{1}, Data: f32(1)}}, "empty name"},
		{"metadata name", []WriteTensor{{Name: metadataKey, DType: F32, Shape: []int{1}, Data: f32(1)}}, "cannot be called"},
		{"duplicate", []WriteTensor{{Name: "a", DType: F32, Shape: []int{1}, Data: f32(1)}, {Name: "a", DType: F32, Shape: []int{1}, Data: f32(1)}}, "duplicate"},
		{"unknown dtype", []WriteTensor{{Name: "a", DType: "Q4", Shape: []int{1}, Data: f32(1)}}, "unknown dtype"},
		{"short data", []WriteTensor{{Name: "a", DType: F32, Shape: []int{2, 2}, Data: f32(3)}}, "bytes of data"},
		{"negative dim", []WriteTensor{{Name: "a", DType: F32, Shape: []int{-1}, Data: nil}}, "invalid shape"},
	} {
		var buf bytes.Buffer
		err := Write(&buf, nil, tc.tensors)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: %d bytes written before failing", tc.name, buf.Len())
		}
	}
}

// raw builds a file from a header and data, with the header length taken
// from the header unless length is given.
func raw(header string, data []byte, length ...uint64) []byte {
	n := uint64(len(header))
	if len(length) > 0 {
		n = length[0]
	}
	b := binary.LittleEndian.AppendUint64(nil, n)
	return append(append(b, header...), data...)
}

// TestCorrupt: every way a file can be wrong is a *FormatError that says
// what is wrong.
func TestCorrupt(t *testing.T) {
	t4 := func(name, dt, shape, offs string) string {
		return `"` + name + `":{"dtype":"` + dt + `","shape":` + shape + `,"data_offsets":` + offs + `}`
	}
	ok := t4("a", "F32", "[2]", "[0,8]")
	eight := make([]byte, 8)
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"empty file", nil, "too short"},
		{"seven bytes", make([]byte, 7), "too short"},
		{"zero header length", raw("", nil), "too short for a JSON object"},
		{"one-byte header", raw("{", nil), "too short for a JSON object"},
		{"header past the end", raw("{}", nil, 3), "exceeds the 2 bytes left"},
		{"absurd header length", raw("{}", nil, 1<<62), "exceeds the maximum"},
		{"max uint64 header length", raw("{}", nil, ^uint64(0)), "exceeds the maximum"},
		{"not UTF-8", raw("{\"\xff\":1}", nil), "not valid UTF-8"},
		{"array header", raw("[]", nil), "does not start with '{'"},
		{"leading space", raw(" {}", nil), "does not start with '{'"},
		{"unterminated", raw(`{"a":`, nil), "ends early"},
		{"bad JSON", raw(`{"a" 1}`, nil), "invalid JSON"},
		{"trailing junk", raw(`{}x`, nil), "not whitespace"},
		{"two objects", raw(`{}{}`, nil), "not whitespace"},
		{"entry not an object", raw(`{"a":5}`, nil), "entry is a JSON number, not an object"},
		{"missing dtype", raw(`{"a":{"shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)), `missing "dtype"`},
		{"missing shape", raw(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, make([]byte, 4)), `missing "shape"`},
		{"null shape", raw(`{"a":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`, make([]byte, 4)), "shape is null"},
		{"missing offsets", raw(`{"a":{"dtype":"F32","shape":[1]}}`, make([]byte, 4)), `missing "data_offsets"`},
		{"unknown dtype", raw("{"+t4("a", "F17", "[2]", "[0,8]")+"}", eight), `unknown or unsupported dtype "F17"`},
		{"sub-byte dtype", raw("{"+t4("a", "F4", "[2]", "[0,1]")+"}", eight[:1]), `unknown or unsupported dtype "F4"`},
		{"dtype not a string", raw(`{"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}}`, eight), "dtype"},
		{"negative dim", raw("{"+t4("a", "F32", "[-2]", "[0,8]")+"}", eight), "shape"},
		{"fractional dim", raw("{"+t4("a", "F32", "[2.5]", "[0,8]")+"}", eight), "shape"},
		{"huge dims", raw("{"+t4("a", "F32", "[4611686018427387904,4]", "[0,8]")+"}", eight), "overflows"},
		{"bytes overflow", raw("{"+t4("a", "F32", "[4611686018427387904]", "[0,8]")+"}", eight), "overflows"},
		{"three offsets", raw("{"+t4("a", "F32", "[2]", "[0,8,8]")+"}", eight), "has 3 values"},
		{"reversed offsets", raw("{"+t4("a", "F32", "[0]", "[8,0]")+"}", eight), "not a valid range"},
		{"negative offset", raw("{"+t4("a", "F32", "[2]", "[-8,0]")+"}", eight), "data_offsets"},
		{"size mismatch", raw("{"+t4("a", "F32", "[3]", "[0,8]")+"}", eight), "needs 12"},
		{"past the end", raw("{"+t4("a", "F32", "[4]", "[0,16]")+"}", eight), "runs past the end"},
		{"absurd offsets", raw("{"+t4("a", "F32", "[1]", "[9223372036854775800,9223372036854775804]")+"}", eight), "runs past the end"},
		{"overlap", raw("{"+ok+","+t4("b", "F32", "[1]", "[4,8]")+"}", eight), `overlaps tensor "a"`},
		{"same range", raw("{"+ok+","+t4("b", "F32", "[2]", "[0,8]")+"}", eight), "overlaps"},
		{"gap", raw("{"+t4("a", "F32", "[1]", "[4,8]")+"}", eight), "bytes [0, 4) belong to no tensor"},
		{"trailing data", raw("{"+t4("a", "F32", "[1]", "[0,4]")+"}", eight), "4 bytes after the last tensor"},
		{"no tensors, data", raw("{}", eight), "8 bytes after"},
		{"duplicate tensor", raw("{"+ok+","+ok+"}", eight), "duplicate tensor name"},
		{"empty name", raw("{"+t4("", "F32", "[2]", "[0,8]")+"}", eight), "empty tensor name"},
		{"duplicate metadata", raw(`{"__metadata__":{},"__metadata__":{}}`, nil), "duplicate __metadata__"},
		{"metadata number", raw(`{"__metadata__":{"a":1}}`, nil), "metadata must map strings to strings"},
		{"metadata array", raw(`{"__metadata__":[]}`, nil), "metadata must map strings to strings"},
		{"deep nesting", raw(`{"__metadata__":`+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+`}`, nil), "__metadata__"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readBytes(t, tc.file)
			if err == nil {
				t.Fatalf("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestAccepts: the edge cases the format allows.
func TestAccepts(t *testing.T) {
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"empty object", raw("{}", nil)},
		{"padding", raw("{}      ", nil)},
		{"tabs and newlines", raw("{\n\t}\n", nil)},
		{"null metadata", raw(`{"__metadata__":null}`, nil)},
		{"unknown entry fields", raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":[1]}}`, make([]byte, 4))},
		{"out-of-order entries", raw(`{"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 6))},
		{"empty tensors share an offset", raw(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"F16","shape":[2,0],"data_offsets":[0,0]}}`, nil)},
	} {
		if _, err := readBytes(t, tc.file); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestTruncateEverywhere cuts the sample at every byte, which covers every
// boundary: inside the length, inside the header JSON, between tensors'
// data. Each cut file is rejected, and so is the whole file read through a
// reader that claims more bytes than it has.
func TestTruncateEverywhere(t *testing.T) {
	b := sampleFile(t)
	for n := range len(b) {
		if _, err := readBytes(t, b[:n]); err == nil {
			t.Fatalf("file cut to %d of %d bytes accepted", n, len(b))
		}
		// A reader shorter than its declared size: an I/O error wrapping
		// io.ErrUnexpectedEOF, when reading the header or the tensors.
		f, err := Read(bytes.NewReader(b[:n]), int64(len(b)))
		if err == nil {
			for _, ti := range f.Tensors {
				if _, err = ti.Bytes(); err != nil {
					break
				}
			}
		}
		if n < len(b) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("reader of %d bytes claiming %d: error %v", n, len(b), err)
		}
	}
}

// TestMaxHeaderIsBounded: a file that claims a huge header costs nothing
// before it is refused.
func TestMaxHeaderIsBounded(t *testing.T) {
	n := testing.AllocsPerRun(10, func() {
		Read(bytes.NewReader(raw("{}", nil, MaxHeaderSize+1)), MaxHeaderSize+100)
	})
	if n > 10 {
		t.Errorf("%v allocations refusing an oversized header", n)
	}
}
