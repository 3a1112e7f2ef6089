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

// The axpyRows kernels keep columns of dst in registers while every row
// adds to them. One 8-column register takes a chain of dependent adds, one
// per row, each waiting out the last one's latency; so they take 32
// columns at a time (four independent chains per sum), then 8 at a time
// for the rest. Column blocks never mix, so each element is the same sum.
// One body serves x in f32 and in halves (widened exactly by VCVTPH2PS):
// the macros below take the loads of x and its element size as arguments.
// Registers: dst columns in Y0..Y7, a's broadcasts in Y8 and Y9, x in
// Y10..Y13, products in Y14 and Y15.

// XF32 and XF16 load the 32 values of x at X, XF32x8 and XF16x8 eight of
// them, as f32 into Y10 (..Y13).
#define XF32(X) \
	VMOVUPS 0(X), Y10 \
	VMOVUPS 32(X), Y11 \
	VMOVUPS 64(X), Y12 \
	VMOVUPS 96(X), Y13
#define XF16(X) \
	VCVTPH2PS 0(X), Y10 \
	VCVTPH2PS 16(X), Y11 \
	VCVTPH2PS 32(X), Y12 \
	VCVTPH2PS 48(X), Y13
#define XF32x8(X) VMOVUPS (X), Y10
#define XF16x8(X) VCVTPH2PS (X), Y10

// MULADD32 adds the broadcast A times Y10..Y13 to D0..D3.
#define MULADD32(A, D0, D1, D2, D3) \
	VMULPS Y10, A, Y14 \
	VMULPS Y11, A, Y15 \
	VADDPS Y14, D0, D0 \
	VADDPS Y15, D1, D1 \
	VMULPS Y12, A, Y14 \
	VMULPS Y13, A, Y15 \
	VADDPS Y14, D2, D2 \
	VADDPS Y15, D3, D3

#define MULADD8(A, D) \
	VMULPS Y10, A, Y14 \
	VADDPS Y14, D, D

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

// AXPYROWS is the body of axpyRows(dst, a, x *, rows, stride, n int) for
// x's loads X32 and X8 and its element size SIZE (4 or 2 bytes).
#define AXPYROWS(X32, X8, SIZE) \
	MOVQ dst+0(FP), DI \
	MOVQ a+8(FP), SI \
	MOVQ x+16(FP), DX \
	MOVQ rows+24(FP), R8 \
	MOVQ stride+32(FP), R9 \
	IMULQ $SIZE, R9 \
	MOVQ n+40(FP), CX \
	SHRQ $5, CX \
	JZ   eights \
columns32: \
	LOAD32(DI, Y0, Y1, Y2, Y3) \
	MOVQ SI, R10 \
	MOVQ DX, R11 \
	MOVQ R8, R12 \
row32: \
	X32(R11) \
	VBROADCASTSS (R10), Y8 \
	MULADD32(Y8, Y0, Y1, Y2, Y3) \
	ADDQ $4, R10 \
	ADDQ R9, R11 \
	DECQ R12 \
	JNZ  row32 \
	STORE32(DI, Y0, Y1, Y2, Y3) \
	ADDQ $128, DI \
	ADDQ $(32*SIZE), DX \
	DECQ CX \
	JNZ  columns32 \
eights: \
	MOVQ n+40(FP), CX \
	ANDQ $31, CX \
	SHRQ $3, CX \
	JZ   done \
columns: \
	VMOVUPS (DI), Y0 \
	MOVQ SI, R10 \
	MOVQ DX, R11 \
	MOVQ R8, R12 \
row: \
	X8(R11) \
	VBROADCASTSS (R10), Y8 \
	MULADD8(Y8, Y0) \
	ADDQ $4, R10 \
	ADDQ R9, R11 \
	DECQ R12 \
	JNZ  row \
	VMOVUPS Y0, (DI) \
	ADDQ $32, DI \
	ADDQ $(8*SIZE), DX \
	DECQ CX \
	JNZ  columns \
done: \
	VZEROUPPER

// AXPYROWS2 is AXPYROWS for two sums over the same rows of x,
// axpyRows2(dst0, dst1, a0, a1, x *, rows, stride, n int): each row's
// block of x is loaded (and widened) once for both.
#define AXPYROWS2(X32, X8, SIZE) \
	MOVQ dst0+0(FP), DI \
	MOVQ dst1+8(FP), BX \
	MOVQ a0+16(FP), SI \
	MOVQ a1+24(FP), AX \
	MOVQ x+32(FP), DX \
	MOVQ rows+40(FP), R8 \
	MOVQ stride+48(FP), R9 \
	IMULQ $SIZE, R9 \
	MOVQ n+56(FP), CX \
	SHRQ $5, CX \
	JZ   eights \
