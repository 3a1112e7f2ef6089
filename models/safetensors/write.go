package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
)

// WriteTensor is a tensor to write: its dtype, its shape (outermost first)
// and its data, already in that dtype's little-endian layout.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Write writes a safetensors file holding tensors, laid out in the given
// order, with metadata (which may be nil) as __metadata__. The header lists
// the metadata first, then the tensors in order, and is padded with spaces
// so that the data starts at a multiple of 8 bytes, as the reference
// writer does.
//
// Everything is validated before the first byte is written, so an invalid
// argument never leaves a partial file behind in w.
func Write(w io.Writer, metadata map[string]string, tensors []WriteTensor) error {
	hdr, err := encodeHeader(metadata, tensors)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(hdr)))
	bw.Write(lenBuf[:])
	bw.Write(hdr)
	for _, t := range tensors {
		bw.Write(t.Data)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

// encodeHeader checks the tensors and returns the padded JSON header.
func encodeHeader(metadata map[string]string, tensors []WriteTensor) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	str := func(s string) {
		j, _ := json.Marshal(s) // strings always marshal
		b.Write(j)
	}
	sep := ""
	if metadata != nil {
		str(metadataKey)
		b.WriteByte(':')
		j, err := json.Marshal(metadata) // keys sorted: the output is deterministic
		if err != nil {
			return nil, fmt.Errorf("safetensors: write: metadata: %w", err)
		}
		b.Write(j)
		sep = ","
	}
	seen := make(map[string]bool, len(tensors))
	var off int64
	for i, t := range tensors {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("safetensors: write: tensor %d has an empty name", i)
		case t.Name == metadataKey:
			return nil, fmt.Errorf("safetensors: write: a tensor cannot be called %s", metadataKey)
		case seen[t.Name]:
			return nil, fmt.Errorf("safetensors: write: duplicate tensor %q", t.Name)
		case t.DType.Size() == 0:
			return nil, fmt.Errorf("safetensors: write: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		seen[t.Name] = true
		elems := int64(1)
		for _, d := range t.Shape {
			if d < 0 || (d != 0 && elems > math.MaxInt64/int64(d)) {
				return nil, fmt.Errorf("safetensors: write: tensor %q: invalid shape %v", t.Name, t.Shape)
			}
			elems *= int64(d)
		}
		if elems > math.MaxInt64/t.DType.Size() || int64(len(t.Data)) != elems*t.DType.Size() {
			return nil, fmt.Errorf("safetensors: write: tensor %q: %d bytes of data for shape %v of %s", t.Name, len(t.Data), t.Shape, t.DType)
		}
		b.WriteString(sep)
		sep = ","
		str(t.Name)
		fmt.Fprintf(&b, `:{"dtype":"%s","shape":[`, t.DType)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, d)
		}
		end := off + int64(len(t.Data))
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	b.WriteByte('}')
	for (8+b.Len())%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > MaxHeaderSize {
		return nil, fmt.Errorf("safetensors: write: header of %d bytes exceeds %d", b.Len(), MaxHeaderSize)
	}
	return slices.Clip(b.Bytes()), nil
}
