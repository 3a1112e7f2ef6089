//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// QGROUP quantizes the group of 32 inputs at R0 (advancing R0): its scale
// and sum to DSOFF(R2), its even inputs' codes at R1 and its odd ones' at
// R4 (advancing both by 32 bytes). The inputs stay in V0..V7 (lanes
// 4i..4i+3 in V_i) while the sum folds them (FOLD32, quantizeGo's order)
// and |x| reduces to its maximum (max needs no order). FCVTNS rounds to
// nearest, ties to even; UZP1 .8H keeps the low 16 bits of each code, as
// Go's int16 conversion does, and a second UZP1/UZP2 splits the even inputs
// from the odd ones.
#define QGROUP(DSOFF) \
	VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4] \
	VLD1.P 64(R0), [V4.S4, V5.S4, V6.S4, V7.S4] \
	FOLD32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10) \
	FABS4S(0, 16) \
	FABS4S(1, 17) \
	FABS4S(2, 18) \
	FABS4S(3, 19) \
	FABS4S(4, 20) \
	FABS4S(5, 21) \
	FABS4S(6, 22) \
	FABS4S(7, 23) \
	FMAX4S(17, 16, 16) \
	FMAX4S(19, 18, 18) \
	FMAX4S(21, 20, 20) \
	FMAX4S(23, 22, 22) \
	FMAX4S(18, 16, 16) \
	FMAX4S(22, 20, 20) \
	FMAX4S(20, 16, 16) \
	FMAXV4S(16, 16) \
	FDIVS F30, F16, F17 \
	FDIVS F17, F29, F18 \
	FCMPS F18, F27 \
	FCSELS GT, F18, F28, F18 \
	FMOVS F17, DSOFF(R2) \
	FMOVS F8, DSOFF+4(R2) \
	FMULE4S(18, 0, 0, 0) \
	FMULE4S(18, 0, 1, 1) \
	FMULE4S(18, 0, 2, 2) \
	FMULE4S(18, 0, 3, 3) \
	FMULE4S(18, 0, 4, 4) \
	FMULE4S(18, 0, 5, 5) \
	FMULE4S(18, 0, 6, 6) \
	FMULE4S(18, 0, 7, 7) \
	FCVTNS4S(0, 0) \
	FCVTNS4S(1, 1) \
	FCVTNS4S(2, 2) \
	FCVTNS4S(3, 3) \
	FCVTNS4S(4, 4) \
	FCVTNS4S(5, 5) \
	FCVTNS4S(6, 6) \
	FCVTNS4S(7, 7) \
	VUZP1 V1.H8, V0.H8, V16.H8 \
	VUZP1 V3.H8, V2.H8, V17.H8 \
	VUZP1 V5.H8, V4.H8, V18.H8 \
	VUZP1 V7.H8, V6.H8, V19.H8 \
	VUZP1 V17.H8, V16.H8, V20.H8 \
	VUZP1 V19.H8, V18.H8, V21.H8 \
	VUZP2 V17.H8, V16.H8, V22.H8 \
	VUZP2 V19.H8, V18.H8, V23.H8 \
	VST1.P [V20.H8, V21.H8], 32(R1) \
	VST1.P [V22.H8, V23.H8], 32(R4)

// func quantizeNEON(x *float32, codes *int16, ds *float32, pairs int)
//
// The twin of quantizeGo for pairs of whole groups, written where
// CodeIndex puts them: a pair's 128 bytes of codes hold the even inputs of
// both groups, then their odd ones. d = amax/Max; 1/d where it is finite
// (+Inf > 1/d), else 0.
TEXT ·quantizeNEON(SB), NOSPLIT, $0-32
	MOVD x+0(FP), R0
	MOVD codes+8(FP), R1
	MOVD ds+16(FP), R2
	MOVD pairs+24(FP), R3
	ADD $64, R1, R4
	MOVW $0x46fffe00, R5 // 32767.0
	FMOVS R5, F30
	FMOVS $1.0, F29
	FMOVS ZR, F28
	MOVW $0x7f800000, R5 // +Inf
	FMOVS R5, F27

pair:
	QGROUP(0)
	QGROUP(8)
	ADD $64, R1
	ADD $64, R4
	ADD $16, R2
	SUB $1, R3
	CBNZ R3, pair
	RET
