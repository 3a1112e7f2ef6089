//go:build !purego

package kernel

import (
	"unsafe"

	"github.com/tessera-llm/tessera/models/dtype"
)

// The wide kernel's pieces (blocks_wide_amd64.s, and each type's
// expansion from blocks_wide_avx512_amd64.h): expand sixteen weight rows'
// codes of groups groups (each row's codes cstride bytes and scale words
// sstride bytes after the last's) to dst and their scales to dsc.

//go:noescape
func expandQ4_0Wide(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ5_0Wide(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ8_0Wide(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandIQ4_NLWide(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandMXFP4Wide(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func transposeWide(p unsafe.Pointer, n int)

//go:noescape
func dotWideVNNI(w *int32, sc *float32, xq *int16, groups int, acc *float32, mode int, out *float32, ostride int)

// wideKernel says whether DotBlocksWide takes type t on this CPU: the
// types of the eight-row tile kernels, where VPDPWSSD is (its broadcast
// operand brings an activation row's pair of codes to every lane).
func wideKernel(t dtype.Type) bool {
	switch t {
	case dtype.Q4_0, dtype.Q5_0, dtype.Q8_0, dtype.IQ4_NL, dtype.MXFP4:
		return hasVNNI
	}
	return false
}

// wideDirect says whether type t's expansion leaves its codes in their
// final layout (the nibble types), not for transposeWide.
func wideDirect(t dtype.Type) bool {
	return t == dtype.Q4_0 || t == dtype.IQ4_NL || t == dtype.MXFP4
}

func expandWide(t dtype.Type, codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32) {
	switch t {
	case dtype.Q4_0:
		expandQ4_0Wide(codes, scales, cstride, sstride, groups, dst, dsc)
	case dtype.Q5_0:
		expandQ5_0Wide(codes, scales, cstride, sstride, groups, dst, dsc)
	case dtype.Q8_0:
		expandQ8_0Wide(codes, scales, cstride, sstride, groups, dst, dsc)
	case dtype.IQ4_NL:
		expandIQ4_NLWide(codes, scales, cstride, sstride, groups, dst, dsc)
	case dtype.MXFP4:
		expandMXFP4Wide(codes, scales, cstride, sstride, groups, dst, dsc)
	default:
		panic("kernel: no wide expansion for " + t.String())
	}
}
