package safetensors

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
)

// FuzzRead parses arbitrary bytes. A file must either be rejected with a
// *FormatError or be fully usable: every tensor readable, those of a float
// type convertible to float32, and the whole file re-encodable by Write
// into a file that reads back with the same tensors and metadata.
func FuzzRead(f *testing.F) {
	f.Add(sampleFile(f))
	f.Add(raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add(raw(`{"__metadata__":{"k":"v"},"b":{"dtype":"BF16","shape":[2,1],"data_offsets":[0,4]}}`, make([]byte, 4)))
	f.Add(raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 4)))
	f.Add(raw("{}", nil, 1<<40))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Read(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error is not a *FormatError: %v", err)
			}
			return
		}
		for _, ti := range file.Tensors {
			data, err := ti.Bytes()
			if err != nil {
				t.Fatalf("tensor %q of an accepted file: %v", ti.Name, err)
			}
			if int64(len(data)) != int64(ti.Elements())*ti.DType.Size() {
				t.Fatalf("tensor %q: %d bytes for %d elements", ti.Name, len(data), ti.Elements())
			}
			if typ, ok := ti.DType.Type(); ok && ti.Elements() < 1<<20 {
				if err := dtype.Dequantize(typ, data, make([]float32, ti.Elements())); err != nil {
					t.Fatalf("tensor %q: %v", ti.Name, err)
				}
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, file.Metadata, rewrite(t, file)); err != nil {
			t.Fatalf("re-encoding an accepted file: %v", err)
		}
		again, err := Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatalf("re-encoded file rejected: %v", err)
		}
		if !reflect.DeepEqual(again.Metadata, file.Metadata) && len(again.Metadata)+len(file.Metadata) > 0 {
			t.Fatalf("metadata %v became %v", file.Metadata, again.Metadata)
		}
		if len(again.Tensors) != len(file.Tensors) {
			t.Fatalf("%d tensors became %d", len(file.Tensors), len(again.Tensors))
		}
		for i, ti := range file.Tensors {
			tj := again.Tensors[i]
			if ti.Name != tj.Name || ti.DType != tj.DType || !reflect.DeepEqual(ti.Shape, tj.Shape) {
				t.Fatalf("tensor %d: %s %s %v became %s %s %v", i, ti.Name, ti.DType, ti.Shape, tj.Name, tj.DType, tj.Shape)
			}
		}
	})
}
