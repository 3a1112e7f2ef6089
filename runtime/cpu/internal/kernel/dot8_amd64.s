//go:build !purego

#include "textflag.h"

// The AVX2 twin of dotQ8Go's whole groups: per group of 16, its code bytes
// widened to two 8-lane int32 vectors (VPMOVZXBD), converted, multiplied
// with inputs 0..7 and 8..15, the two products added (lane k: inputs k
// and k+8), scaled by s and added to the accumulator of the group's
// parity (Y0 even groups, Y7 odd: two independent chains); the min term
// m·sum accumulates in a scalar, group by group. The caller adds a short
// last group and folds the lanes, in the order dotQ8Go defines.

// GROUP8 adds the group whose codes are at C(SI), scale word at S(DI),
// inputs at X(R8) and input sum at M(R9) to ACC, its min term to X1.
#define GROUP8(C, S, X, M, ACC) \
	VPMOVZXBD C(SI), Y2 \
	VPMOVZXBD C+8(SI), Y3 \
	VCVTDQ2PS Y2, Y2 \
	VCVTDQ2PS Y3, Y3 \
	VMULPS X(R8), Y2, Y2 \
	VMULPS X+32(R8), Y3, Y3 \
	VADDPS Y3, Y2, Y2 \
	VMOVD S(DI), X4 \
	VCVTPH2PS X4, X4 \
	VBROADCASTSS X4, Y5 \
	VMULPS Y5, Y2, Y2 \
	VADDPS Y2, ACC, ACC \
	VMOVSHDUP X4, X6 \
	VMULSS M(R9), X6, X6 \
	VADDSS X6, X1, X1

// func dotQ8AVX2(codes, scales *uint32, x, sums *float32, groups int, acc *[2][8]float32) float32
TEXT ·dotQ8AVX2(SB), NOSPLIT, $0-52
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), DI
	MOVQ x+16(FP), R8
	MOVQ sums+24(FP), R9
	MOVQ groups+32(FP), CX
	MOVQ acc+40(FP), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y7, Y7, Y7
	VXORPS X1, X1, X1
	CMPQ CX, $2
	JB single

pair:
	GROUP8(0, 0, 0, 0, Y0)
	GROUP8(16, 4, 64, 4, Y7)
	ADDQ $32, SI
	ADDQ $8, DI
	ADDQ $128, R8
	ADDQ $8, R9
	SUBQ $2, CX
	CMPQ CX, $2
	JAE pair

single:
	TESTQ CX, CX
	JZ done
	GROUP8(0, 0, 0, 0, Y0)

done:
	VMOVUPS Y0, (R10)
	VMOVUPS Y7, 32(R10)
	VMOVSS X1, ret+48(FP)
	VZEROUPPER
	RET
