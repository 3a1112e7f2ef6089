package gguf

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/tessera-llm/tessera/models/dtype"
)

// readTensorInfos reads n tensor infos and returns the offset at which
// each starts, for error messages about checks that can only run once
// all infos are read.
func readTensorInfos(c *cursor, f *File, n int64) ([]int64, error) {
	f.Tensors = make([]TensorInfo, 0, min(n, prealloc))
	f.tensorIndex = make(map[string]int, min(n, prealloc))
	var offsets []int64
	for i := range n {
		offsets = append(offsets, c.off)
		c.item = fmt.Sprintf("tensor info %d", i)
		name, err := c.str("tensor name")
		if err != nil {
			return nil, err
		}
		if name == "" {
			return nil, c.errorf("empty tensor name")
		}
		if j, dup := f.tensorIndex[name]; dup {
			return nil, c.errorf("duplicate tensor name %q (also tensor info %d)", name, j)
		}
		c.item = fmt.Sprintf("tensor %q", name)
		t := TensorInfo{Name: name}
		if err := readTensorShape(c, f, &t); err != nil {
			return nil, err
		}
		f.tensorIndex[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	return offsets, nil
}

// readTensorShape reads a tensor info after its name and checks the shape
// and type: 1 to 4 non-zero dimensions whose product fits in int64, a
// known type, whole blocks per row, and an aligned offset.
func readTensorShape(c *cursor, f *File, t *TensorInfo) error {
	nDims, err := c.u32("dimension count")
	if err != nil {
		return err
	}
	if nDims == 0 || nDims > maxDims {
		return c.errorf("dimension count %d, want 1 to %d", nDims, maxDims)
	}
	t.Dims = make([]uint64, nDims)
	n := int64(1)
	for d := range t.Dims {
		if t.Dims[d], err = c.u64("dimension"); err != nil {
			return err
		}
		dim := t.Dims[d]
		if dim == 0 {
			return c.errorf("dimension %d is zero", d)
		}
		if dim > math.MaxInt64 || n > math.MaxInt64/int64(dim) {
			return c.errorf("dimensions %v: element count overflows int64", t.Dims[:d+1])
		}
		n *= int64(dim)
	}
	typ, err := c.u32("tensor type")
	if err != nil {
		return err
	}
	t.Type = dtype.Type(typ)
	if !t.Type.Known() {
		return c.errorf("unknown tensor type %v", t.Type)
	}
	if bs := uint64(t.Type.BlockSize()); t.Dims[0]%bs != 0 {
		return c.errorf("row length %d is not a multiple of the %v block size %d", t.Dims[0], t.Type, bs)
	}
	if t.Size, err = dtype.Bytes(t.Type, n); err != nil {
		return c.errorf("dimensions %v: %v", t.Dims, err)
	}
	if t.Offset, err = c.u64("data offset"); err != nil {
		return err
	}
	if t.Offset%uint64(f.Alignment) != 0 {
		return c.errorf("data offset %d is not a multiple of the alignment %d", t.Offset, f.Alignment)
	}
	return nil
}

// placeData finds the data section, which starts at the first aligned
// offset after the tensor infos, and checks that every tensor's data lies
// inside the file and that no two tensors overlap.
func placeData(c *cursor, f *File, infoOffsets []int64) error {
	c.item = "data section"
	c.start = c.off
	// In uint64, since off and size may be near MaxInt64 for a reader that
	// claims to be huge.
	a := uint64(f.Alignment)
	start := (uint64(c.off) + a - 1) &^ (a - 1)
	if start > uint64(f.size) {
		return c.errorf("padding to the %d-byte aligned data section at offset %d runs past the end of the file (%d bytes)",
			f.Alignment, start, f.size)
	}
	f.DataOffset = int64(start)
	dataSize := uint64(f.size - f.DataOffset)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset > dataSize || uint64(t.Size) > dataSize-t.Offset {
			return &FormatError{
				Offset: infoOffsets[i], Item: fmt.Sprintf("tensor %q", t.Name),
				Msg: fmt.Sprintf("data [%d, +%d) at absolute offset %d runs past the end of the file (%d bytes)",
					t.Offset, t.Size, f.DataOffset+int64(min(t.Offset, dataSize)), f.size),
			}
		}
	}
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Compare(f.Tensors[a].Offset, f.Tensors[b].Offset)
	})
	for k := 1; k < len(order); k++ {
		prev, cur := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if prev.Offset+uint64(prev.Size) > cur.Offset {
			return &FormatError{
				Offset: infoOffsets[order[k]], Item: fmt.Sprintf("tensor %q", cur.Name),
				Msg: fmt.Sprintf("data [%d, +%d) overlaps tensor %q at [%d, +%d)",
					cur.Offset, cur.Size, prev.Name, prev.Offset, prev.Size),
			}
		}
	}
	return nil
}
