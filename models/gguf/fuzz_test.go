package gguf

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

var writeSeeds = flag.Bool("write-seeds", false, "rewrite testdata/fuzz/FuzzRead seeds from the mutation table")

// smallFile is a compact valid file for the fuzzer to mutate: small
// inputs mutate and run faster than the full sample.
func smallFile(t testing.TB) []byte {
	q4, err := dtype.Quantize(dtype.Q4_K, ramp(256))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = Write(&buf, []KV{
		{"general.architecture", StringValue("llama")},
		{"a", ArrayValue([]Value{ArrayValue([]int16{-1}), ArrayValue([]string{"s"})})},
		{"b", BoolValue(true)},
	}, []WriteTensor{
		{Name: "w", Dims: []uint64{2, 2}, Type: dtype.F16, Data: make([]byte, 8)},
		{Name: "q", Dims: []uint64{256}, Type: dtype.Q4_K, Data: q4},
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzRead parses arbitrary bytes. A file must either be rejected with a
// *FormatError or be fully usable: every tensor readable and convertible
// to float32, and the whole file re-encodable by Write into a file that
// reads back and re-encodes identically.
func FuzzRead(f *testing.F) {
	f.Add(smallFile(f))
	f.Add(sampleFile(f))
	for _, m := range mutations() {
		f.Add(m.file)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Read(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error is not a *FormatError: %v", err)
			}
			return
		}
		if file.DataOffset%file.Alignment != 0 || file.DataOffset > int64(len(b)) {
			t.Fatalf("data offset %d with alignment %d in a %d-byte file", file.DataOffset, file.Alignment, len(b))
		}
		var tensors []WriteTensor
		for i := range file.Tensors {
			ti := &file.Tensors[i]
			x, err := file.ReadFloat32(ti)
			if err != nil {
				t.Fatalf("tensor %q accepted by Read but not readable: %v", ti.Name, err)
			}
			if int64(len(x)) != ti.Elements() {
				t.Fatalf("tensor %q: %d values for %d elements", ti.Name, len(x), ti.Elements())
			}
			data, err := file.ReadTensor(ti)
			if err != nil {
				t.Fatal(err)
			}
			tensors = append(tensors, WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: data})
		}
		var first bytes.Buffer
		if err := Write(&first, file.KV, tensors); err != nil {
			// Only general.alignment stored as a non-uint32 integer is
			// readable but not writable.
			if v, ok := file.Lookup(alignmentKey); ok && v.Type() != TypeUint32 {
				return
			}
			t.Fatalf("Write refused a file that Read accepted: %v", err)
		}
		again, err := Read(bytes.NewReader(first.Bytes()), int64(first.Len()))
		if err != nil {
			t.Fatalf("Read of Write's output: %v", err)
		}
		var second bytes.Buffer
		if err := Write(&second, again.KV, tensors); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first.Bytes(), second.Bytes()) {
			t.Fatal("re-encoding is not stable")
		}
	})
}

// TestWriteSeeds stores the mutation table as seed files, so that the
// seeds can be inspected and kept alongside crashers the fuzzer finds.
// Run with -write-seeds after changing the table.
func TestWriteSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("run with -write-seeds to regenerate testdata/fuzz/FuzzRead")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzRead")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	seeds := map[string][]byte{"small-file": smallFile(t)}
	for _, m := range mutations() {
		seeds[m.name] = m.file
	}
	for name, b := range seeds {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
		file := "seed-" + strings.Trim(unsafeChars.ReplaceAllString(name, "-"), "-")
		if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
