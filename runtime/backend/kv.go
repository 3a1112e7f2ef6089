package backend

import (
	"fmt"
	"strings"
)

// KVType is how a backend stores the keys and values of its cache. Every
// op still computes in f32: a narrower cache is expanded as attention
// reads it, trading accuracy for the bytes a long context holds and reads.
//
// Both backends keep one record per (slot, kv head), so that the scale of
// an int8 record factors out of a head's dot product and out of its share
// of the output (see "KV cache types" in docs/DECISIONS.md).
type KVType uint8

const (
	// KVF32 keeps keys and values as float32.
	KVF32 KVType = iota
	// KVF16 keeps IEEE half floats (round to nearest even, clamped to the
	// finite range): half the bytes of f32.
	KVF16
	// KVInt8 keeps, per (slot, kv head), symmetric int8 codes in
	// -127..127 and one f32 scale (the head's largest magnitude / 127):
	// value = scale·code.
	KVInt8
)

func (t KVType) String() string {
	switch t {
	case KVF32:
		return "f32"
	case KVF16:
		return "f16"
	case KVInt8:
		return "int8"
	}
	return fmt.Sprintf("KVType(%d)", uint8(t))
}

// ParseKVType reads "f32", "f16" or "int8" (any case); "" is f32.
func ParseKVType(name string) (KVType, error) {
	if name == "" {
		return KVF32, nil
	}
	for _, t := range []KVType{KVF32, KVF16, KVInt8} {
		if strings.EqualFold(name, t.String()) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown kv cache type %q (want f32, f16 or int8)", name)
}

// HeadBytes is the size of one head's record of keys or of values at one
// slot, as the WebGPU kernels lay it out: the head padded to a multiple
// of 4 values, and for int8 a 4-byte scale after the codes.
func (t KVType) HeadBytes(headDim int) int64 {
	n := int64((headDim + 3) / 4 * 4)
	switch t {
	case KVF16:
		return 2 * n
	case KVInt8:
		return n + 4
	}
	return 4 * n
}

// KVShape describes a paged cache: for each of Layers layers, Blocks
// blocks of BlockSize slots, each slot holding the keys and the values of
// Heads kv heads of HeadDim, stored as Type.
//
// A Windowed cache holds sliding-window layers only: its blocks are rings,
// one a sequence (Batch.Windows), that keep the positions a window reads
// instead of the whole sequence, and ops reach it through Batch.Windows
// rather than Batch.Tables. Its Blocks need not be the pool's.
//
// The pool's cache of a model whose every layer with keys and values is
// windowed has no layers: it stands for the pool's block tables, which the
// sequences' rings follow, and holds nothing.
type KVShape struct {
	Layers, Blocks, BlockSize int
	Heads, HeadDim            int
	Type                      KVType
	Windowed                  bool
}

// Dim is the width of a row of keys (or values): Heads·HeadDim.
func (s KVShape) Dim() int { return s.Heads * s.HeadDim }

// Bytes is what the cache takes: keys and values of every slot of every
// layer (HeadBytes per head).
func (s KVShape) Bytes() int64 {
	return 2 * int64(s.Layers) * int64(s.Blocks) * int64(s.BlockSize) * int64(s.Heads) * s.Type.HeadBytes(s.HeadDim)
}

// Check reports a shape no cache can have (no layers only for the pool's
// cache beside windowed ones).
func (s KVShape) Check() error {
	if s.Layers < 0 || s.Layers == 0 && s.Windowed || s.Blocks <= 0 || s.BlockSize <= 0 || s.Heads <= 0 || s.HeadDim <= 0 || s.Type > KVInt8 {
		return fmt.Errorf("kv cache of %d layers × %d blocks × %d slots × %d heads × %d (%v)",
			s.Layers, s.Blocks, s.BlockSize, s.Heads, s.HeadDim, s.Type)
	}
	return nil
}
