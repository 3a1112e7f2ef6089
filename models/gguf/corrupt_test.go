package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// readBytes parses b and requires any error to be a *FormatError: with an
// in-memory reader there is no I/O to fail, so everything is the file's
// fault and must be reported as such.
func readBytes(t *testing.T, b []byte) (*File, error) {
	t.Helper()
	f, err := Read(bytes.NewReader(b), int64(len(b)))
	var fe *FormatError
	if err != nil && !errors.As(err, &fe) {
		t.Fatalf("error is not a *FormatError: %v", err)
	}
	return f, err
}

// dataEnd is where the last tensor's data ends: truncating anywhere
// before it must fail, while trailing padding after it is optional.
func dataEnd(f *File) int64 {
	end := f.DataOffset
	for _, t := range f.Tensors {
		end = max(end, f.DataOffset+int64(t.Offset)+t.Size)
	}
	return end
}

// TestTruncateSampleEverywhere cuts the sample file at every byte, which
// covers every section boundary: inside the magic, the version, both
// counts, each key's length and bytes, each value type tag and value
// (every scalar width, strings, array headers and elements, nested
// arrays), each tensor info field, the alignment padding and each
// tensor's data.
func TestTruncateSampleEverywhere(t *testing.T) {
	b := sampleFile(t)
	f, err := readBytes(t, b)
	if err != nil {
		t.Fatal(err)
	}
	end := dataEnd(f)
	for n := range end {
		if _, err := readBytes(t, b[:n]); err == nil {
			t.Fatalf("file truncated to %d of %d bytes parsed without error", n, len(b))
		}
	}
	// Trailing padding after the last tensor may be cut.
	if _, err := readBytes(t, b[:end]); err != nil {
		t.Fatalf("file cut at the end of its data: %v", err)
	}
}

// TestTruncateStories cuts the real model inside its whole metadata and
// tensor info region, around every tensor's data boundaries and at random
// positions.
func TestTruncateStories(t *testing.T) {
	b, err := os.ReadFile(storiesGGUF)
	if err != nil {
		t.Fatal(err)
	}
	f, err := readBytes(t, b)
	if err != nil {
		t.Fatal(err)
	}
	var cuts []int64
	for n := range f.DataOffset + 8 {
		cuts = append(cuts, n)
	}
	for _, ti := range f.Tensors {
		start := f.DataOffset + int64(ti.Offset)
		cuts = append(cuts, start, start+1, start+ti.Size-1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		cuts = append(cuts, r.Int64N(int64(len(b))))
	}
	for _, n := range cuts {
		if _, err := readBytes(t, b[:n]); err == nil {
			t.Fatalf("file truncated to %d of %d bytes parsed without error", n, len(b))
		}
	}
}

// lyingReader claims a size it does not have.
type lyingReader struct{ b []byte }

func (r lyingReader) ReadAt(p []byte, off int64) (int, error) {
	return bytes.NewReader(r.b).ReadAt(p, off)
}

func TestReaderShorterThanSize(t *testing.T) {
	b := sampleFile(t)
	for _, n := range []int{0, 3, 30, len(b) / 2} {
		_, err := Read(lyingReader{b[:n]}, int64(len(b)))
		if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("reader of %d bytes claiming %d: %v", n, len(b), err)
		}
		var fe *FormatError
		if errors.As(err, &fe) {
			t.Errorf("I/O shortfall reported as a format error: %v", err)
		}
	}
	if _, err := Read(bytes.NewReader(b), -1); err == nil {
		t.Error("negative size accepted")
	}
}

// mutation is a hand-built malformed file and what its error must say.
type mutation struct {
	name    string
	file    []byte
	wantErr []string // substrings of the error
}

func build(f func(r *raw)) []byte {
	var r raw
	f(&r)
	return r.Bytes()
}

