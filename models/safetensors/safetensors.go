// Package safetensors reads and writes safetensors, the weight format of
// Hugging Face checkpoints: an 8-byte little-endian header length, a JSON
// header mapping each tensor name to its dtype, shape and byte range
// (data_offsets, relative to the data that follows the header) plus an
// optional "__metadata__" map of strings, then the tensor data.
//
// The reader is built for untrusted input, like models/gguf. It reads only
// the header up front; its length is checked against the file size and
// MaxHeaderSize before anything is allocated for it. Every tensor's dtype,
// shape and byte range is validated: the ranges must tile the data section
// exactly, without gaps, overlaps or trailing bytes, as the reference
// implementation requires. Problems are reported as *FormatError. Tensor
// data is read lazily, one tensor at a time, through an io.ReaderAt.
//
// Sharded checkpoints (model.safetensors.index.json) are read by OpenDir.
package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/internal/fileat"
)

// MaxHeaderSize bounds the JSON header, as the reference implementation
// does (100 MB): a header this large already describes millions of
// tensors, so anything longer is corruption, not a model.
const MaxHeaderSize = 100_000_000

// metadataKey is the header entry that holds free-form string metadata.
const metadataKey = "__metadata__"

// DType is a safetensors element type, as the header spells it.
type DType string

// The element types of the safetensors specification whose elements take
// whole bytes. Sub-byte types (F4, F6_*) are not supported.
const (
	BOOL    DType = "BOOL"
	U8      DType = "U8"
	I8      DType = "I8"
	F8E5M2  DType = "F8_E5M2"
	F8E4M3  DType = "F8_E4M3"
	F8E8M0  DType = "F8_E8M0"
	I16     DType = "I16"
	U16     DType = "U16"
	F16     DType = "F16"
	BF16    DType = "BF16"
	I32     DType = "I32"
	U32     DType = "U32"
	F32     DType = "F32"
	F64     DType = "F64"
	I64     DType = "I64"
	U64     DType = "U64"
	C64     DType = "C64"
	invalid DType = ""
)

var dtypeSizes = map[DType]int64{
	BOOL: 1, U8: 1, I8: 1, F8E5M2: 1, F8E4M3: 1, F8E8M0: 1,
	I16: 2, U16: 2, F16: 2, BF16: 2,
	I32: 4, U32: 4, F32: 4,
	F64: 8, I64: 8, U64: 8, C64: 8,
}

// ggmlTypes are the dtypes with a models/dtype equivalent: the same
// little-endian element layout, so data passes through unchanged.
var ggmlTypes = map[DType]dtype.Type{
	F32: dtype.F32, F16: dtype.F16, BF16: dtype.BF16, F64: dtype.F64,
	I8: dtype.I8, I16: dtype.I16, I32: dtype.I32, I64: dtype.I64,
}

// Size returns the bytes per element, or 0 for a dtype this package does
// not know.
func (d DType) Size() int64 { return dtypeSizes[d] }

// Type returns the models/dtype type with d's layout: F32, F16 and BF16
// (and F64 and the signed integers), or false for the others.
func (d DType) Type() (dtype.Type, bool) {
	t, ok := ggmlTypes[d]
	return t, ok
}

// DTypeOf returns the safetensors dtype with the layout of t, or false when
// safetensors has none.
func DTypeOf(t dtype.Type) (DType, bool) {
	for d, g := range ggmlTypes {
		if g == t {
			return d, true
		}
	}
	return invalid, false
}

// A FormatError reports a malformed or unsupported file: what was being
// read, where, and what is wrong. I/O errors of the underlying reader are
// returned wrapped as they are, so that a bad file can be told from a
// failing disk.
type FormatError struct {
	Offset int64  // file offset of the problem (for the header, of the JSON text)
	Item   string // e.g. `tensor "lm_head.weight"`; may be empty
	Msg    string
	Err    error // io.ErrUnexpectedEOF for truncated files, else nil
}

func (e *FormatError) Error() string {
	if e.Item == "" {
		return fmt.Sprintf("safetensors: offset %d: %s", e.Offset, e.Msg)
	}
	return fmt.Sprintf("safetensors: %s at offset %d: %s", e.Item, e.Offset, e.Msg)
}

func (e *FormatError) Unwrap() error { return e.Err }

// File is a parsed safetensors file. Its exported fields describe the file;
// tensor data is read through Tensor.Bytes.
type File struct {
	Metadata   map[string]string // __metadata__; nil when absent
	Tensors    []*Tensor         // in header order
	DataOffset int64             // where the data section starts: 8 + header length

	r      io.ReaderAt
	size   int64
	closer io.Closer
	index  map[string]*Tensor
}

