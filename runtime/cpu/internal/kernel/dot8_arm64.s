//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// The NEON twin of dotQ8Go's whole groups, as dotQ8AVX2 computes them: per
// group of 16, its code bytes widened to four 4-lane int32 vectors (UXTL,
// UXTL2 twice), converted, multiplied with inputs 0..3, 4..7, 8..11 and
// 12..15, and the products of inputs k and k+8 added, so that V0 and V1
// hold the twin's lanes 0..3 and 4..7. Each sum is scaled by s and added to
// its accumulator; the min term m·sum accumulates in a scalar. Each
// multiply and add rounds on its own, as the twin's float32(a*b) + c does
// (no FMLA). The caller adds a short last group and folds the lanes, in
// the order dotQ8Go defines.

// func dotQ8NEON(codes, scales *uint32, x, sums *float32, groups int, acc *[8]float32) float32
TEXT ·dotQ8NEON(SB), NOSPLIT, $0-52
	MOVD codes+0(FP), R0
	MOVD scales+8(FP), R1
	MOVD x+16(FP), R2
	MOVD sums+24(FP), R3
	MOVD groups+32(FP), R4
	MOVD acc+40(FP), R5
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V24.B16, V24.B16, V24.B16
	CBZ R4, done

loop:
	VLD1.P 16(R0), [V16.B16]
	VLD1.P 64(R2), [V2.S4, V3.S4, V4.S4, V5.S4]
	// [s, m, 0, 0] from the group's scale|min word; its sum beside.
	FMOVS.P 4(R1), F20
	FCVTL4S(20, 20)
	FMOVS.P 4(R3), F23
	// The codes of inputs 0..3, 4..7 (V6, V7) and 8..11, 12..15 (V8, V9).
	VUXTL V16.B8, V17.H8
	VUXTL2 V16.B16, V18.H8
	VUXTL V17.H4, V6.S4
	VUXTL2 V17.H8, V7.S4
	VUXTL V18.H4, V8.S4
	VUXTL2 V18.H8, V9.S4
	SCVTF4S(6, 6)
	SCVTF4S(7, 7)
	SCVTF4S(8, 8)
	SCVTF4S(9, 9)
	FMUL4S(2, 6, 6)
	FMUL4S(3, 7, 7)
	FMUL4S(4, 8, 8)
	FMUL4S(5, 9, 9)
	// Lane k: f32(q_k·x_k) + f32(q_{k+8}·x_{k+8}), scaled by s, accumulated.
	FADD4S(8, 6, 6)
	FADD4S(9, 7, 7)
	FMULE4S(20, 0, 6, 6)
	FMULE4S(20, 0, 7, 7)
	FADD4S(6, 0, 0)
	FADD4S(7, 1, 1)
	// macc += f32(m·sum).
	DUPS1(20, 22)
	FMULS F23, F22, F22
	FADDS(22, 24, 24)
	SUB $1, R4
	CBNZ R4, loop

done:
	VST1 [V0.S4, V1.S4], (R5)
	FMOVS F24, ret+48(FP)
	RET
