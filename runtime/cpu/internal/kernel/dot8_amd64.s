//go:build !purego

#include "textflag.h"

// The AVX2 twin of dotQ8Go's whole groups: per group of 16, its code bytes
// widened to two 8-lane int32 vectors (VPMOVZXBD), converted, multiplied
// with inputs 0..7 and 8..15, the two products added (lane k: inputs k
// and k+8), scaled by s and added to the accumulator; the min term m·sum
// accumulates in a scalar. The caller adds a short last group and folds
// the lanes, in the order dotQ8Go defines.

// func dotQ8AVX2(codes, scales *uint32, x, sums *float32, groups int, acc *[8]float32) float32
TEXT ·dotQ8AVX2(SB), NOSPLIT, $0-52
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), DI
	MOVQ x+16(FP), R8
	MOVQ sums+24(FP), R9
	MOVQ groups+32(FP), CX
	MOVQ acc+40(FP), R10
	VXORPS Y0, Y0, Y0
	VXORPS X1, X1, X1
	TESTQ CX, CX
	JZ done

loop:
	VPMOVZXBD (SI), Y2
	VPMOVZXBD 8(SI), Y3
	VCVTDQ2PS Y2, Y2
	VCVTDQ2PS Y3, Y3
	VMULPS (R8), Y2, Y2
	VMULPS 32(R8), Y3, Y3
	VADDPS Y3, Y2, Y2
	VMOVD (DI), X4
	VCVTPH2PS X4, X4
	VBROADCASTSS X4, Y5
	VMULPS Y5, Y2, Y2
	VADDPS Y2, Y0, Y0
	VMOVSHDUP X4, X6
	VMULSS (R9), X6, X6
	VADDSS X6, X1, X1
	ADDQ $16, SI
	ADDQ $4, DI
	ADDQ $64, R8
	ADDQ $4, R9
	DECQ CX
	JNZ loop

done:
	VMOVUPS Y0, (R10)
	VMOVSS X1, ret+48(FP)
	VZEROUPPER
	RET