// Tensor describes one tensor of a File.
type Tensor struct {
	Name  string
	DType DType
	Shape []int // outermost first; empty for a scalar
	// Begin and End delimit the tensor's bytes, relative to File.DataOffset.
	Begin, End int64

	f *File
}

// Elements returns the number of elements (1 for a scalar).
func (t *Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Size returns the tensor's length in bytes.
func (t *Tensor) Size() int64 { return t.End - t.Begin }

// Bytes reads the tensor's data from the file.
func (t *Tensor) Bytes() ([]byte, error) {
	b := make([]byte, t.Size())
	if err := readAt(t.f.r, b, t.f.DataOffset+t.Begin); err != nil {
		return nil, fmt.Errorf("safetensors: tensor %q: %w", t.Name, err)
	}
	return b, nil
}

// Open opens and parses the safetensors file at path. The file stays open
// for reading tensor data until Close.
func Open(path string) (*File, error) {
	f, osf, err := fileat.Open(path, Read)
	if err != nil {
		return nil, err
	}
	f.closer = osf
	return f, nil
}

// Close closes the file opened by Open. For a File from Read it does
// nothing: the caller owns the reader.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	err := f.closer.Close()
	f.closer = nil
	return err
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	t, ok := f.index[name]
	return t, ok
}

// Read parses the header of the safetensors file held by r, which is size
// bytes long, and validates every tensor's dtype, shape and byte range.
// Tensor data is read only when asked for. Memory is bounded by the header
// length, itself bounded by size and MaxHeaderSize.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 8 {
		return nil, &FormatError{Msg: fmt.Sprintf("file of %d bytes is too short for the 8-byte header length", size), Err: io.ErrUnexpectedEOF}
	}
	var lenBuf [8]byte
	if err := readAt(r, lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	switch {
	case n < 2:
		return nil, &FormatError{Msg: fmt.Sprintf("header length %d is too short for a JSON object", n)}
	case n > MaxHeaderSize:
		return nil, &FormatError{Msg: fmt.Sprintf("header length %d exceeds the maximum of %d bytes", n, MaxHeaderSize)}
	case n > uint64(size-8):
		return nil, &FormatError{Offset: 8, Err: io.ErrUnexpectedEOF,
			Msg: fmt.Sprintf("header length %d exceeds the %d bytes left in the file", n, size-8)}
	}
	hdr := make([]byte, n)
	if err := readAt(r, hdr, 8); err != nil {
		return nil, fmt.Errorf("safetensors: header: %w", err)
	}
	f := &File{r: r, size: size, DataOffset: 8 + int64(n)}
	if err := f.parseHeader(hdr); err != nil {
		return nil, err
	}
	if err := f.checkLayout(); err != nil {
		return nil, err
	}
	return f, nil
}

// headerError reports a problem at byte off of the header text.
func headerError(off int64, item, format string, args ...any) *FormatError {
	return &FormatError{Offset: 8 + off, Item: item, Msg: fmt.Sprintf(format, args...)}
}

// jsonError turns a JSON decoding error into a FormatError at the offset
// the decoder reached.
func jsonError(dec *json.Decoder, item string, err error) *FormatError {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return headerError(se.Offset, item, "invalid JSON: %v", err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return headerError(dec.InputOffset(), item, "header JSON ends early")
	}
	return headerError(dec.InputOffset(), item, "%v", err)
}

// parseHeader decodes the JSON header: an object whose keys are tensor
// names (each once) and "__metadata__".
func (f *File) parseHeader(hdr []byte) error {
	if !utf8.Valid(hdr) {
		return headerError(0, "header", "header is not valid UTF-8")
	}
	if hdr[0] != '{' {
		return headerError(0, "header", "header does not start with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if _, err := dec.Token(); err != nil { // the opening brace
		return jsonError(dec, "header", err)
	}
	f.index = map[string]*Tensor{}
	seenMetadata := false
	for dec.More() {
		keyOff := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return jsonError(dec, "header", err)
		}
		name, ok := tok.(string)
		if !ok {
			return headerError(keyOff, "header", "expected a tensor name, found %v", tok)
		}
		item := fmt.Sprintf("tensor %q", name)
		if name == metadataKey {
			if seenMetadata {
				return headerError(keyOff, metadataKey, "duplicate %s", metadataKey)
			}
			seenMetadata = true
			if err := dec.Decode(&f.Metadata); err != nil {
				return jsonError(dec, metadataKey, fmt.Errorf("metadata must map strings to strings: %w", err))
			}
			continue
		}
		if name == "" {
			return headerError(keyOff, "header", "empty tensor name")
		}
		if _, dup := f.index[name]; dup {
			return headerError(keyOff, item, "duplicate tensor name")
		}
		var raw map[string]json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) {
				return headerError(keyOff, item, "entry is a JSON %s, not an object", te.Value)
			}
			return jsonError(dec, item, err)
		}
		t, err := parseTensor(name, raw)
		if err != nil {
			return headerError(keyOff, item, "%v", err)
		}
		t.f = f
		f.index[name] = t
		f.Tensors = append(f.Tensors, t)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return jsonError(dec, "header", err)
	}
	// The reference writer pads the header with spaces to a multiple of 8.
	if rest := hdr[dec.InputOffset():]; len(bytes.TrimLeft(rest, " \t\r\n")) != 0 {
		return headerError(dec.InputOffset(), "header", "%d bytes after the JSON object are not whitespace", len(rest))
	}
	return nil
}

