package dtype

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/x448/float16"
)

// le is the byte order of every multi-byte field in ggml's layouts.
var le = binary.LittleEndian

// f16 reads an IEEE half-precision value, the type of ggml's per-block
// scales.
func f16(b []byte) float32 { return float16.Frombits(le.Uint16(b)).Float32() }

// f16Table maps every half bit pattern to its float32 value. Converting
// whole F16 tensors by lookup is several times faster than by bit
// manipulation; 256 KiB is built on first use only.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = float16.Frombits(uint16(i)).Float32()
	}
	return &t
})

// putF16 stores v as a half, rounding to nearest even like ggml's F16C path.
func putF16(b []byte, v float32) { le.PutUint16(b, float16.Fromfloat32(v).Bits()) }

// bf16ToF32 widens a bfloat16, which is the high half of a float32.
func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32ToBF16 narrows with round-to-nearest-even, as ggml does; NaNs are kept
// quiet rather than rounded, since rounding could turn them into infinities.
func f32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}
