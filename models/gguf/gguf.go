// Package gguf reads and writes GGUF, the model file format of ggml and
// llama.cpp: a header, typed key/value metadata, tensor descriptions, and
// an aligned section of tensor data.
//
// The reader is built for untrusted input. It parses only the header,
// metadata and tensor infos up front, validates every count, length,
// shape and offset against the actual file size before allocating, and
// reports problems as *FormatError naming the item and file offset. Tensor
// data is read lazily, one tensor at a time.
//
// Versions 2 and 3 are read (they share a layout); version 1, which used
// 32-bit counts, is refused. Write produces version 3.
package gguf

import (
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/internal/fileat"
)

// File is a parsed GGUF file. Its exported fields describe the file and
// may be read freely; tensor data is fetched through the methods.
type File struct {
	Version    uint32
	Alignment  int64 // general.alignment, or 32
	DataOffset int64 // absolute offset of the tensor data section
	KV         []KV  // metadata in file order
	Tensors    []TensorInfo

	r           io.ReaderAt
	size        int64
	closer      io.Closer // set by Open
	kvIndex     map[string]int
	tensorIndex map[string]int
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor. Dims is in ggml order: Dims[0] is the
// innermost, contiguous dimension (the row length).
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   dtype.Type
	Offset uint64 // relative to File.DataOffset
	Size   int64  // bytes, computed from Dims and Type
}

// Elements returns the number of elements, or -1 if Dims multiply past
// int64 (never the case for a TensorInfo that Read returned).
func (t *TensorInfo) Elements() int64 {
	if slices.Contains(t.Dims, 0) {
		return 0
	}
	n := int64(1)
	for _, d := range t.Dims {
		if d > math.MaxInt64 || n > math.MaxInt64/int64(d) {
			return -1
		}
		n *= int64(d)
	}
	return n
}

// Open opens and parses the GGUF file at path. The file stays open for
// reading tensor data until Close.
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

// Lookup returns the metadata value stored under key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// lookupAs is Lookup followed by one of Value's typed accessors.
func lookupAs[T any](f *File, key string, as func(Value) (T, bool)) (T, bool) {
	v, ok := f.Lookup(key)
	if !ok {
		var zero T
		return zero, false
	}
	return as(v)
}

// String returns a string value.
func (f *File) String(key string) (string, bool) { return lookupAs(f, key, Value.Text) }

// Uint returns a non-negative integer value of any integer type.
func (f *File) Uint(key string) (uint64, bool) { return lookupAs(f, key, Value.Uint) }

// Int returns an integer value of any integer type that fits in int64.
func (f *File) Int(key string) (int64, bool) { return lookupAs(f, key, Value.Int) }

// Float returns a floating-point or integer value as float64.
func (f *File) Float(key string) (float64, bool) { return lookupAs(f, key, Value.Float) }

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) { return lookupAs(f, key, Value.Bool) }

// Strings returns an array of strings, such as tokenizer.ggml.tokens.
func (f *File) Strings(key string) ([]string, bool) { return lookupAs(f, key, Value.Strings) }

// Float32s returns an array of floats, such as tokenizer.ggml.scores.
func (f *File) Float32s(key string) ([]float32, bool) { return lookupAs(f, key, Value.Float32s) }

// Int32s returns an array of integers that fit in int32, such as
// tokenizer.ggml.token_type.
func (f *File) Int32s(key string) ([]int32, bool) { return lookupAs(f, key, Value.Int32s) }

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// TensorReader returns a reader over t's raw data, for streaming a large
// tensor without holding it in memory.
func (f *File) TensorReader(t *TensorInfo) *io.SectionReader {
	return io.NewSectionReader(f.r, f.DataOffset+int64(t.Offset), t.Size)
}

// checkTensor guards the data readers against a TensorInfo that did not
// come from this file (or was modified): its data must be where Read
// would have put it, and its size must match its shape.
func (f *File) checkTensor(t *TensorInfo) (elements int64, err error) {
	n := t.Elements()
	if n < 0 {
		return 0, fmt.Errorf("gguf: tensor %q: dimensions %v overflow", t.Name, t.Dims)
	}
	size, err := dtype.Bytes(t.Type, n)
	if err != nil {
		return 0, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	data := uint64(f.size - f.DataOffset)
	if size != t.Size || t.Offset > data || uint64(size) > data-t.Offset {
		return 0, fmt.Errorf("gguf: tensor %q: %d bytes at data offset %d do not fit this file's %d data bytes",
			t.Name, t.Size, t.Offset, data)
	}
	return n, nil
}

// ReadTensor returns t's raw bytes, in the layout of t.Type.
func (f *File) ReadTensor(t *TensorInfo) ([]byte, error) {
	if _, err := f.checkTensor(t); err != nil {
		return nil, err
	}
	return f.readRaw(t)
}

// ReadFloat32 returns t's elements converted to float32, in ggml order
// (Dims[0] varies fastest).
func (f *File) ReadFloat32(t *TensorInfo) ([]float32, error) {
	n, err := f.checkTensor(t)
	if err != nil {
		return nil, err
	}
	raw, err := f.readRaw(t)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	if err := dtype.Dequantize(t.Type, raw, out); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	return out, nil
}

func (f *File) readRaw(t *TensorInfo) ([]byte, error) {
	b := make([]byte, t.Size)
	if err := readAt(f.r, b, f.DataOffset+int64(t.Offset)); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	return b, nil
}
