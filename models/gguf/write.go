package gguf

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/tessera-llm/tessera/models/dtype"
)

// WriteTensor is a tensor to write: its shape in ggml order (Dims[0] is
// the row length), its type, and its data already in that type's layout.
type WriteTensor struct {
	Name string
	Dims []uint64
	Type dtype.Type
	Data []byte
}

// Write writes a GGUF version 3 file holding kv, in the given order, and
// tensors, whose data is laid out in the given order. The data section
// and every tensor in it are aligned to general.alignment if kv sets it
// (as a uint32 power of two), else to 32 bytes, as ggml expects.
//
// Everything is validated before the first byte is written, so an invalid
// argument never leaves a partial file behind in w.
func Write(w io.Writer, kv []KV, tensors []WriteTensor) error {
	align, offsets, err := layout(kv, tensors, true)
	if err != nil {
		return err
	}
	ew := &errWriter{w: bufio.NewWriter(w)}
	writeHeader(ew, kv, tensors, offsets, align)
	for _, t := range tensors {
		ew.bytes(t.Data)
		ew.pad(align)
	}
	if ew.err == nil {
		ew.err = ew.w.Flush()
	}
	if ew.err != nil {
		return fmt.Errorf("gguf: write: %w", ew.err)
	}
	return nil
}

// Header is the start of the file Write would write for kv and tensors,
// up to its data section, for a writer that fills each tensor's data in
// place afterwards (a model too large to hold in memory, drawn or
// converted piece by piece): the header bytes (padded to the alignment),
// each tensor's data offset from the start of the file, the alignment
// that pads each tensor's data, and the whole file's size. The tensors'
// Data is not read (it may be nil); their sizes come from their dims and
// types. A file whose data sections are then written at those offsets,
// with zeros in the padding, is byte for byte what Write writes.
func Header(kv []KV, tensors []WriteTensor) (header []byte, offsets []int64, align, size int64, err error) {
	align, rel, err := layout(kv, tensors, false)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	var buf bytes.Buffer
	ew := &errWriter{w: bufio.NewWriter(&buf)}
	writeHeader(ew, kv, tensors, rel, align)
	if ew.err == nil {
		ew.err = ew.w.Flush()
	}
	if ew.err != nil {
		return nil, nil, 0, 0, fmt.Errorf("gguf: header: %w", ew.err)
	}
	start := int64(buf.Len())
	offsets = make([]int64, len(tensors))
	size = start
	for i, t := range tensors {
		n, _ := dataBytes(t) // checked by layout
		offsets[i] = start + int64(rel[i])
		size = offsets[i] + (n+align-1)&^(align-1)
	}
	return buf.Bytes(), offsets, align, size, nil
}

// layout validates kv and tensors and returns the alignment and the
// tensors' data offsets within the data section; withData checks that
// each tensor's Data is its size.
func layout(kv []KV, tensors []WriteTensor, withData bool) (int64, []uint64, error) {
	align, err := checkMetadata(kv)
	if err != nil {
		return 0, nil, err
	}
	offsets, err := layoutTensors(tensors, align, withData)
	if err != nil {
		return 0, nil, err
	}
	return align, offsets, nil
}

// writeHeader writes the magic, version, counts, metadata and tensor
// infos, and pads to the data section.
func writeHeader(ew *errWriter, kv []KV, tensors []WriteTensor, offsets []uint64, align int64) {
	ew.bytes([]byte(magic))
	ew.u32(3)
	ew.u64(uint64(len(tensors)))
	ew.u64(uint64(len(kv)))
	for _, e := range kv {
		ew.str(e.Key)
		ew.u32(uint32(e.Value.typ))
		writeValue(ew, e.Value)
	}
	for i, t := range tensors {
		ew.str(t.Name)
		ew.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			ew.u64(d)
		}
		ew.u32(uint32(t.Type))
		ew.u64(offsets[i])
	}
	ew.pad(align)
}

// checkMetadata validates keys and values and returns the alignment.
func checkMetadata(kv []KV) (int64, error) {
	align := int64(defaultAlignment)
	seen := make(map[string]bool, len(kv))
	for i, e := range kv {
		if e.Key == "" {
			return 0, fmt.Errorf("gguf: write: metadata entry %d has an empty key", i)
		}
		if seen[e.Key] {
			return 0, fmt.Errorf("gguf: write: duplicate key %q", e.Key)
		}
		seen[e.Key] = true
		if err := checkValue(e.Value, 0); err != nil {
			return 0, fmt.Errorf("gguf: write: key %q: %w", e.Key, err)
		}
		if e.Key == alignmentKey {
			a, _ := e.Value.Uint()
			if e.Value.typ != TypeUint32 || a == 0 || a&(a-1) != 0 {
				return 0, fmt.Errorf("gguf: write: %s must be a uint32 power of two, got %v %v",
					alignmentKey, e.Value.typ, e.Value)
			}
			align = int64(a)
		}
	}
	return align, nil
}

