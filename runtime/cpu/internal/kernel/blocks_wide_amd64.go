//go:build !purego

package kernel

import (
	"unsafe"

	"golang.org/x/sys/cpu"

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

// The K quants' expansions (blocks_k_wide_amd64.h): sixteen rows'
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

// The AVX2 forms (blocks_wide_rows_amd64.h, blocks_k_wide_amd64.h and
// blocks_wide_dot_avx2_amd64.h): the same expansions' layouts, turned by
// transposeWideAVX2, and the products with the lanes in acc, with VPMADDWD
// and VPADDD or AVX-VNNI's VPDPWSSD.

//go:noescape
func expandQ4_KWideAVX2(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ5_KWideAVX2(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ6_KWideAVX2(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ2_KWideAVX2(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ3_KWideAVX2(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandIQ4_XSWideAVX2(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ4_0WideAVX2(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ5_0WideAVX2(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandQ8_0WideAVX2(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandIQ4_NLWideAVX2(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func expandMXFP4WideAVX2(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)

//go:noescape
func transposeWideAVX2(p unsafe.Pointer, n int)

//go:noescape
func dotWideAVX2(w *int32, sc *float32, xq *int16, groups int, acc *float32, mode int, out *float32, ostride int)

//go:noescape
func dotWideAVXVNNI(w *int32, sc *float32, xq *int16, groups int, acc *float32, mode int, out *float32, ostride int)

//go:noescape
func dotWideKAVX2(w *int32, sc *float32, xq *int16, xstride int, kd, sums *float32, groups int, acc *float32, mode int, out *float32, ostride int)

//go:noescape
func dotWideKAVXVNNI(w *int32, sc *float32, xq *int16, xstride int, kd, sums *float32, groups int, acc *float32, mode int, out *float32, ostride int)

// wideFormFor is the form of the wide kernel that takes type t on this
// CPU: VNNI's for the types of the eight-row tile kernels and the K
// quants, where VPDPWSSD is (its broadcast operand brings an activation
// row's pair of codes to every lane); AVX2's (with AVX-VNNI's VPDPWSSD
// where the CPU has it) for the same types where there is no AVX-512 at
// all. CPUs with AVX-512 but not VNNI keep the tile kernels.
func wideFormFor(t dtype.Type) wideForm {
	if !wideType(t) {
		return wideNone
	}
	switch {
	case hasVNNI:
		return wideVNNI
	case hasTile || !hasAVX2:
		return wideNone
	case hasAVXVNNI:
		return wideAVXVNNI
	}
	return wideAVX2
}

// wideType says whether the wide kernel has an expansion for type t: the
// types of the eight-row tile kernels and the K quants.
func wideType(t dtype.Type) bool {
	switch t {
	case dtype.Q4_0, dtype.Q5_0, dtype.Q8_0, dtype.IQ4_NL, dtype.MXFP4:
		return true
	}
	return KType(t)
}

// hasAVXVNNI: AVX-VNNI's VEX-encoded VPDPWSSD (Intel's cores from Alder
// Lake on, which have no AVX-512).
var hasAVXVNNI = hasAVX2 && cpu.X86.HasAVXVNNI

// wideForms is the forms this CPU can run, for the tests.
func wideForms() []wideForm {
	var f []wideForm
	if hasVNNI {
		f = append(f, wideVNNI)
	}
	if hasAVX2 {
		f = append(f, wideAVX2)
	}
	if hasAVXVNNI {
		f = append(f, wideAVXVNNI)
	}
	return f
}

// wideTakes says whether form f takes type t on this CPU.
func wideTakes(f wideForm, t dtype.Type) bool {
	switch f {
	case wideVNNI:
		return hasVNNI && wideType(t)
	case wideAVX2:
		return hasAVX2 && wideType(t)
	case wideAVXVNNI:
		return hasAVXVNNI && wideType(t)
	}
	return false
}

// wideDirect says whether type t's expansion leaves its codes in their
// final layout (the nibble types), not for transposeWide.
func wideDirect(t dtype.Type) bool {
	return t == dtype.Q4_0 || t == dtype.IQ4_NL || t == dtype.MXFP4
}

func expandWide(f wideForm, t dtype.Type, codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32) {
	if f.avx2() {
		switch t {
		case dtype.Q4_0:
			expandQ4_0WideAVX2(codes, scales, cstride, sstride, groups, dst, dsc)
		case dtype.Q5_0:
			expandQ5_0WideAVX2(codes, scales, cstride, sstride, groups, dst, dsc)
		case dtype.Q8_0:
			expandQ8_0WideAVX2(codes, scales, cstride, sstride, groups, dst, dsc)
		case dtype.IQ4_NL:
			expandIQ4_NLWideAVX2(codes, scales, cstride, sstride, groups, dst, dsc)
		case dtype.MXFP4:
			expandMXFP4WideAVX2(codes, scales, cstride, sstride, groups, dst, dsc)
		default:
			panic("kernel: no wide expansion for " + t.String())
		}
		return
	}
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
func expandKWide(f wideForm, t dtype.Type, codes, scales *uint32, G, g0, cstride, sstride, groups int, dst *int32, dsc *float32) {
	l, _ := dtype.Layout(t)
	b, nb := g0/kGroups, G/kGroups
	at, split := b*l.ScaleBytes, 0
	if l.Split {
		at = 2 * b
		split = 2*nb + (l.ScaleBytes-2)*b - at // its factors: ScaleBytes-2 a super-block after the row's d's
	}
	if f.avx2() {
		switch t {
		case dtype.Q4_K:
			expandQ4_KWideAVX2(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
		case dtype.Q5_K:
			expandQ5_KWideAVX2(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
		case dtype.Q6_K:
			expandQ6_KWideAVX2(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
		case dtype.IQ4_XS:
			expandIQ4_XSWideAVX2(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
		case dtype.Q3_K:
			expandQ3_KWideAVX2(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
		case dtype.Q2_K:
			expandQ2_KWideAVX2(codes, scales, at, split, cstride, sstride, groups, dst, dsc)
		default:
			panic("kernel: no wide expansion for " + t.String())
		}
		return
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

// transposeWideOf is transposeWide in form f's instructions.
func transposeWideOf(f wideForm, p unsafe.Pointer, n int) {
	if f.avx2() {
		transposeWideAVX2(p, n)
		return
	}
	transposeWide(p, n)
}

// dotWide is form f's product of the expanded rows of the types of a
// scale a group (AVX2's always carries its lanes in acc).
func dotWide(f wideForm, w *int32, sc *float32, xq *int16, groups int, acc *float32, mode int, out *float32, ostride int) {
	switch f {
	case wideAVX2:
		dotWideAVX2(w, sc, xq, groups, acc, mode, out, ostride)
	case wideAVXVNNI:
		dotWideAVXVNNI(w, sc, xq, groups, acc, mode, out, ostride)
	default:
		dotWideVNNI(w, sc, xq, groups, acc, mode, out, ostride)
	}
}

// dotWideK is form f's product of the K quants' expanded rows (AVX2's
// always carries its lanes in acc).
func dotWideK(f wideForm, w *int32, sc *float32, xq *int16, xstride int, kd, sums *float32, groups int, acc *float32, mode int, out *float32, ostride int) {
	switch f {
	case wideAVX2:
		dotWideKAVX2(w, sc, xq, xstride, kd, sums, groups, acc, mode, out, ostride)
	case wideAVXVNNI:
		dotWideKAVXVNNI(w, sc, xq, xstride, kd, sums, groups, acc, mode, out, ostride)
	default:
		dotWideKVNNI(w, sc, xq, xstride, kd, sums, groups, acc, mode, out, ostride)
	}
}
