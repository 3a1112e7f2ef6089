package gguf

import (
	"fmt"
	"io"
	"math"
	"math/bits"
)

const (
	magic            = "GGUF"
	defaultAlignment = 32
	alignmentKey     = "general.alignment"
	maxDims          = 4  // GGML_MAX_DIMS
	maxNesting       = 16 // arrays of arrays deeper than this are refused
)

// prealloc caps the capacity reserved up front for a counted list. Counts
// are already bounded by the file size, but a reader that overstates its
// size would otherwise make them meaningless; growing past this by append
// keeps memory proportional to the bytes actually read.
const prealloc = 1024

// Minimum encoded sizes, used to bound the counts in the header: a
// metadata entry is a key (length + at least one byte), a type tag and at
// least a one-byte value; a tensor info is a name (length + one byte), a
// dimension count, at least one dimension, a type and an offset.
const (
	minKVBytes     = 8 + 1 + 4 + 1
	minTensorBytes = 8 + 1 + 4 + 8 + 4 + 8
)

// Read parses the header, metadata and tensor infos of the GGUF file held
// by r, which is size bytes long, and checks that every tensor's data lies
// inside the file without overlapping another. Tensor data is read only
// when asked for. Every length and count is checked against the bytes left
// in the file before anything is allocated for it, so a corrupt or hostile
// file costs at most a small multiple of its own size in memory.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("gguf: negative file size %d", size)
	}
	c := &cursor{r: r, size: size}
	f := &File{r: r, size: size, Alignment: defaultAlignment}
	nTensors, nKV, err := readHeader(c, f)
	if err != nil {
		return nil, err
	}
	if err := readMetadata(c, f, nKV); err != nil {
		return nil, err
	}
	infoOffsets, err := readTensorInfos(c, f, nTensors)
	if err != nil {
		return nil, err
	}
	if err := placeData(c, f, infoOffsets); err != nil {
		return nil, err
	}
	return f, nil
}

func readHeader(c *cursor, f *File) (nTensors, nKV int64, err error) {
	c.item = "header"
	b, err := c.next(4, "magic")
	if err != nil {
		return 0, 0, err
	}
	if string(b) != magic {
		// Not the bytes themselves: whoever names a file the reader
		// refuses (a server's client) must not learn what it begins with.
		return 0, 0, c.errorf("bad magic: not a GGUF file (it does not begin with %q)", magic)
	}
	if f.Version, err = c.u32("version"); err != nil {
		return 0, 0, err
	}
	switch v := f.Version; {
	case v == 2 || v == 3:
	case v == 1:
		return 0, 0, c.errorf("GGUF version 1 is not supported (it predates 64-bit counts); convert the file to version 3")
	case bits.ReverseBytes32(v) == 2 || bits.ReverseBytes32(v) == 3:
		return 0, 0, c.errorf("big-endian GGUF files are not supported")
	default:
		return 0, 0, c.errorf("unsupported GGUF version %d (want 2 or 3)", v)
	}
	if nTensors, err = c.count("tensor count", minTensorBytes); err != nil {
		return 0, 0, err
	}
	if nKV, err = c.count("metadata count", minKVBytes); err != nil {
		return 0, 0, err
	}
	// Each count was bounded alone; together they must fit too.
	if need := nTensors*minTensorBytes + nKV*minKVBytes; need > c.remaining() {
		return 0, 0, c.errorf("%d tensors and %d metadata entries need at least %d bytes, only %d are left",
			nTensors, nKV, need, c.remaining())
	}
	return nTensors, nKV, nil
}