// parseTensor reads one header entry: dtype, shape and data_offsets, with
// the byte length the dtype and shape imply.
func parseTensor(name string, raw map[string]json.RawMessage) (*Tensor, error) {
	field := func(key, want string, v any) error {
		b, ok := raw[key]
		if !ok {
			return fmt.Errorf("missing %q", key)
		}
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("%s must be %s: %v", key, want, err)
		}
		return nil
	}
	var dt string
	var shape []uint64
	var offsets []uint64
	if err := field("dtype", "a string", &dt); err != nil {
		return nil, err
	}
	if err := field("shape", "a list of non-negative integers", &shape); err != nil {
		return nil, err
	}
	if err := field("data_offsets", "two non-negative integers", &offsets); err != nil {
		return nil, err
	}
	if shape == nil && string(raw["shape"]) == "null" {
		return nil, errors.New("shape is null")
	}
	t := &Tensor{Name: name, DType: DType(dt), Shape: make([]int, len(shape))}
	size := t.DType.Size()
	if size == 0 {
		return nil, fmt.Errorf("unknown or unsupported dtype %q", dt)
	}
	if len(offsets) != 2 {
		return nil, fmt.Errorf("data_offsets has %d values, want 2 (begin, end)", len(offsets))
	}
	if offsets[0] > offsets[1] || offsets[1] > math.MaxInt64 {
		return nil, fmt.Errorf("data_offsets [%d, %d] are not a valid range", offsets[0], offsets[1])
	}
	elems := uint64(1)
	for i, d := range shape {
		if d > math.MaxInt64 || (d != 0 && elems > math.MaxInt64/d) {
			return nil, fmt.Errorf("shape %v overflows", shape)
		}
		elems *= d
		t.Shape[i] = int(d)
	}
	if elems > uint64(math.MaxInt64/size) {
		return nil, fmt.Errorf("shape %v of %s overflows", shape, dt)
	}
	t.Begin, t.End = int64(offsets[0]), int64(offsets[1])
	if want := int64(elems) * size; t.Size() != want {
		return nil, fmt.Errorf("data_offsets [%d, %d] hold %d bytes, but shape %v of %s needs %d", t.Begin, t.End, t.Size(), shape, dt, want)
	}
	return t, nil
}

// checkLayout verifies that the tensors' byte ranges tile the data section:
// sorted by offset, each starts where the last ended, and the last ends at
// the end of the file.
func (f *File) checkLayout() error {
	dataSize := f.size - f.DataOffset
	order := slices.Clone(f.Tensors)
	slices.SortStableFunc(order, func(a, b *Tensor) int {
		if a.Begin != b.Begin {
			return cmp.Compare(a.Begin, b.Begin)
		}
		return cmp.Compare(a.End, b.End)
	})
	var end int64
	var last *Tensor
	for _, t := range order {
		item := fmt.Sprintf("tensor %q", t.Name)
		switch {
		case t.End > dataSize:
			return &FormatError{Offset: f.DataOffset + t.Begin, Item: item, Err: io.ErrUnexpectedEOF,
				Msg: fmt.Sprintf("data [%d, %d) runs past the end of the %d-byte data section", t.Begin, t.End, dataSize)}
		case t.Begin < end:
			return &FormatError{Offset: f.DataOffset + t.Begin, Item: item,
				Msg: fmt.Sprintf("data [%d, %d) overlaps tensor %q's [%d, %d)", t.Begin, t.End, last.Name, last.Begin, last.End)}
		case t.Begin > end:
			return &FormatError{Offset: f.DataOffset + end, Item: item,
				Msg: fmt.Sprintf("data bytes [%d, %d) belong to no tensor", end, t.Begin)}
		}
		end, last = t.End, t
	}
	if end != dataSize {
		return &FormatError{Offset: f.DataOffset + end,
			Msg: fmt.Sprintf("%d bytes after the last tensor's data belong to no tensor", dataSize-end)}
	}
	return nil
}

// readAt fills p from off. A ReaderAt may return io.EOF along with a full
// read; a short read means the reader is smaller than its declared size.
func readAt(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %d bytes at offset %d: %w", len(p), off, err)
}
