//go:build !purego

#include "textflag.h"

// The AVX2 twins of dotF32Go and of Axpy's loop: products and sums as
// separate instructions (no FMA), so that each rounds as the Go code does.

// FOLD leaves in the low lane of X0 the fold dotF32Go spells out of the
// four accumulators R0..R3 (R0 must be Y0).
#define FOLD(R0, R1, R2, R3) \
	VADDPS R1, R0, R0 \
	VADDPS R3, R2, R2 \
	VADDPS R2, R0, R0 \
	VEXTRACTF128 $1, Y0, X9 \
	VADDPS X9, X0, X0 \
	VMOVHLPS X0, X0, X9 \
	VADDPS X9, X0, X0 \
	VMOVSHDUP X0, X9 \
	VADDSS X9, X0, X0

// func dotF32AVX2(a, b *float32, n int) float32
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

block:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMULPS (DI), Y4, Y4
	VMULPS 32(DI), Y5, Y5
	VMULPS 64(DI), Y6, Y6
	VMULPS 96(DI), Y7, Y7
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  block

	FOLD(Y0, Y1, Y2, Y3)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// ROW4 adds the products of the w block in Y12..Y15 with the block of the
// row at P to the accumulators A0..A3.
#define ROW4(P, A0, A1, A2, A3) \
	VMULPS (P), Y12, Y8 \
	VADDPS Y8, A0, A0 \
	VMULPS 32(P), Y13, Y8 \
	VADDPS Y8, A1, A1 \
	VMULPS 64(P), Y14, Y8 \
	VADDPS Y8, A2, A2 \
	VMULPS 96(P), Y15, Y8 \
	VADDPS Y8, A3, A3

// func dotF32x4AVX2(w *float32, xs *[4]*float32, n int, out *[4]float32)
//
// Sixteen accumulators (four rows × four registers) would take every
// register, so the rows go two by two: Y0..Y3 and Y4..Y7 for a pair, the
// w block in Y12..Y15.
TEXT ·dotF32x4AVX2(SB), NOSPLIT, $0-32
	MOVQ xs+8(FP), DX
	MOVQ out+24(FP), R10
	MOVQ $0, R11

pair:
	MOVQ w+0(FP), SI
	MOVQ 0(DX)(R11*8), R8
	MOVQ 8(DX)(R11*8), R9
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

block4:
	VMOVUPS (SI), Y12
	VMOVUPS 32(SI), Y13
	VMOVUPS 64(SI), Y14
	VMOVUPS 96(SI), Y15
	ROW4(R8, Y0, Y1, Y2, Y3)
	ROW4(R9, Y4, Y5, Y6, Y7)
	ADDQ $128, SI
	ADDQ $128, R8
	ADDQ $128, R9
	DECQ CX
	JNZ  block4

	FOLD(Y0, Y1, Y2, Y3)
	MOVSS X0, 0(R10)(R11*4)
	VMOVAPS Y4, Y0
	FOLD(Y0, Y5, Y6, Y7)
	MOVSS X0, 4(R10)(R11*4)
	ADDQ $2, R11
	CMPQ R11, $4
	JLT  pair
	VZEROUPPER
	RET

// TAIL adds to X0, one product and one sum at a time, w's values past the
// blocks (SI points at them, AX counts them; CX and DI are scratch) times
// those of the row at P:
// DotF32's tail.
#define TAIL(P) \
	MOVQ AX, CX \
	MOVQ SI, DI \
	TESTQ CX, CX \
	JZ 8(PC) \
	VMOVSS (DI), X10 \
	VMULSS (P), X10, X10 \
	VADDSS X10, X0, X0 \
	ADDQ $4, DI \
	ADDQ $4, P \
	DECQ CX \
	JNZ -6(PC)

// func dotF32RowsAVX2(w, x *float32, nb, k, m int, out *float32, stride int)
//
// dotF32x4AVX2's pair of rows, over all m rows of x (k values apart, the
// first nb of each summed in lanes, the rest one by one as DotF32's
// tail): each pair's two results go to out, stride values apart. An odd
// last row is computed as both rows of a pair and stored once.
TEXT ·dotF32RowsAVX2(SB), NOSPLIT, $0-56
	MOVQ x+8(FP), DX
	MOVQ nb+16(FP), BX
	SHRQ $5, BX
	MOVQ k+24(FP), R12
	SHLQ $2, R12
	MOVQ m+32(FP), R11
	MOVQ out+40(FP), R10
	MOVQ stride+48(FP), R13
	SHLQ $2, R13
	MOVQ k+24(FP), AX
	SUBQ nb+16(FP), AX

