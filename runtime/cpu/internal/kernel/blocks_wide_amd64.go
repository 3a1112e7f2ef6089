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

// The K quants' expansions (blocks_k_wide_avx512_amd64.h): sixteen rows'
// codes and super-blocks' factors, mins and d of groups groups (whole
// super-blocks), each row's decoding from byte at of its scale words
// (and the split types' factors, Q6_K's and Q3_K's, split bytes after that).

//go:noescape
func expandQ4_KWide(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ5_KWide(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ6_KWide(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ2_KWide(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ3_KWide(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandIQ4_XSWide(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func dotWideKVNNI(w *int32, sc *float32, xq *int16, xstride int, kd, sums *float32, groups int, acc *float32, mode int, out *float32, ostride int)

// wideKernel says whether DotBlocksWide takes type t on this CPU: the
// types of the eight-row tile kernels, where VPDPWSSD is (its broadcast
// operand brings an activation row's pair of codes to every lane).
func wideKernel(t dtype.Type) bool {
	switch t {
	case dtype.Q4_0, dtype.Q5_0, dtype.Q8_0, dtype.IQ4_NL, dtype.MXFP4,
		dtype.Q2_K, dtype.Q3_K, dtype.Q4_K, dtype.Q5_K, dtype.Q6_K, dtype.IQ4_XS:
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

// expandKWide is expandWide for the K quants: groups groups from group g0
// of rows of G groups, each row's scale words decoded from its super-block
// g0/8 (Q6_K, Q3_K: its d's, then its factors after all the row's d's).
func expandKWide(t dtype.Type, codes, scales *uint32, G, g0, cstride, sstride, groups int, dst *int32, dsc *float32) {
	l, _ := dtype.Layout(t)
	b, nb := g0/kGroups, G/kGroups
	at, split := b*l.ScaleBytes, 0
	if l.Split {
		at = 2 * b
		split = 2*nb + (l.ScaleBytes-2)*b - at // its factors: ScaleBytes-2 a super-block after the row's d's
	}
	switch t {
	case dtype.Q4_K:
		expandQ4_KWide(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
	case dtype.Q5_K:
		expandQ5_KWide(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
	case dtype.Q6_K:
		expandQ6_KWide(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
	case dtype.IQ4_XS:
		expandIQ4_XSWide(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
	case dtype.Q3_K:
		expandQ3_KWide(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
	case dtype.Q2_K:
		expandQ2_KWide(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
	default:
		panic("kernel: no wide expansion for " + t.String())
	}
}