// checkValue rejects what the reader would reject: arrays of arrays whose
// elements are not arrays, or that nest too deeply to be read back.
func checkValue(v Value, depth int) error {
	if v.typ != TypeArray {
		return nil
	}
	if depth >= maxNesting {
		return fmt.Errorf("arrays nested more than %d deep", maxNesting)
	}
	elems, ok := v.ref.([]Value)
	if !ok {
		return nil
	}
	for i, e := range elems {
		if e.typ != TypeArray {
			return fmt.Errorf("element %d of an array of arrays is a %v", i, e.typ)
		}
		if err := checkValue(e, depth+1); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	return nil
}

// layoutTensors validates the tensors and returns their data offsets:
// in order, each starting at the next multiple of align. withData checks
// each tensor's Data against the size its dims and type give.
func layoutTensors(tensors []WriteTensor, align int64, withData bool) ([]uint64, error) {
	offsets := make([]uint64, len(tensors))
	seen := make(map[string]bool, len(tensors))
	var off uint64
	for i, t := range tensors {
		if t.Name == "" {
			return nil, fmt.Errorf("gguf: write: tensor %d has an empty name", i)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("gguf: write: duplicate tensor name %q", t.Name)
		}
		seen[t.Name] = true
		size, err := dataBytes(t)
		if err == nil && withData && int64(len(t.Data)) != size {
			err = fmt.Errorf("%d bytes of data, want %d for %v %v", len(t.Data), size, t.Dims, t.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("gguf: write: tensor %q: %w", t.Name, err)
		}
		offsets[i] = off
		off += uint64(size+align-1) &^ uint64(align-1)
	}
	return offsets, nil
}

// dataBytes checks t's dims and type and returns the size of its data.
func dataBytes(t WriteTensor) (int64, error) {
	if len(t.Dims) == 0 || len(t.Dims) > maxDims {
		return 0, fmt.Errorf("%d dimensions, want 1 to %d", len(t.Dims), maxDims)
	}
	if !t.Type.Known() {
		return 0, fmt.Errorf("unknown tensor type %v", t.Type)
	}
	n := uint64(1)
	for _, d := range t.Dims {
		hi, lo := bits.Mul64(n, d)
		if d == 0 || hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("dimensions %v: zero or overflowing", t.Dims)
		}
		n = lo
	}
	if bs := uint64(t.Type.BlockSize()); t.Dims[0]%bs != 0 {
		return 0, fmt.Errorf("row length %d is not a multiple of the %v block size %d", t.Dims[0], t.Type, bs)
	}
	return dtype.Bytes(t.Type, int64(n))
}

func writeValue(w *errWriter, v Value) {
	switch v.typ {
	case TypeUint8, TypeInt8, TypeBool:
		w.bytes([]byte{byte(v.bits)})
	case TypeUint16, TypeInt16:
		w.u16(uint16(v.bits))
	case TypeUint32, TypeInt32, TypeFloat32:
		w.u32(uint32(v.bits))
	case TypeUint64, TypeInt64, TypeFloat64:
		w.u64(v.bits)
	case TypeString:
		s, _ := v.Text()
		w.str(s)
	case TypeArray:
		// An array is its element type, its length, and its elements;
		// elements that are arrays carry no type tag of their own.
		w.u32(uint32(v.ElemType()))
		w.u64(uint64(v.Len()))
		if elems, ok := v.ref.([]Value); ok {
			for _, e := range elems {
				writeValue(w, e)
			}
			return
		}
		for i := range v.Len() {
			writeValue(w, v.Index(i))
		}
	}
}

// errWriter writes little-endian fields, keeping the first error and the
// byte count (which decides the padding).
type errWriter struct {
	w   *bufio.Writer
	n   int64
	err error
	tmp [8]byte
}

func (w *errWriter) bytes(b []byte) {
	if w.err != nil {
		return
	}
	var n int
	n, w.err = w.w.Write(b)
	w.n += int64(n)
}

func (w *errWriter) u16(v uint16) { le.PutUint16(w.tmp[:], v); w.bytes(w.tmp[:2]) }
func (w *errWriter) u32(v uint32) { le.PutUint32(w.tmp[:], v); w.bytes(w.tmp[:4]) }
func (w *errWriter) u64(v uint64) { le.PutUint64(w.tmp[:], v); w.bytes(w.tmp[:8]) }

func (w *errWriter) str(s string) {
	w.u64(uint64(len(s)))
	if w.err == nil {
		var n int
		n, w.err = w.w.WriteString(s)
		w.n += int64(n)
	}
}

// pad writes zeros up to the next multiple of align.
func (w *errWriter) pad(align int64) {
	if k := (align - w.n%align) % align; k > 0 {
		w.bytes(make([]byte, k))
	}
}
