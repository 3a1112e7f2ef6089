package backend

import (
	"fmt"
	"strings"
)

// Storage is how a backend keeps a weight matrix. Every op still computes
// in f32: compressed weights are expanded on the fly (weight-only
// quantization), so a storage trades accuracy for bytes read per token.
type Storage uint8

const (
	// F32 keeps the values as float32 (after dequantizing the file's type).
	F32 Storage = iota
	// F16 keeps IEEE half floats (two per u32 on the GPU).
	F16
	// Int4 keeps dtype.Int4: 4-bit codes with an f16 scale and min per 32
	// inputs. Q4_0, Q4_1 and Q4_K tensors keep their codes; others are
	// quantized at upload.
	Int4
)

func (s Storage) String() string {
	switch s {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case Int4:
		return "int4"
	}
	return fmt.Sprintf("Storage(%d)", uint8(s))
}

// ParseStorage reads "f32", "f16" or "int4" (any case).
func ParseStorage(name string) (Storage, error) {
	for _, s := range []Storage{F32, F16, Int4} {
		if strings.EqualFold(name, s.String()) {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown weight storage %q (want int4, f16 or f32)", name)
}