// mutations lists targeted corruptions: absurd counts and lengths, bad
// types, shapes and offsets. FuzzRead uses them as seeds too.
func mutations() []mutation {
	f32 := dtype.F32
	return []mutation{
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), []string{"bad magic"}},
		{"empty file", nil, []string{"offset 0", "magic"}},
		{"tensor count 2^40", build(func(r *raw) { r.header(1<<40, 0) }), []string{"tensor count 1099511627776 is impossible"}},
		{"kv count 2^40", build(func(r *raw) { r.header(0, 1<<40) }), []string{"metadata count 1099511627776 is impossible"}},
		{"kv count 2^64-1", build(func(r *raw) { r.header(0, 1<<64-1) }), []string{"metadata count"}},
		{"counts too large together", build(func(r *raw) { r.header(1, 3).data(33 + 14*2) }), []string{"1 tensors and 3 metadata entries need"}},
		{"key length 2^60", build(func(r *raw) { r.header(0, 1).u64(1 << 60).data(32) }),
			[]string{"metadata entry 0", "offset 24", "key length 1152921504606846976 exceeds"}},
		{"string value length 2^60", build(func(r *raw) { r.header(0, 1).str("k").u32(uint32(TypeString)).u64(1 << 60).data(32) }),
			[]string{`key "k"`, "string length 1152921504606846976 exceeds"}},
		{"array of 2^50 uint8", build(func(r *raw) {
			r.header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint8)).u64(1 << 50).data(32)
		}),
			[]string{`key "k"`, "uint8 array length 1125899906842624 is impossible"}},
		{"array of 2^50 strings", build(func(r *raw) {
			r.header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1 << 50).data(32)
		}),
			[]string{"string array length 1125899906842624 is impossible"}},
		{"nested array of 2^50", build(func(r *raw) {
			r.header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(1)
			r.u32(uint32(TypeFloat64)).u64(1 << 50).data(32)
		}), []string{"float64 array length 1125899906842624 is impossible"}},
		{"unknown value type", build(func(r *raw) { r.header(0, 1).str("k").u32(13).data(32) }), []string{`key "k"`, "unknown value type 13"}},
		{"unknown array element type", build(func(r *raw) { r.header(0, 1).str("k").u32(uint32(TypeArray)).u32(0xffffffff).data(32) }),
			[]string{"unknown array element type 4294967295"}},
		{"invalid bool", build(func(r *raw) { r.header(0, 1).str("k").u32(uint32(TypeBool)).u8(2).data(32) }), []string{"invalid bool byte 0x2"}},
		{"invalid bool in array", build(func(r *raw) {
			r.header(0, 1).str("k").u32(uint32(TypeArray)).u32(uint32(TypeBool)).u64(2).u8(1).u8(7).data(32)
		}), []string{"invalid bool byte 0x7 in array element 1"}},
		{"empty key", build(func(r *raw) { r.header(0, 1).str("").u32(uint32(TypeUint8)).u8(0).data(32) }), []string{"empty key"}},
		{"duplicate key", build(func(r *raw) { r.header(0, 2).kvU32("k", 1).kvU32("k", 2).data(32) }),
			[]string{"metadata entry 1", `duplicate key "k"`}},
		{"arrays nested too deep", build(func(r *raw) {
			r.header(0, 1).str("k").u32(uint32(TypeArray))
			for range maxNesting + 1 {
				r.u32(uint32(TypeArray)).u64(1)
			}
			r.data(32)
		}), []string{"nested more than 16 deep"}},
		{"alignment zero", build(func(r *raw) { r.header(0, 1).kvU32(alignmentKey, 0).data(32) }), []string{`key "general.alignment"`, "power of two"}},
		{"alignment 48", build(func(r *raw) { r.header(0, 1).kvU32(alignmentKey, 48).data(32) }), []string{"power of two"}},
		{"alignment as string", build(func(r *raw) { r.header(0, 1).str(alignmentKey).u32(uint32(TypeString)).str("32").data(32) }),
			[]string{"power of two"}},
		{"alignment past end", build(func(r *raw) { r.header(0, 1).kvU32(alignmentKey, 1<<31).data(32) }),
			[]string{"data section", "runs past the end"}},
		{"zero dims", build(func(r *raw) { r.header(1, 0).tensor("t", nil, f32, 0).data(64) }),
			[]string{`tensor "t"`, "dimension count 0"}},
		{"five dims", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{1, 1, 1, 1, 1}, f32, 0).data(64) }),
			[]string{"dimension count 5"}},
		{"dims count 2^32-1", build(func(r *raw) { r.header(1, 0).str("t").u32(0xffffffff).data(64) }),
			[]string{"dimension count 4294967295"}},
		{"zero dim", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{4, 0}, f32, 0).data(64) }),
			[]string{"dimension 1 is zero"}},
		{"dims product overflows", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{1 << 32, 1 << 32}, f32, 0).data(64) }),
			[]string{"element count overflows"}},
		{"dim above int64", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{1 << 63}, f32, 0).data(64) }),
			[]string{"element count overflows"}},
		{"byte size overflows", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{1 << 62}, f32, 0).data(64) }),
			[]string{"overflow int64 bytes"}},
		{"unknown tensor type", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{32}, 4, 0).data(64) }),
			[]string{"unknown tensor type type(4)"}},
		{"huge tensor type", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{32}, 0xffffffff, 0).data(64) }),
			[]string{"unknown tensor type"}},
		{"partial quant block", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{31, 2}, dtype.Q4_0, 0).data(64) }),
			[]string{"row length 31 is not a multiple of the Q4_0 block size 32"}},
		{"misaligned offset", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{4}, f32, 16).data(64) }),
			[]string{"data offset 16 is not a multiple of the alignment 32"}},
		{"data past end", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{17}, f32, 0).data(64) }),
			[]string{`tensor "t"`, "offset 24", "runs past the end"}},
		{"offset 2^63", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{4}, f32, 1<<63).data(64) }),
			[]string{"runs past the end"}},
		{"offset near 2^64", build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{4}, f32, 1<<64-32).data(64) }),
			[]string{"runs past the end"}},
		{"overlapping tensors", build(func(r *raw) {
			r.header(2, 0).tensor("a", []uint64{16}, f32, 0).tensor("b", []uint64{8}, f32, 32).data(128)
		}), []string{`tensor "b"`, `overlaps tensor "a"`}},
		{"same offset", build(func(r *raw) {
			r.header(2, 0).tensor("a", []uint64{1}, f32, 0).tensor("b", []uint64{1}, f32, 0).data(64)
		}), []string{"overlaps"}},
		{"duplicate tensor name", build(func(r *raw) {
			r.header(2, 0).tensor("a", []uint64{1}, f32, 0).tensor("a", []uint64{1}, f32, 32).data(64)
		}), []string{"tensor info 1", `duplicate tensor name "a"`}},
		{"empty tensor name", build(func(r *raw) { r.header(1, 0).tensor("", []uint64{1}, f32, 0).data(64) }),
			[]string{"empty tensor name"}},
		{"padding cut short", build(func(r *raw) { r.header(0, 1).kvU32("k", 1) }), []string{"runs past the end"}},
	}
}