func readMetadata(c *cursor, f *File, n int64) error {
	f.KV = make([]KV, 0, min(n, prealloc))
	f.kvIndex = make(map[string]int, min(n, prealloc))
	for i := range n {
		c.item = fmt.Sprintf("metadata entry %d", i)
		key, err := c.str("key")
		if err != nil {
			return err
		}
		if key == "" {
			return c.errorf("empty key")
		}
		if j, dup := f.kvIndex[key]; dup {
			return c.errorf("duplicate key %q (also metadata entry %d)", key, j)
		}
		c.item = fmt.Sprintf("key %q", key)
		t, err := c.u32("value type")
		if err != nil {
			return err
		}
		v, err := readValue(c, ValueType(t), 0)
		if err != nil {
			return err
		}
		if key == alignmentKey {
			if err := setAlignment(c, f, v); err != nil {
				return err
			}
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	return nil
}

// setAlignment applies general.alignment. The spec makes it a uint32;
// other integer types are accepted since the value is what matters.
func setAlignment(c *cursor, f *File, v Value) error {
	a, ok := v.Uint()
	if !ok || a == 0 || a&(a-1) != 0 || a > math.MaxUint32 {
		return c.errorf("alignment must be a power of two that fits in uint32, got %v %v", v.Type(), v)
	}
	f.Alignment = int64(a)
	return nil
}

// readValue reads a value of type t; depth counts enclosing arrays.
func readValue(c *cursor, t ValueType, depth int) (Value, error) {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		b, err := c.u8(t.String())
		if err != nil {
			return Value{}, err
		}
		if t == TypeBool && b > 1 {
			return Value{}, c.errorf("invalid bool byte %#x", b)
		}
		if t == TypeInt8 {
			return Int8Value(int8(b)), nil
		}
		return Value{typ: t, bits: uint64(b)}, nil
	case TypeUint16, TypeInt16:
		x, err := c.u16(t.String())
		if t == TypeInt16 {
			return Int16Value(int16(x)), err
		}
		return Uint16Value(x), err
	case TypeUint32, TypeInt32, TypeFloat32:
		x, err := c.u32(t.String())
		if t == TypeInt32 {
			return Int32Value(int32(x)), err
		}
		return Value{typ: t, bits: uint64(x)}, err
	case TypeUint64, TypeInt64, TypeFloat64:
		x, err := c.u64(t.String())
		return Value{typ: t, bits: x}, err
	case TypeString:
		s, err := c.str("string")
		return StringValue(s), err
	case TypeArray:
		return readArray(c, depth)
	}
	return Value{}, c.errorf("unknown value type %d", uint32(t))
}

func readArray(c *cursor, depth int) (Value, error) {
	if depth >= maxNesting {
		return Value{}, c.errorf("arrays nested more than %d deep", maxNesting)
	}
	et, err := c.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	t := ValueType(et)
	if !t.valid() {
		return Value{}, c.errorf("unknown array element type %d", et)
	}
	n, err := c.count(fmt.Sprintf("%v array length", t), t.minSize())
	if err != nil {
		return Value{}, err
	}
	var elems any
	switch t {
	case TypeUint8:
		elems, err = readFixed(c, n, 1, func(b []byte) uint8 { return b[0] })
	case TypeInt8:
		elems, err = readFixed(c, n, 1, func(b []byte) int8 { return int8(b[0]) })
	case TypeUint16:
		elems, err = readFixed(c, n, 2, le.Uint16)
	case TypeInt16:
		elems, err = readFixed(c, n, 2, func(b []byte) int16 { return int16(le.Uint16(b)) })
	case TypeUint32:
		elems, err = readFixed(c, n, 4, le.Uint32)
	case TypeInt32:
		elems, err = readFixed(c, n, 4, func(b []byte) int32 { return int32(le.Uint32(b)) })
	case TypeFloat32:
		elems, err = readFixed(c, n, 4, func(b []byte) float32 { return math.Float32frombits(le.Uint32(b)) })
	case TypeUint64:
		elems, err = readFixed(c, n, 8, le.Uint64)
	case TypeInt64:
		elems, err = readFixed(c, n, 8, func(b []byte) int64 { return int64(le.Uint64(b)) })
	case TypeFloat64:
		elems, err = readFixed(c, n, 8, func(b []byte) float64 { return math.Float64frombits(le.Uint64(b)) })
	case TypeBool:
		elems, err = readBools(c, n)
	case TypeString:
		elems, err = readElems(n, func() (string, error) { return c.str("string") })
	case TypeArray:
		elems, err = readElems(n, func() (Value, error) { return readArray(c, depth+1) })
	}
	if err != nil {
		return Value{}, err
	}
	return Value{typ: TypeArray, ref: elems}, nil
}

// readFixed reads n fixed-size elements, a buffer's worth at a time.
func readFixed[T any](c *cursor, n int64, size int, decode func([]byte) T) ([]T, error) {
	out := make([]T, 0, min(n, prealloc))
	perChunk := int64(bufSize / size)
	for int64(len(out)) < n {
		k := min(n-int64(len(out)), perChunk)
		b, err := c.next(k*int64(size), "array")
		if err != nil {
			return nil, err
		}
		for j := range k {
			out = append(out, decode(b[j*int64(size):]))
		}
	}
	return out, nil
}

func readBools(c *cursor, n int64) ([]bool, error) {
	raw, err := readFixed(c, n, 1, func(b []byte) uint8 { return b[0] })
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(raw))
	for i, b := range raw {
		if b > 1 {
			return nil, c.errorf("invalid bool byte %#x in array element %d", b, i)
		}
		out[i] = b == 1
	}
	return out, nil
}

func readElems[T any](n int64, read func() (T, error)) ([]T, error) {
	out := make([]T, 0, min(n, prealloc))
	for range n {
		v, err := read()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
