// Package dtype describes the element types that model tensors are stored
// in and converts them to float32.
//
// The numeric values of Type are ggml's ggml_type ids and the byte layouts
// of the quantized types are exactly ggml's, so a tensor read from a GGUF
// file can be handed to these functions without any re-packing.
package dtype

import (
	"fmt"
	"math"
)

// Type is a tensor element type. Its values equal ggml's ggml_type ids,
// because GGUF stores tensor types as those ids.
type Type uint32

// The element types known to this package. Gaps in the numbering (4 and 5
// were Q4_2 and Q4_3; 16..19, 21, 22, 29, 34 and 35 are the IQ and ternary
// types of 1 to 3 bits; 31..33 and 36..38 were repacked variants) are
// types that ggml defines but this package does not handle.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q8_1 Type = 9
	Q2_K Type = 10
	Q3_K Type = 11
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	Q8_K Type = 15
	// IQ4_NL is 4-bit codes into a fixed non-linear codebook of 16 int8
	// levels (kvaluesIQ4NL), an f16 scale per 32 values: 4.5 bits.
	IQ4_NL Type = 20
	// IQ4_XS is IQ4_NL's codebook in 256-value super-blocks: an f16 scale
	// and a 6-bit factor per 32 values: 4.25 bits.
	IQ4_XS Type = 23
	I8     Type = 24
	I16    Type = 25
	I32    Type = 26
	I64    Type = 27
	F64    Type = 28
	BF16   Type = 30
	// MXFP4 is the OCP microscaling format gpt-oss ships its experts in:
	// 4-bit floats (E2M1) with a shared power-of-two scale (E8M0) per 32
	// values: 4.25 bits.
	MXFP4 Type = 39
)

// Block sizes shared by the quantized formats: the legacy formats pack 32
// elements per block, the K quants 256 per super-block.
const (
	qk  = 32
	qkK = 256
)

// traits describes one type. A zero blockSize marks an unknown type.
type traits struct {
	name       string
	blockSize  int
	blockBytes int
	// dequant converts whole blocks: len(src) == blocks*blockBytes and
	// len(dst) == blocks*blockSize.
	dequant func(src []byte, dst []float32)
}

var typeTraits = [...]traits{
	F32:    {"F32", 1, 4, dequantF32},
	F16:    {"F16", 1, 2, dequantF16},
	Q4_0:   {"Q4_0", qk, 2 + qk/2, dequantQ4_0},
	Q4_1:   {"Q4_1", qk, 4 + qk/2, dequantQ4_1},
	Q5_0:   {"Q5_0", qk, 2 + 4 + qk/2, dequantQ5_0},
	Q5_1:   {"Q5_1", qk, 4 + 4 + qk/2, dequantQ5_1},
	Q8_0:   {"Q8_0", qk, 2 + qk, dequantQ8_0},
	Q8_1:   {"Q8_1", qk, 4 + qk, dequantQ8_1},
	Q2_K:   {"Q2_K", qkK, qkK/16 + qkK/4 + 4, dequantQ2K},
	Q3_K:   {"Q3_K", qkK, qkK/8 + qkK/4 + 12 + 2, dequantQ3K},
	Q4_K:   {"Q4_K", qkK, 4 + 12 + qkK/2, dequantQ4K},
	Q5_K:   {"Q5_K", qkK, 4 + 12 + qkK/8 + qkK/2, dequantQ5K},
	Q6_K:   {"Q6_K", qkK, qkK/2 + qkK/4 + qkK/16 + 2, dequantQ6K},
	Q8_K:   {"Q8_K", qkK, 4 + qkK + 2*qkK/16, dequantQ8K},
	I8:     {"I8", 1, 1, dequantI8},
	I16:    {"I16", 1, 2, dequantI16},
	I32:    {"I32", 1, 4, dequantI32},
	I64:    {"I64", 1, 8, dequantI64},
	F64:    {"F64", 1, 8, dequantF64},
	BF16:   {"BF16", 1, 2, dequantBF16},
	IQ4_NL: {"IQ4_NL", qk, 2 + qk/2, dequantIQ4NL},
	IQ4_XS: {"IQ4_XS", qkK, 2 + 2 + qkK/64 + qkK/2, dequantIQ4XS},
	MXFP4:  {"MXFP4", qk, 1 + qk/2, dequantMXFP4},
}

func (t Type) traits() traits {
	if int64(t) < int64(len(typeTraits)) {
		return typeTraits[t]
	}
	return traits{}
}

// String returns ggml's name for the type, or "type(N)" for an unknown one.
func (t Type) String() string {
	if tr := t.traits(); tr.blockSize != 0 {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Known reports whether this package knows the type's layout.
func (t Type) Known() bool { return t.traits().blockSize != 0 }

// BlockSize returns the number of elements per block: 1 for plain types,
// 32 for the legacy quants, 256 for the K quants, 0 for unknown types.
func (t Type) BlockSize() int { return t.traits().blockSize }

// BlockBytes returns the number of bytes per block, 0 for unknown types.
func (t Type) BlockBytes() int { return t.traits().blockBytes }

// Bytes returns the storage size of n elements of type t. It fails for an
// unknown type, a negative n, an n that does not fill whole blocks, and a
// size that overflows int64, so that callers sizing buffers from untrusted
// shapes get an error instead of a wrapped-around number.
func Bytes(t Type, n int64) (int64, error) {
	tr := t.traits()
	switch {
	case tr.blockSize == 0:
		return 0, fmt.Errorf("dtype: unknown tensor type %v", t)
	case n < 0:
		return 0, fmt.Errorf("dtype: negative element count %d", n)
	case n%int64(tr.blockSize) != 0:
		return 0, fmt.Errorf("dtype: %d elements of %v is not a whole number of %d-element blocks", n, t, tr.blockSize)
	}
	blocks := n / int64(tr.blockSize)
	if blocks > math.MaxInt64/int64(tr.blockBytes) {
		return 0, fmt.Errorf("dtype: %d elements of %v overflow int64 bytes", n, t)
	}
	return blocks * int64(tr.blockBytes), nil
}

// Dequantize converts the first len(dst) elements stored in src to float32.
// len(dst) must be a whole number of blocks and src must hold at least that
// many blocks; extra bytes in src are ignored so that callers can pass a
// larger buffer and convert a prefix of it.
func Dequantize(t Type, src []byte, dst []float32) error {
	tr := t.traits()
	if tr.dequant == nil {
		return fmt.Errorf("dtype: dequantize: unsupported tensor type %v", t)
	}
	need, err := Bytes(t, int64(len(dst)))
	if err != nil {
		return err
	}
	if int64(len(src)) < need {
		return fmt.Errorf("dtype: dequantize %d elements of %v: need %d bytes, have %d", len(dst), t, need, len(src))
	}
	tr.dequant(src[:need], dst)
	return nil
}

// FormatBytes writes n bytes with a binary unit: "512 B", "32 KiB", "2.0
// GiB". It lives in this leaf, beside the types' sizes, so that the
// backends, the engine and the CLI report memory alike.
func FormatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), units[u])
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