func TestMutations(t *testing.T) {
	for _, m := range mutations() {
		t.Run(m.name, func(t *testing.T) {
			_, err := readBytes(t, m.file)
			if err == nil {
				t.Fatal("parsed without error")
			}
			for _, want := range m.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

// TestMutationControls checks that the raw builder makes valid files when
// nothing is wrong, so that each mutation fails for its stated reason.
func TestMutationControls(t *testing.T) {
	files := map[string][]byte{
		"one key": build(func(r *raw) { r.header(0, 1).kvU32("k", 1).data(0) }),
		"two tensors": build(func(r *raw) {
			r.header(2, 0).tensor("a", []uint64{8}, dtype.F32, 0).tensor("b", []uint64{8}, dtype.F32, 32).data(64)
		}),
		"exact end":    build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{16}, dtype.F32, 0).data(64) }),
		"deep arrays":  build(func(r *raw) { r.header(0, 1).str("k").u32(uint32(TypeArray)); nest(r, maxNesting); r.data(0) }),
		"quant tensor": build(func(r *raw) { r.header(1, 0).tensor("t", []uint64{32, 2}, dtype.Q4_0, 0).data(36) }),
	}
	for name, b := range files {
		if _, err := readBytes(t, b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// nest writes the body of depth nested arrays, the innermost empty.
func nest(r *raw, depth int) {
	for range depth - 1 {
		r.u32(uint32(TypeArray)).u64(1)
	}
	r.u32(uint32(TypeUint8)).u64(0)
}

func TestFormatErrorMessage(t *testing.T) {
	err := error(&FormatError{Offset: 12, Item: `key "a"`, Msg: "bad"})
	if got := err.Error(); got != `gguf: key "a" at offset 12: bad` {
		t.Errorf("Error() = %q", got)
	}
	err = &FormatError{Offset: 3, Msg: "bad", Err: io.ErrUnexpectedEOF}
	if got := err.Error(); got != "gguf: offset 3: bad" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Error() = %q, Is(ErrUnexpectedEOF) = %v", got, errors.Is(err, io.ErrUnexpectedEOF))
	}
	_ = fmt.Sprint(err)
}
