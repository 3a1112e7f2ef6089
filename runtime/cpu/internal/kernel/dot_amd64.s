//go:build !purego

#include "textflag.h"

// The AVX2 twin of dotQ4Go, and the AVX-512 twins of dotQ4Go four rows at
// a time. A weight group's 16 code bytes become 16 low nibbles (its even
// inputs) and 16 high ones (its odd inputs), each widened to int16; two
// VPMADDWD multiply them with the inputs (laid out by CodeIndex) into pair
// sums, whose VPADDD is 8 exact int32 lanes (lane k: inputs 4k..4k+3), and
// each lane is converted, scaled by f32(s·d) and added to its accumulator.
// Even and odd groups have their own accumulators: the two halves of a
// 512-bit register, which takes a pair of groups at once. The min terms
// f32(m·sum) accumulate in lanes 1 (even groups) and 3 (odd groups) of an
// xmm register, beside the products s·d in lanes 0 and 2.

// bcast2 broadcasts lane 0 to the low 8 lanes and lane 2 to the high 8
// (VPERMPS): s·d of a pair's first group, then of its second.
DATA bcast2<>+0(SB)/4, $0
DATA bcast2<>+4(SB)/4, $0
DATA bcast2<>+8(SB)/4, $0
DATA bcast2<>+12(SB)/4, $0
DATA bcast2<>+16(SB)/4, $0
DATA bcast2<>+20(SB)/4, $0
DATA bcast2<>+24(SB)/4, $0
DATA bcast2<>+28(SB)/4, $0
DATA bcast2<>+32(SB)/4, $2
DATA bcast2<>+36(SB)/4, $2
DATA bcast2<>+40(SB)/4, $2
DATA bcast2<>+44(SB)/4, $2
DATA bcast2<>+48(SB)/4, $2
DATA bcast2<>+52(SB)/4, $2
DATA bcast2<>+56(SB)/4, $2
DATA bcast2<>+60(SB)/4, $2
GLOBL bcast2<>(SB), RODATA|NOPTR, $64

// MASK puts the nibble mask in Y15.
#define MASK \
	MOVL $0x0F0F0F0F, DX \
	VMOVD DX, X15 \
	VPBROADCASTD X15, Y15

// GROUP adds one group, codes at COFF(SI), even inputs at EVEN(R8) and
// odd ones at ODD(R8), scaled by Y register SD, to accumulator ACC.
#define GROUP(COFF, EVEN, ODD, SD, ACC) \
	VMOVDQU COFF(SI), X8 \
	VPSRLW $4, X8, X9 \
	VPAND X15, X8, X8 \
	VPAND X15, X9, X9 \
	VPMOVZXBW X8, Y8 \
	VPMOVZXBW X9, Y9 \
	VPMADDWD EVEN(R8), Y8, Y8 \
	VPMADDWD ODD(R8), Y9, Y9 \
	VPADDD Y9, Y8, Y8 \
	VCVTDQ2PS Y8, Y8 \
	VMULPS SD, Y8, Y8 \
	VADDPS Y8, ACC, ACC

// HSUM leaves in the low lane of X0 ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))
// of Y0, plus lanes 1 and 3 of MACC.
#define HSUM(MACC) \
	VEXTRACTF128 $1, Y0, X9 \
	VADDPS X9, X0, X0 \
	VMOVHLPS X0, X0, X9 \
	VADDPS X9, X0, X0 \
	VMOVSHDUP X0, X9 \
	VADDSS X9, X0, X0 \
	VMOVSHDUP MACC, X9 \
	VMOVHLPS X9, X9, X8 \
	VADDSS X8, X9, X9 \
	VADDSS X9, X0, X0

// func dotQ4AVX2(codes, scales *uint32, xq *int16, ds *float32, groups int) float32
TEXT ·dotQ4AVX2(SB), NOSPLIT, $0-44
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), DI
	MOVQ xq+16(FP), R8
	MOVQ ds+24(FP), R12
	MOVQ groups+32(FP), CX
	MASK
	MOVL $2, DX
	VMOVD DX, X13
	VPBROADCASTD X13, Y13
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS X4, X4, X4
	MOVQ CX, DX
	SHRQ $1, DX
	JZ   single

pair:
	VMOVQ (DI), X11
	VCVTPH2PS X11, X11
	VMULPS (R12), X11, X11
	VADDPS X11, X4, X4
	VBROADCASTSS X11, Y10
	VPERMPS Y11, Y13, Y12
	GROUP(0, 0, 64, Y10, Y0)
	GROUP(16, 32, 96, Y12, Y1)
	ADDQ $32, SI
	ADDQ $8, DI
	ADDQ $128, R8
	ADDQ $16, R12
	DECQ DX
	JNZ  pair

single:
	TESTQ $1, CX
	JZ    done
	VMOVD (DI), X11
	VCVTPH2PS X11, X11
	VMOVQ (R12), X12
	VMULPS X12, X11, X11
	VADDPS X11, X4, X4
	VBROADCASTSS X11, Y10
	GROUP(0, 0, 32, Y10, Y0)

done:
	VADDPS Y1, Y0, Y0
	HSUM(X4)
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET

// ROW512 adds a pair of groups of the row whose inputs are at XQ and scale,
// sum at DS to accumulator ACC (both halves) and MACC; the pair's nibbles
// are in Z8 (low) and Z9 (high), its [s, m, s, m] in X11.
#define ROW512(XQ, DS, ACC, MACC) \
	VMULPS (DS), X11, X12 \
	VADDPS X12, MACC, MACC \
	VPERMPS Z12, Z14, Z12 \
	VPMADDWD (XQ), Z8, Z10 \
	VPMADDWD 64(XQ), Z9, Z13 \
	VPADDD Z13, Z10, Z10 \
	VCVTDQ2PS Z10, Z10 \
	VMULPS Z12, Z10, Z10 \
	VADDPS Z10, ACC, ACC

