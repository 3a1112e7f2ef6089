//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// Expf's constants, as float32 bits (and the integer exponent bias), in
// the order the kernel loads them into V16..V30.
DATA expc<>+0(SB)/4, $0x3fb8aa3b  // V16 log2e
DATA expc<>+4(SB)/4, $0x3f318000  // V17 ln2hi
DATA expc<>+8(SB)/4, $0xb95e8083  // V18 ln2lo
DATA expc<>+12(SB)/4, $0x39506967 // V19..V23 the polynomial, highest degree first
DATA expc<>+16(SB)/4, $0x3ab743ce
DATA expc<>+20(SB)/4, $0x3c088908
DATA expc<>+24(SB)/4, $0x3d2aa9c1
DATA expc<>+28(SB)/4, $0x3e2aaaaa
DATA expc<>+32(SB)/4, $0x3f000000 // V24 0.5: the last coefficient, and the rounding's half
DATA expc<>+36(SB)/4, $0x3f800000 // V25 1
DATA expc<>+40(SB)/4, $0x80000000 // V26 the sign bit
DATA expc<>+44(SB)/4, $127        // V27 the exponent bias, an integer
DATA expc<>+48(SB)/4, $0x42b17217 // V28 88.72283: above, +Inf
DATA expc<>+52(SB)/4, $0xc2aeac4f // V29 -87.33654: below, 0
DATA expc<>+56(SB)/4, $0x7f800000 // V30 +Inf
GLOBL expc<>(SB), RODATA|NOPTR, $60

// func expShiftNEON(x *float32, m float32, n int)
// Expf's steps on four lanes, in its order (FMUL then FADD, never a fused
// multiply-add); the special cases are computed as ordinary lanes and
// replaced at the end, as Expf's early returns would give them.
TEXT ·expShiftNEON(SB), NOSPLIT, $0-24
	MOVD  x+0(FP), R0
	MOVD  $m+8(FP), R2
	VLD1R (R2), [V31.S4]
	MOVD  n+16(FP), R1
	LSR   $2, R1
	MOVD  $expc<>(SB), R2
	VLD1R.P 4(R2), [V16.S4]
	VLD1R.P 4(R2), [V17.S4]
	VLD1R.P 4(R2), [V18.S4]
	VLD1R.P 4(R2), [V19.S4]
	VLD1R.P 4(R2), [V20.S4]
	VLD1R.P 4(R2), [V21.S4]
	VLD1R.P 4(R2), [V22.S4]
	VLD1R.P 4(R2), [V23.S4]
	VLD1R.P 4(R2), [V24.S4]
	VLD1R.P 4(R2), [V25.S4]
	VLD1R.P 4(R2), [V26.S4]
	VLD1R.P 4(R2), [V27.S4]
	VLD1R.P 4(R2), [V28.S4]
	VLD1R.P 4(R2), [V29.S4]
	VLD1R.P 4(R2), [V30.S4]

four:
	VLD1 (R0), [V0.S4]
	FSUB4S(31, 0, 0) // x = x - m

	// k = float32(int32(t + copysign(0.5, t))), t = x·log2e
	FMUL4S(16, 0, 1)
	AND16B(26, 1, 2)
	ORR16B(24, 2, 2)
	FADD4S(2, 1, 1)
	FCVTZS4S(1, 1) // int32(k)
	SCVTF4S(1, 2)  // k

	// r = (x - k·ln2hi) - k·ln2lo
	FMUL4S(17, 2, 3)
	FSUB4S(3, 0, 3)
	FMUL4S(18, 2, 4)
	FSUB4S(4, 3, 3)

	// p, then e = ((p·r)·r + r) + 1
	FMUL4S(3, 19, 4)
	FADD4S(20, 4, 4)
	FMUL4S(3, 4, 4)
	FADD4S(21, 4, 4)
	FMUL4S(3, 4, 4)
	FADD4S(22, 4, 4)
	FMUL4S(3, 4, 4)
	FADD4S(23, 4, 4)
	FMUL4S(3, 4, 4)
	FADD4S(24, 4, 4)
	FMUL4S(3, 4, 4)
	FMUL4S(3, 4, 4)
	FADD4S(3, 4, 4)
	FADD4S(25, 4, 4)

	// k > 127: (e+e)·2^(k-1); otherwise e·2^k
	CMGT4S(27, 1, 5)
	FADD4S(4, 4, 6)
	BIT16B(5, 6, 4)
	ADD4S(27, 1, 1)
	ADD4S(5, 1, 1)
	SHL4S23(1, 1)
	FMUL4S(1, 4, 4)

	// x > 88.72283: +Inf; x < -87.33654: 0; NaN: x
	FCMGT4S(28, 0, 5)
	BIT16B(5, 30, 4)
	FCMGT4S(0, 29, 5)
	BIC16B(5, 4, 4)
	FCMEQ4S(0, 0, 5)
	BIF16B(5, 0, 4)

	VST1.P [V4.S4], 16(R0)
	SUB    $1, R1
	CBNZ   R1, four
	RET

// func scaleMaxNEON(x *float32, scale float32, n int) float32
TEXT ·scaleMaxNEON(SB), NOSPLIT, $0-28
	MOVD  x+0(FP), R0
	MOVD  $scale+8(FP), R2
	VLD1R (R2), [V6.S4]
	MOVD  n+16(FP), R1
	LSR   $3, R1
	VLD1  (R0), [V0.S4, V1.S4]
	FMUL4S(6, 0, 0)
	FMUL4S(6, 1, 1)
	VST1.P [V0.S4, V1.S4], 32(R0)
	SUB   $1, R1
	CBZ   R1, fold

scale8:
	VLD1   (R0), [V2.S4, V3.S4]
	FMUL4S(6, 2, 2)
	FMUL4S(6, 3, 3)
	VST1.P [V2.S4, V3.S4], 32(R0)
	FMAX4S(2, 0, 0)
	FMAX4S(3, 1, 1)
	SUB    $1, R1
	CBNZ   R1, scale8

fold:
	FMAX4S(1, 0, 0)
	FMAXV4S(0, 0)
	FMOVS F0, ret+24(FP)
	RET