rows:
	MOVQ w+0(FP), SI
	MOVQ DX, R8
	LEAQ (DX)(R12*1), R9
	CMPQ R11, $1
	JNE  pair2
	MOVQ DX, R9

pair2:
	MOVQ   BX, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

block2:
	VMOVUPS (SI), Y12
	VMOVUPS 32(SI), Y13
	VMOVUPS 64(SI), Y14
	VMOVUPS 96(SI), Y15
	ROW4(R8, Y0, Y1, Y2, Y3)
	ROW4(R9, Y4, Y5, Y6, Y7)
	ADDQ $128, SI
	ADDQ $128, R8
	ADDQ $128, R9
	DECQ CX
	JNZ  block2

	FOLD(Y0, Y1, Y2, Y3)
	TAIL(R8)
	VMOVSS X0, (R10)
	CMPQ   R11, $1
	JEQ    last
	VMOVAPS Y4, Y0
	FOLD(Y0, Y5, Y6, Y7)
	TAIL(R9)
	VMOVSS X0, (R10)(R13*1)
	LEAQ   (R10)(R13*2), R10
	LEAQ   (DX)(R12*2), DX
	SUBQ   $2, R11
	JNZ    rows

last:
	VZEROUPPER
	RET

// func axpyAVX2(dst *float32, a float32, x *float32, n int)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	VBROADCASTSS a+8(FP), Y1
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
	SHRQ $3, CX

eight:
	VMULPS (SI), Y1, Y2
	VADDPS (DI), Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  eight
	VZEROUPPER
	RET

// The axpyRows kernels keep columns of dst in registers while every row
// adds to them. One 8-column register takes a chain of dependent adds, one
// per row, each waiting out the last one's latency; so they take 32
// columns at a time (four independent chains per sum), then 8 at a time
// for the rest. Column blocks never mix, so each element is the same sum.

// ROW32(A, X, D0, D1, D2, D3) adds the broadcast A times the 32 values at
// X to D0..D3 (products in Y12..Y15).
#define ROW32(A, X, D0, D1, D2, D3) \
	VMULPS 0(X), A, Y12 \
	VMULPS 32(X), A, Y13 \
	VMULPS 64(X), A, Y14 \
	VMULPS 96(X), A, Y15 \
	VADDPS Y12, D0, D0 \
	VADDPS Y13, D1, D1 \
	VADDPS Y14, D2, D2 \
	VADDPS Y15, D3, D3

#define LOAD32(P, D0, D1, D2, D3) \
	VMOVUPS 0(P), D0 \
	VMOVUPS 32(P), D1 \
	VMOVUPS 64(P), D2 \
	VMOVUPS 96(P), D3

#define STORE32(P, D0, D1, D2, D3) \
	VMOVUPS D0, 0(P) \
	VMOVUPS D1, 32(P) \
	VMOVUPS D2, 64(P) \
	VMOVUPS D3, 96(P)

// func axpyRowsAVX2(dst, a, x *float32, rows, stride, n int)
TEXT ·axpyRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ x+16(FP), DX
	MOVQ rows+24(FP), R8
	MOVQ stride+32(FP), R9
	SHLQ $2, R9
	MOVQ n+40(FP), CX
	SHRQ $5, CX
	JZ   eights

columns32:
	LOAD32(DI, Y0, Y1, Y2, Y3)
	MOVQ SI, R10
	MOVQ DX, R11
	MOVQ R8, R12

row32:
	VBROADCASTSS (R10), Y4
	ROW32(Y4, R11, Y0, Y1, Y2, Y3)
	ADDQ $4, R10
	ADDQ R9, R11
	DECQ R12
	JNZ  row32
	STORE32(DI, Y0, Y1, Y2, Y3)
	ADDQ $128, DI
	ADDQ $128, DX
	DECQ CX
	JNZ  columns32

eights:
	MOVQ n+40(FP), CX
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   done

columns:
	VMOVUPS (DI), Y0
	MOVQ    SI, R10
	MOVQ    DX, R11
	MOVQ    R8, R12

row:
	VBROADCASTSS (R10), Y1
	VMULPS       (R11), Y1, Y1
	VADDPS       Y1, Y0, Y0
	ADDQ         $4, R10
	ADDQ         R9, R11
	DECQ         R12
	JNZ          row
	VMOVUPS      Y0, (DI)
	ADDQ         $32, DI
	ADDQ         $32, DX
	DECQ         CX
	JNZ          columns

done:
	VZEROUPPER
	RET

