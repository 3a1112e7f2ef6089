//go:build !purego

#include "textflag.h"

// pairs puts the dword pairs that VPACKSSDW leaves as p0 p2 p4 p6 | p1 p3
// p5 p7 back in order.
DATA pairs<>+0(SB)/4, $0
DATA pairs<>+4(SB)/4, $4
DATA pairs<>+8(SB)/4, $1
DATA pairs<>+12(SB)/4, $5
DATA pairs<>+16(SB)/4, $2
DATA pairs<>+20(SB)/4, $6
DATA pairs<>+24(SB)/4, $3
DATA pairs<>+28(SB)/4, $7
GLOBL pairs<>(SB), RODATA|NOPTR, $32

// QGROUP quantizes the group of 32 inputs at XOFF(SI): its scale and sum
// to DSOFF(R8), its even inputs' codes to EVEN(DI), its odd ones' to
// ODD(DI).
#define QGROUP(XOFF, EVEN, ODD, DSOFF) \
	VMOVUPS XOFF(SI), Y0 \
	VMOVUPS XOFF+32(SI), Y1 \
	VMOVUPS XOFF+64(SI), Y2 \
	VMOVUPS XOFF+96(SI), Y3 \
	VADDPS Y1, Y0, Y4 \
	VADDPS Y3, Y2, Y5 \
	VADDPS Y5, Y4, Y4 \
	VEXTRACTF128 $1, Y4, X5 \
	VADDPS X5, X4, X4 \
	VMOVHLPS X4, X4, X5 \
	VADDPS X5, X4, X4 \
	VMOVSHDUP X4, X5 \
	VADDSS X5, X4, X4 \
	VANDPS Y15, Y0, Y5 \
	VANDPS Y15, Y1, Y6 \
	VMAXPS Y6, Y5, Y5 \
	VANDPS Y15, Y2, Y6 \
	VMAXPS Y6, Y5, Y5 \
	VANDPS Y15, Y3, Y6 \
	VMAXPS Y6, Y5, Y5 \
	VEXTRACTF128 $1, Y5, X6 \
	VMAXPS X6, X5, X5 \
	VMOVHLPS X5, X5, X6 \
	VMAXPS X6, X5, X5 \
	VMOVSHDUP X5, X6 \
	VMAXSS X6, X5, X5 \
	QINV \
	VMOVSS X6, DSOFF(R8) \
	VMOVSS X4, DSOFF+4(R8) \
	QCODES(EVEN, ODD)

// QINV: the scale d = amax/Max (amax in X5) to X6 and 1/d, or 0 where it
// is not finite, to every lane of Y7.
#define QINV \
	VDIVSS X14, X5, X6 \
	VDIVSS X6, X13, X7 \
	MOVL $0x7f800000, DX \
	VMOVD DX, X8 \
	VCMPSS $0x01, X8, X7, X9 \
	VANDPS X9, X7, X7 \
	VBROADCASTSS X7, Y7

// QCODES(EVEN, ODD): the codes of a group (its inputs in Y0..Y3) times
// Y7, rounded to nearest, ties to even: its even inputs' to EVEN(DI), its
// odd ones' to ODD(DI).
#define QCODES(EVEN, ODD) \
	VMULPS Y7, Y0, Y0 \
	VMULPS Y7, Y1, Y1 \
	VMULPS Y7, Y2, Y2 \
	VMULPS Y7, Y3, Y3 \
	VCVTPS2DQ Y0, Y0 \
	VCVTPS2DQ Y1, Y1 \
	VCVTPS2DQ Y2, Y2 \
	VCVTPS2DQ Y3, Y3 \
	VSHUFPS $0x88, Y1, Y0, Y8 \
	VSHUFPS $0xDD, Y1, Y0, Y9 \
	VSHUFPS $0x88, Y3, Y2, Y10 \
	VSHUFPS $0xDD, Y3, Y2, Y11 \
	VPACKSSDW Y10, Y8, Y8 \
	VPACKSSDW Y11, Y9, Y9 \
	VPERMD Y8, Y12, Y8 \
	VPERMD Y9, Y12, Y9 \
	VMOVDQU Y8, EVEN(DI) \
	VMOVDQU Y9, ODD(DI)

// QCONSTS: the quantizers' constants: |x|'s mask in Y15, Max (32767) in
// X14, 1 in X13, pairs in Y12.
#define QCONSTS \
	MOVL $0x7fffffff, DX \
	VMOVD DX, X15 \
	VPBROADCASTD X15, Y15 \
	MOVL $0x46fffe00, DX \
	VMOVD DX, X14 \
	MOVL $0x3f800000, DX \
	VMOVD DX, X13 \
	VMOVDQU pairs<>(SB), Y12

// func quantizeAVX2(x *float32, codes *int16, ds *float32, pairs int)
//
// The twin of quantizeGo for pairs of whole groups, written where
// CodeIndex puts them. VCVTPS2DQ rounds to nearest, ties to even (the
// MXCSR mode Go keeps). The shuffles split each group's codes into even
// and odd inputs: VSHUFPS picks them per 128-bit lane, VPACKSSDW narrows
// them, and VPERMD undoes the lane interleaving.
TEXT ·quantizeAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ codes+8(FP), DI
	MOVQ ds+16(FP), R8
	MOVQ pairs+24(FP), CX
	QCONSTS

pair:
	QGROUP(0, 0, 64, 0)
	QGROUP(128, 32, 96, 8)
	ADDQ $256, SI
	ADDQ $128, DI
	ADDQ $16, R8
	DECQ CX
	JNZ  pair
	VZEROUPPER
	RET

// func quantizeKAVX2(x *float32, codes *int16, kd *float32, blocks int)
//
// The twin of quantizeK for whole super-blocks of 256 inputs: each one's
// max|x| (Y5, then X5), its scale to kd and its codes times 1/d written
// where CodeIndex puts them, as quantizeAVX2 writes a group's.
TEXT ·quantizeKAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ codes+8(FP), DI
	MOVQ kd+16(FP), R8
	MOVQ blocks+24(FP), CX
	QCONSTS

kblock:
	VXORPS Y5, Y5, Y5
	XORQ AX, AX

kmax:
	VANDPS (SI)(AX*1), Y15, Y0
	VMAXPS Y0, Y5, Y5
	VANDPS 32(SI)(AX*1), Y15, Y1
	VMAXPS Y1, Y5, Y5
	VANDPS 64(SI)(AX*1), Y15, Y2
	VMAXPS Y2, Y5, Y5
	VANDPS 96(SI)(AX*1), Y15, Y3
	VMAXPS Y3, Y5, Y5
	ADDQ $128, AX
	CMPQ AX, $1024
	JLT  kmax
	VEXTRACTF128 $1, Y5, X6
	VMAXPS X6, X5, X5
	VMOVHLPS X5, X5, X6
	VMAXPS X6, X5, X5
	VMOVSHDUP X5, X6
	VMAXSS X6, X5, X5
	QINV
	VMOVSS X6, (R8)
	MOVQ $4, BX

kpair:
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	QCODES(0, 64)
	VMOVUPS 128(SI), Y0
	VMOVUPS 160(SI), Y1
	VMOVUPS 192(SI), Y2
	VMOVUPS 224(SI), Y3
	QCODES(32, 96)
	ADDQ $256, SI
	ADDQ $128, DI
	DECQ BX
	JNZ  kpair
	ADDQ $4, R8
	DECQ CX
	JNZ  kblock
	VZEROUPPER
	RET