columns32: \
	LOAD32(DI, Y0, Y1, Y2, Y3) \
	LOAD32(BX, Y4, Y5, Y6, Y7) \
	MOVQ SI, R10 \
	MOVQ AX, R13 \
	MOVQ DX, R11 \
	MOVQ R8, R12 \
row32: \
	X32(R11) \
	VBROADCASTSS (R10), Y8 \
	VBROADCASTSS (R13), Y9 \
	MULADD32(Y8, Y0, Y1, Y2, Y3) \
	MULADD32(Y9, Y4, Y5, Y6, Y7) \
	ADDQ $4, R10 \
	ADDQ $4, R13 \
	ADDQ R9, R11 \
	DECQ R12 \
	JNZ  row32 \
	STORE32(DI, Y0, Y1, Y2, Y3) \
	STORE32(BX, Y4, Y5, Y6, Y7) \
	ADDQ $128, DI \
	ADDQ $128, BX \
	ADDQ $(32*SIZE), DX \
	DECQ CX \
	JNZ  columns32 \
eights: \
	MOVQ n+56(FP), CX \
	ANDQ $31, CX \
	SHRQ $3, CX \
	JZ   done \
columns: \
	VMOVUPS (DI), Y0 \
	VMOVUPS (BX), Y1 \
	MOVQ SI, R10 \
	MOVQ AX, R13 \
	MOVQ DX, R11 \
	MOVQ R8, R12 \
row: \
	X8(R11) \
	VBROADCASTSS (R10), Y8 \
	VBROADCASTSS (R13), Y9 \
	MULADD8(Y8, Y0) \
	MULADD8(Y9, Y1) \
	ADDQ $4, R10 \
	ADDQ $4, R13 \
	ADDQ R9, R11 \
	DECQ R12 \
	JNZ  row \
	VMOVUPS Y0, (DI) \
	VMOVUPS Y1, (BX) \
	ADDQ $32, DI \
	ADDQ $32, BX \
	ADDQ $(8*SIZE), DX \
	DECQ CX \
	JNZ  columns \
done: \
	VZEROUPPER

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

// func axpyRowsAVX2(dst, a, x *float32, rows, stride, n int)
TEXT ·axpyRowsAVX2(SB), NOSPLIT, $0-48
	AXPYROWS(XF32, XF32x8, 4)
	RET

// func axpyRowsF16AVX2(dst, a *float32, x *uint16, rows, stride, n int)
TEXT ·axpyRowsF16AVX2(SB), NOSPLIT, $0-48
	AXPYROWS(XF16, XF16x8, 2)
	RET

// func axpyRows2AVX2(dst0, dst1, a0, a1, x *float32, rows, stride, n int)
TEXT ·axpyRows2AVX2(SB), NOSPLIT, $0-64
	AXPYROWS2(XF32, XF32x8, 4)
	RET

// func axpyRows2F16AVX2(dst0, dst1, a0, a1 *float32, x *uint16, rows, stride, n int)
TEXT ·axpyRows2F16AVX2(SB), NOSPLIT, $0-64
	AXPYROWS2(XF16, XF16x8, 2)
	RET

// func dotF16AVX2(a *float32, b *uint16, n, k int) float32
// Blocks over the first n values, then the tail up to k one product and
// one sum at a time, each half widened alone (VPINSRW into X10's low lane,
// VCVTPH2PS): DotF16 whole, as its Go tail would sum it.
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-36
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
	MOVQ k+24(FP), CX
	SUBQ n+16(FP), CX
	JZ   done16

tail16:
	VPINSRW   $0, (DI), X10, X10
	VCVTPH2PS X10, X10
	VMULSS    (SI), X10, X10
	VADDSS    X10, X0, X0
	ADDQ      $2, DI
	ADDQ      $4, SI
	DECQ      CX
	JNZ       tail16

done16:
	VZEROUPPER
	MOVSS X0, ret+32(FP)
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

DATA one32<>+0(SB)/4, $0x3f800000 // 1.0
GLOBL one32<>(SB), RODATA|NOPTR, $4

// func siluMulAVX2(x, e, u *float32, n int)
// x[i] = (x[i]·(1/(1 + e[i])))·u[i] over n (a multiple of 8) values, each
// operation rounding on its own as SiLUMul's loop does.
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), DI
	MOVQ         e+8(FP), SI
	MOVQ         u+16(FP), DX
	MOVQ         n+24(FP), CX
	SHRQ         $3, CX
	VBROADCASTSS one32<>(SB), Y15

silu8:
	VADDPS  (SI), Y15, Y0
	VDIVPS  Y0, Y15, Y0
	VMULPS  (DI), Y0, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     silu8
	VZEROUPPER
	RET
