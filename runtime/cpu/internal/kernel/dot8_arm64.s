//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// The NEON twin of dotQ8Go's whole groups, as dotQ8AVX2 computes them: per
// group of 16, its code bytes widened to four 4-lane int32 vectors (UXTL,
// UXTL2 twice), converted, multiplied with inputs 0..3, 4..7, 8..11 and
// 12..15, and the products of inputs k and k+8 added, so that a register
// pair holds the twin's lanes 0..3 and 4..7. Each sum is scaled by s and
// added to the accumulators of the group's parity (V0, V1 even groups; V2,
// V3 odd: two independent chains); the min term m·sum accumulates in a
// scalar, group by group. Each multiply and add rounds on its own, as the
// twin's float32(a*b) + c does (no FMLA). The caller adds a short last
// group and folds the lanes, in the order dotQ8Go defines.

// GROUP8 adds the group at R0 (codes), R1 (scale word), R2 (inputs) and R3
// (input sum), advancing them, to accumulators A0 (lanes 0..3) and A1
// (4..7), and its min term to F24. V2..V23 less the accumulators are
// scratch: V4..V7 the inputs, V8..V13 the widened codes, V20..V23 the
// scale, m and sum.
#define GROUP8(A0, A1) \
	VLD1.P 16(R0), [V16.B16] \
	VLD1.P 64(R2), [V4.S4, V5.S4, V6.S4, V7.S4] \
	FMOVS.P 4(R1), F20 \
	FCVTL4S(20, 20) \
	FMOVS.P 4(R3), F23 \
	VUXTL V16.B8, V17.H8 \
	VUXTL2 V16.B16, V18.H8 \
	VUXTL V17.H4, V8.S4 \
	VUXTL2 V17.H8, V9.S4 \
	VUXTL V18.H4, V10.S4 \
	VUXTL2 V18.H8, V11.S4 \
	SCVTF4S(8, 8) \
	SCVTF4S(9, 9) \
	SCVTF4S(10, 10) \
	SCVTF4S(11, 11) \
	FMUL4S(4, 8, 8) \
	FMUL4S(5, 9, 9) \
	FMUL4S(6, 10, 10) \
	FMUL4S(7, 11, 11) \
	FADD4S(10, 8, 8) \
	FADD4S(11, 9, 9) \
	FMULE4S(20, 0, 8, 8) \
	FMULE4S(20, 0, 9, 9) \
	FADD4S(8, A0, A0) \
	FADD4S(9, A1, A1) \
	DUPS1(20, 22) \
	FMULS F23, F22, F22 \
	FADDS(22, 24, 24)

// func dotQ8NEON(codes, scales *uint32, x, sums *float32, groups int, acc *[2][8]float32) float32
TEXT ·dotQ8NEON(SB), NOSPLIT, $0-52
	MOVD codes+0(FP), R0
	MOVD scales+8(FP), R1
	MOVD x+16(FP), R2
	MOVD sums+24(FP), R3
	MOVD groups+32(FP), R4
	MOVD acc+40(FP), R5
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V24.B16, V24.B16, V24.B16
	LSR $1, R4, R6
	CBZ R6, single

pair:
	GROUP8(0, 1)
	GROUP8(2, 3)
	SUB $1, R6
	CBNZ R6, pair

single:
	TBZ $0, R4, done
	GROUP8(0, 1)

done:
	VST1 [V0.S4, V1.S4, V2.S4, V3.S4], (R5)
	FMOVS F24, ret+48(FP)
	RET
