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
	// Int8 keeps dtype.Int8: 8-bit codes with an f16 scale and min per 16
	// inputs. Q8_0, Q5_0, Q5_1, Q5_K and Q6_K tensors keep their codes;
	// others are quantized at upload.
	Int8
	// Blocks keeps dtype.Blocks: a quantized tensor's own GGUF block type
	// at the file's bits, repacked (Q4_K, Q6_K, IQ4_XS, MXFP4, ...; see
	// dtype.BlockTypes). Its width is the type's: a fused weight keeps each
	// matrix in its own type. It is no storage to convert to, so neither
	// Storages nor ParseStorage lists it.
	Blocks
)

// Storages lists every storage to convert to, from the narrowest to the
// widest.
var Storages = []Storage{Int4, Int8, F16, F32}

// Wider reports whether s keeps more precision than o (in the order of
// Storages): the storage of a fused weight is the widest of its parts'.
func (s Storage) Wider(o Storage) bool { return s.rank() > o.rank() }

func (s Storage) rank() int {
	switch s {
	case Int4:
		return 0
	case Blocks: // 2 to 8.5 bits a value: between int4's 5 and int8's 10 for most
		return 1
	case Int8:
		return 2
	case F16:
		return 3
	}
	return 4
}

func (s Storage) String() string {
	switch s {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case Int4:
		return "int4"
	case Int8:
		return "int8"
	case Blocks:
		return "blocks"
	}
	return fmt.Sprintf("Storage(%d)", uint8(s))
}

// ParseStorage reads "f32", "f16", "int8" or "int4" (any case).
func ParseStorage(name string) (Storage, error) {
	for _, s := range Storages {
		if strings.EqualFold(name, s.String()) {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown weight storage %q (want int4, int8, f16 or f32)", name)
}
