//go:build !purego

#include "textflag.h"

// The AVX2 twins of dotQ4Go. One group of 32 weights per iteration: its
// 16 code bytes become 16 low nibbles and 16 high ones, each widened to
// int16 (the order of the QRow codes); two VPMADDWD multiply them with the
// inputs into pair sums, whose VPADDD is 8 exact int32 lanes (lane k:
// inputs 4k..4k+3), and each lane is converted, scaled by f32(s·d) and
// added to its accumulator. The
// min term f32(m·sum) accumulates in lane 1 of an xmm register. The
// horizontal sum at the end folds the register in halves, as the Go twin
// spells out.

// SETUP puts the nibble mask in X15.
#define SETUP \
	MOVL $0x0F0F0F0F, DX \
	VMOVD DX, X15 \
	VPBROADCASTD X15, X15

// UNPACK loads the scale|min word at DI as [s, m, 0, 0] into X11 and the
// group's nibbles at SI as int16: the low ones into Y8, the high into Y13.
#define UNPACK \
	VMOVD (DI), X11 \
	VCVTPH2PS X11, X11 \
	VMOVDQU (SI), X8 \
	VPSRLW $4, X8, X13 \
	VPAND X15, X8, X8 \
	VPAND X15, X13, X13 \
	VPMOVZXBW X8, Y8 \
	VPMOVZXBW X13, Y13

// ROW adds one group of the row whose codes are at XQ and scale, sum at
// DS to the lane accumulators ACC and the min accumulator MACC.
#define ROW(XQ, DS, ACC, MACC) \
	VMOVQ (DS), X12 \
	VMULPS X12, X11, X12 \
	VADDPS X12, MACC, MACC \
	VBROADCASTSS X12, Y10 \
	VPMADDWD (XQ), Y8, Y9 \
	VPMADDWD 32(XQ), Y13, Y14 \
	VPADDD Y14, Y9, Y9 \
	VCVTDQ2PS Y9, Y9 \
	VMULPS Y10, Y9, Y9 \
	VADDPS Y9, ACC, ACC

// HSUM leaves ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) + MACC[1] in the low
// lane of ACC's xmm half XACC.
#define HSUM(ACC, XACC, MACC) \
	VEXTRACTF128 $1, ACC, X9 \
	VADDPS X9, XACC, XACC \
	VMOVHLPS XACC, XACC, X9 \
	VADDPS X9, XACC, XACC \
	VMOVSHDUP XACC, X9 \
	VADDSS X9, XACC, XACC \
	VMOVSHDUP MACC, X9 \
	VADDSS X9, XACC, XACC

// func dotQ4AVX2(codes, scales *uint32, xq *int16, ds *float32, groups int) float32
TEXT ·dotQ4AVX2(SB), NOSPLIT, $0-44
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), DI
	MOVQ xq+16(FP), R8
	MOVQ ds+24(FP), R12
	MOVQ groups+32(FP), CX
	SETUP
	VXORPS Y0, Y0, Y0
	VXORPS X4, X4, X4

one:
	UNPACK
	ROW(R8, R12, Y0, X4)
	ADDQ $16, SI
	ADDQ $4, DI
	ADDQ $64, R8
	ADDQ $8, R12
	DECQ CX
	JNZ  one

	HSUM(Y0, X0, X4)
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// func dotQ4x4AVX2(codes, scales *uint32, groups int, xq *[4]*int16, ds *[4]*float32, out *[4]float32)
TEXT ·dotQ4x4AVX2(SB), NOSPLIT, $0-48
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), DI
	MOVQ groups+16(FP), CX
	MOVQ xq+24(FP), DX
	MOVQ 0(DX), R8
	MOVQ 8(DX), R9
	MOVQ 16(DX), R10
	MOVQ 24(DX), R11
	MOVQ ds+32(FP), DX
	MOVQ 0(DX), R12
	MOVQ 8(DX), R13
	MOVQ 16(DX), AX
	MOVQ 24(DX), BX
	SETUP
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS X4, X4, X4
	VXORPS X5, X5, X5
	VXORPS X6, X6, X6
	VXORPS X7, X7, X7

four:
	UNPACK
	ROW(R8, R12, Y0, X4)
	ROW(R9, R13, Y1, X5)
	ROW(R10, AX, Y2, X6)
	ROW(R11, BX, Y3, X7)
	ADDQ $16, SI
	ADDQ $4, DI
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $8, R12
	ADDQ $8, R13
	ADDQ $8, AX
	ADDQ $8, BX
	DECQ CX
	JNZ  four

	HSUM(Y0, X0, X4)
	HSUM(Y1, X1, X5)
	HSUM(Y2, X2, X6)
	HSUM(Y3, X3, X7)
	VZEROUPPER
	MOVQ  out+40(FP), DX
	MOVSS X0, 0(DX)
	MOVSS X1, 4(DX)
	MOVSS X2, 8(DX)
	MOVSS X3, 12(DX)
	RET