// func axpyRows2AVX2(dst0, dst1, a0, a1, x *float32, rows, stride, n int)
// axpyRowsAVX2 for two sums over the same rows: each row of x is loaded
// once for both (by the first sum's products; the second's multiply the
// same addresses, which the core serves from L1).
TEXT ·axpyRows2AVX2(SB), NOSPLIT, $0-64
	MOVQ dst0+0(FP), DI
	MOVQ dst1+8(FP), BX
	MOVQ a0+16(FP), SI
	MOVQ a1+24(FP), AX
	MOVQ x+32(FP), DX
	MOVQ rows+40(FP), R8
	MOVQ stride+48(FP), R9
	SHLQ $2, R9
	MOVQ n+56(FP), CX
	SHRQ $5, CX
	JZ   eights2

columns2x32:
	LOAD32(DI, Y0, Y1, Y2, Y3)
	LOAD32(BX, Y4, Y5, Y6, Y7)
	MOVQ SI, R10
	MOVQ AX, R13
	MOVQ DX, R11
	MOVQ R8, R12

row2x32:
	VBROADCASTSS (R10), Y8
	VBROADCASTSS (R13), Y9
	ROW32(Y8, R11, Y0, Y1, Y2, Y3)
	ROW32(Y9, R11, Y4, Y5, Y6, Y7)
	ADDQ $4, R10
	ADDQ $4, R13
	ADDQ R9, R11
	DECQ R12
	JNZ  row2x32
	STORE32(DI, Y0, Y1, Y2, Y3)
	STORE32(BX, Y4, Y5, Y6, Y7)
	ADDQ $128, DI
	ADDQ $128, BX
	ADDQ $128, DX
	DECQ CX
	JNZ  columns2x32

eights2:
	MOVQ n+56(FP), CX
	ANDQ $31, CX
	SHRQ $3, CX
	JZ   done2

columns2:
	VMOVUPS (DI), Y0
	VMOVUPS (BX), Y1
	MOVQ    SI, R10
	MOVQ    AX, R13
	MOVQ    DX, R11
	MOVQ    R8, R12

row2:
	VMOVUPS      (R11), Y2
	VBROADCASTSS (R10), Y3
	VBROADCASTSS (R13), Y4
	VMULPS       Y2, Y3, Y3
	VMULPS       Y2, Y4, Y4
	VADDPS       Y3, Y0, Y0
	VADDPS       Y4, Y1, Y1
	ADDQ         $4, R10
	ADDQ         $4, R13
	ADDQ         R9, R11
	DECQ         R12
	JNZ          row2
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, (BX)
	ADDQ         $32, DI
	ADDQ         $32, BX
	ADDQ         $32, DX
	DECQ         CX
	JNZ          columns2

done2:
	VZEROUPPER
	RET

// func dotF16AVX2(a *float32, b *uint16, n int) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

block16:
	VCVTPH2PS (DI), Y4
	VCVTPH2PS 16(DI), Y5
	VCVTPH2PS 32(DI), Y6
	VCVTPH2PS 48(DI), Y7
	VMULPS (SI), Y4, Y4
	VMULPS 32(SI), Y5, Y5
	VMULPS 64(SI), Y6, Y6
	VMULPS 96(SI), Y7, Y7
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  block16

	FOLD(Y0, Y1, Y2, Y3)
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dotF16x4AVX2(w *uint16, xs *[4]*float32, n int, out *[4]float32)
TEXT ·dotF16x4AVX2(SB), NOSPLIT, $0-32
	MOVQ xs+8(FP), DX
	MOVQ out+24(FP), R10
	MOVQ $0, R11

pair16:
	MOVQ w+0(FP), SI
	MOVQ 0(DX)(R11*8), R8
	MOVQ 8(DX)(R11*8), R9
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

block16x4:
	VCVTPH2PS (SI), Y12
	VCVTPH2PS 16(SI), Y13
	VCVTPH2PS 32(SI), Y14
	VCVTPH2PS 48(SI), Y15
	ROW4(R8, Y0, Y1, Y2, Y3)
	ROW4(R9, Y4, Y5, Y6, Y7)
	ADDQ $64, SI
	ADDQ $128, R8
	ADDQ $128, R9
	DECQ CX
	JNZ  block16x4

	FOLD(Y0, Y1, Y2, Y3)
	MOVSS X0, 0(R10)(R11*4)
	VMOVAPS Y4, Y0
	FOLD(Y0, Y5, Y6, Y7)
	MOVSS X0, 4(R10)(R11*4)
	ADDQ $2, R11
	CMPQ R11, $4
	JLT  pair16
	VZEROUPPER
	RET
