//go:build !purego

#include "textflag.h"

// func maxAVX2(x *float32, n int) float32
//
// The largest of x[:n] (n a multiple of 8), NaNs passed over (-Inf where
// all are NaN). VMAXPS returns its second source where either is NaN or
// both are zeros, so the running maxima are always that source: a NaN of
// x never enters them.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	SHRQ         $3, CX
	MOVL         $0xff800000, AX // -Inf
	MOVL         AX, X0
	VBROADCASTSS X0, Y0
	VMOVAPS      Y0, Y1

	// Two chains of maxima, so that each VMAXPS waits on the one before
	// last, not the last.
	TESTQ $1, CX
	JZ    pairs
	VMOVUPS (DI), Y2
	VMAXPS  Y0, Y2, Y0
	ADDQ    $32, DI
	DECQ    CX
	JZ      fold

pairs:
	TESTQ CX, CX
	JZ    fold

pair:
	VMOVUPS (DI), Y2
	VMOVUPS 32(DI), Y3
	VMAXPS  Y0, Y2, Y0
	VMAXPS  Y1, Y3, Y1
	ADDQ    $64, DI
	SUBQ    $2, CX
	JNZ     pair

fold:
	// Neither chain holds a NaN, so the order of the folds is free.
	VMAXPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X2
	VMAXPS       X2, X0, X0
	VMOVHLPS     X0, X0, X2
	VMAXPS       X2, X0, X0
	VMOVSHDUP    X0, X2
	VMAXSS       X2, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+16(FP)
	RET

// func findAVX2(x *float32, n int, v float32) int
//
// The first i < n (n a multiple of 8) with x[i] == v (an ordered
// comparison: −0 equals +0, NaN equals nothing), or -1.
TEXT ·findAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS v+16(FP), Y0
	XORQ         AX, AX

eight:
	VCMPPS    $0, (DI)(AX*4), Y0, Y1 // EQ_OQ
	VMOVMSKPS Y1, DX
	TESTL     DX, DX
	JNZ       found
	ADDQ      $8, AX
	CMPQ      AX, CX
	JNE       eight
	MOVQ      $-1, ret+24(FP)
	VZEROUPPER
	RET

found:
	BSFL      DX, DX
	ADDQ      DX, AX
	MOVQ      AX, ret+24(FP)
	VZEROUPPER
	RET