// TAIL adds a last, single group to the even accumulator YACC (whose odd
// half was saved first) and MACC; its nibbles are in Y8 and Y9.
#define TAIL(XQ, DS, YACC, MACC) \
	VMOVD (DI), X11 \
	VCVTPH2PS X11, X11 \
	VMOVQ (DS), X12 \
	VMULPS X12, X11, X12 \
	VADDPS X12, MACC, MACC \
	VBROADCASTSS X12, Y12 \
	VPMADDWD (XQ), Y8, Y10 \
	VPMADDWD 32(XQ), Y9, Y13 \
	VPADDD Y13, Y10, Y10 \
	VCVTDQ2PS Y10, Y10 \
	VMULPS Y12, Y10, Y10 \
	VADDPS Y10, YACC, YACC

// func dotQ4x4AVX512(codes, scales *uint32, groups int, xq *[4]*int16, ds *[4]*float32, out *[4]float32)
TEXT ·dotQ4x4AVX512(SB), NOSPLIT, $0-48
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
	MASK
	VMOVDQU32 bcast2<>(SB), Z14
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VXORPS X4, X4, X4
	VXORPS X5, X5, X5
	VXORPS X6, X6, X6
	VXORPS X7, X7, X7
	MOVQ CX, DX
	SHRQ $1, DX
	JZ   tail4

pair4:
	VMOVQ (DI), X11
	VCVTPH2PS X11, X11
	VMOVDQU (SI), Y8
	VPSRLW $4, Y8, Y9
	VPAND Y15, Y8, Y8
	VPAND Y15, Y9, Y9
	VPMOVZXBW Y8, Z8
	VPMOVZXBW Y9, Z9
	ROW512(R8, R12, Z0, X4)
	ROW512(R9, R13, Z1, X5)
	ROW512(R10, AX, Z2, X6)
	ROW512(R11, BX, Z3, X7)
	ADDQ $32, SI
	ADDQ $8, DI
	ADDQ $128, R8
	ADDQ $128, R9
	ADDQ $128, R10
	ADDQ $128, R11
	ADDQ $16, R12
	ADDQ $16, R13
	ADDQ $16, AX
	ADDQ $16, BX
	DECQ DX
	JNZ  pair4

tail4:
	// The odd groups' halves, before VEX writes to Y0..Y3 clear them.
	VEXTRACTF64X4 $1, Z0, Y16
	VEXTRACTF64X4 $1, Z1, Y17
	VEXTRACTF64X4 $1, Z2, Y18
	VEXTRACTF64X4 $1, Z3, Y19
	TESTQ $1, CX
	JZ    sum4
	VMOVDQU (SI), X8
	VPSRLW $4, X8, X9
	VPAND X15, X8, X8
	VPAND X15, X9, X9
	VPMOVZXBW X8, Y8
	VPMOVZXBW X9, Y9
	TAIL(R8, R12, Y0, X4)
	TAIL(R9, R13, Y1, X5)
	TAIL(R10, AX, Y2, X6)
	TAIL(R11, BX, Y3, X7)

sum4:
	MOVQ out+40(FP), DX
	VADDPS Y16, Y0, Y0
	HSUM(X4)
	MOVSS X0, 0(DX)
	VADDPS Y17, Y1, Y0
	HSUM(X5)
	MOVSS X0, 4(DX)
	VADDPS Y18, Y2, Y0
	HSUM(X6)
	MOVSS X0, 8(DX)
	VADDPS Y19, Y3, Y0
	HSUM(X7)
	MOVSS X0, 12(DX)
	VZEROUPPER
	RET

// func dotQ4AVX512(codes, scales *uint32, xq *int16, ds *float32, groups int) float32
TEXT ·dotQ4AVX512(SB), NOSPLIT, $0-44
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), DI
	MOVQ xq+16(FP), R8
	MOVQ ds+24(FP), R12
	MOVQ groups+32(FP), CX
	MASK
	VMOVDQU32 bcast2<>(SB), Z14
	VPXORD Z0, Z0, Z0
	VXORPS X4, X4, X4
	MOVQ CX, DX
	SHRQ $1, DX
	JZ   tail1

pair1:
	VMOVQ (DI), X11
	VCVTPH2PS X11, X11
	VMOVDQU (SI), Y8
	VPSRLW $4, Y8, Y9
	VPAND Y15, Y8, Y8
	VPAND Y15, Y9, Y9
	VPMOVZXBW Y8, Z8
	VPMOVZXBW Y9, Z9
	ROW512(R8, R12, Z0, X4)
	ADDQ $32, SI
	ADDQ $8, DI
	ADDQ $128, R8
	ADDQ $16, R12
	DECQ DX
	JNZ  pair1

tail1:
	VEXTRACTF64X4 $1, Z0, Y16
	TESTQ $1, CX
	JZ    sum1
	VMOVDQU (SI), X8
	VPSRLW $4, X8, X9
	VPAND X15, X8, X8
	VPAND X15, X9, X9
	VPMOVZXBW X8, Y8
	VPMOVZXBW X9, Y9
	TAIL(R8, R12, Y0, X4)

sum1:
	VADDPS Y16, Y0, Y0
	HSUM(X4)
	VZEROUPPER
	MOVSS X0, ret+40(FP)
	RET
