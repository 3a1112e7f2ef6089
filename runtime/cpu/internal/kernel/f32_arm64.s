//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// The NEON twins of dotF32Go and of Axpy's loop: products and sums as
// separate instructions (FMUL, FADD; no FMLA), so that each rounds as the
// Go code does. dotF32Go's 32 lanes are eight 4-lane registers, V0..V7,
// folded by FOLD32 as the twin spells out.

// PRODUCTS adds the products of the 32 values in A0..A0+7 and B0..B0+7 to
// the accumulators ACC..ACC+7 (each product rounded, then each sum).
#define PRODUCTS(A0, B0, ACC) \
	FMUL4S(B0, A0, A0) \
	FMUL4S(B0+1, A0+1, A0+1) \
	FMUL4S(B0+2, A0+2, A0+2) \
	FMUL4S(B0+3, A0+3, A0+3) \
	FMUL4S(B0+4, A0+4, A0+4) \
	FMUL4S(B0+5, A0+5, A0+5) \
	FMUL4S(B0+6, A0+6, A0+6) \
	FMUL4S(B0+7, A0+7, A0+7) \
	FADD4S(A0, ACC, ACC) \
	FADD4S(A0+1, ACC+1, ACC+1) \
	FADD4S(A0+2, ACC+2, ACC+2) \
	FADD4S(A0+3, ACC+3, ACC+3) \
	FADD4S(A0+4, ACC+4, ACC+4) \
	FADD4S(A0+5, ACC+5, ACC+5) \
	FADD4S(A0+6, ACC+6, ACC+6) \
	FADD4S(A0+7, ACC+7, ACC+7)

// WIDEN widens the 32 halves in H..H+3 to f32 in D..D+7.
#define WIDEN(H, D) \
	FCVTL4S(H, D) \
	FCVTL24S(H, D+1) \
	FCVTL4S(H+1, D+2) \
	FCVTL24S(H+1, D+3) \
	FCVTL4S(H+2, D+4) \
	FCVTL24S(H+2, D+5) \
	FCVTL4S(H+3, D+6) \
	FCVTL24S(H+3, D+7)

// ZERO16 clears V0..V15, the accumulators of two rows.
#define ZERO16 \
	VEOR V0.B16, V0.B16, V0.B16 \
	VEOR V1.B16, V1.B16, V1.B16 \
	VEOR V2.B16, V2.B16, V2.B16 \
	VEOR V3.B16, V3.B16, V3.B16 \
	VEOR V4.B16, V4.B16, V4.B16 \
	VEOR V5.B16, V5.B16, V5.B16 \
	VEOR V6.B16, V6.B16, V6.B16 \
	VEOR V7.B16, V7.B16, V7.B16 \
	VEOR V8.B16, V8.B16, V8.B16 \
	VEOR V9.B16, V9.B16, V9.B16 \
	VEOR V10.B16, V10.B16, V10.B16 \
	VEOR V11.B16, V11.B16, V11.B16 \
	VEOR V12.B16, V12.B16, V12.B16 \
	VEOR V13.B16, V13.B16, V13.B16 \
	VEOR V14.B16, V14.B16, V14.B16 \
	VEOR V15.B16, V15.B16, V15.B16

// The axpyRows kernels keep eight columns of dst in two registers while
// every row adds to them. One body serves x in f32 and in halves (widened
// exactly by FCVTL): XF32 and XF16 load the eight values of x at R7 as f32
// into V3 and V4, SIZE is x's element size in bytes.
#define XF32 VLD1 (R7), [V3.S4, V4.S4]
#define XF16 \
	VLD1 (R7), [V3.H8] \
	FCVTL24S(3, 4) \
	FCVTL4S(3, 3)

// AXPYROWS is the body of axpyRows(dst, a, x *, rows, stride, n int).
#define AXPYROWS(X, SIZE) \
	MOVD dst+0(FP), R0 \
	MOVD a+8(FP), R1 \
	MOVD x+16(FP), R2 \
	MOVD rows+24(FP), R3 \
	MOVD stride+32(FP), R4 \
	MOVD $SIZE, R9 \
	MUL  R9, R4, R4 \
	MOVD n+40(FP), R5 \
	LSR  $3, R5 \
columns: \
	VLD1 (R0), [V0.S4, V1.S4] \
	MOVD R1, R6 \
	MOVD R2, R7 \
	MOVD R3, R8 \
row: \
	VLD1R.P 4(R6), [V2.S4] \
	X \
	FMUL4S(2, 3, 3) \
	FMUL4S(2, 4, 4) \
	FADD4S(3, 0, 0) \
	FADD4S(4, 1, 1) \
	ADD     R4, R7, R7 \
	SUB     $1, R8 \
	CBNZ    R8, row \
	VST1.P  [V0.S4, V1.S4], 32(R0) \
	ADD     $(8*SIZE), R2 \
	SUB     $1, R5 \
	CBNZ    R5, columns

// AXPYROWS2 is AXPYROWS for two sums over the same rows,
// axpyRows2(dst0, dst1, a0, a1, x *, rows, stride, n int): V0, V1 and V5,
// V6 stay in registers, each row of x is loaded (and widened) once.
#define AXPYROWS2(X, SIZE) \
	MOVD dst0+0(FP), R0 \
	MOVD dst1+8(FP), R9 \
	MOVD a0+16(FP), R1 \
	MOVD a1+24(FP), R10 \
	MOVD x+32(FP), R2 \
	MOVD rows+40(FP), R3 \
	MOVD stride+48(FP), R4 \
	MOVD $SIZE, R12 \
	MUL  R12, R4, R4 \
	MOVD n+56(FP), R5 \
	LSR  $3, R5 \
columns2: \
	VLD1 (R0), [V0.S4, V1.S4] \
	VLD1 (R9), [V5.S4, V6.S4] \
	MOVD R1, R6 \
	MOVD R10, R11 \
	MOVD R2, R7 \
	MOVD R3, R8 \
row2: \
	VLD1R.P 4(R6), [V2.S4] \
	VLD1R.P 4(R11), [V7.S4] \
	X \
	FMUL4S(2, 3, 16) \
	FMUL4S(2, 4, 17) \
	FMUL4S(7, 3, 18) \
	FMUL4S(7, 4, 19) \
	FADD4S(16, 0, 0) \
	FADD4S(17, 1, 1) \
	FADD4S(18, 5, 5) \
	FADD4S(19, 6, 6) \
	ADD     R4, R7, R7 \
	SUB     $1, R8 \
	CBNZ    R8, row2 \
	VST1.P  [V0.S4, V1.S4], 32(R0) \
	VST1.P  [V5.S4, V6.S4], 32(R9) \
	ADD     $(8*SIZE), R2 \
	SUB     $1, R5 \
	CBNZ    R5, columns2

// func dotF32NEON(a, b *float32, n int) float32
TEXT ·dotF32NEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	LSR $5, R2
	ZERO16

block:
	VLD1.P 64(R0), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R0), [V12.S4, V13.S4, V14.S4, V15.S4]
	VLD1.P 64(R1), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R1), [V20.S4, V21.S4, V22.S4, V23.S4]
	PRODUCTS(8, 16, 0)
	SUB $1, R2
	CBNZ R2, block

	FOLD32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 8)
	FMOVS F0, ret+24(FP)
	RET

// func axpyRowsNEON(dst, a, x *float32, rows, stride, n int)
// Eight columns of dst at a time stay in V0, V1 while every row adds to
// them; a[r] is loaded into all four lanes of V2.
// func axpyRowsNEON(dst, a, x *float32, rows, stride, n int)
TEXT ·axpyRowsNEON(SB), NOSPLIT, $0-48
	AXPYROWS(XF32, 4)
	RET

// func axpyRowsF16NEON(dst, a *float32, x *uint16, rows, stride, n int)
TEXT ·axpyRowsF16NEON(SB), NOSPLIT, $0-48
	AXPYROWS(XF16, 2)
	RET

// func axpyRows2NEON(dst0, dst1, a0, a1, x *float32, rows, stride, n int)
TEXT ·axpyRows2NEON(SB), NOSPLIT, $0-64
	AXPYROWS2(XF32, 4)
	RET

// func axpyRows2F16NEON(dst0, dst1, a0, a1 *float32, x *uint16, rows, stride, n int)
TEXT ·axpyRows2F16NEON(SB), NOSPLIT, $0-64
	AXPYROWS2(XF16, 2)
	RET

// func dotF16NEON(a *float32, b *uint16, n int) float32
TEXT ·dotF16NEON(SB), NOSPLIT, $0-28
	MOVD a+0(FP), R0
	MOVD b+8(FP), R1
	MOVD n+16(FP), R2
	LSR $5, R2
	ZERO16

block16:
	VLD1.P 64(R0), [V8.S4, V9.S4, V10.S4, V11.S4]
	VLD1.P 64(R0), [V12.S4, V13.S4, V14.S4, V15.S4]
	VLD1.P 64(R1), [V24.H8, V25.H8, V26.H8, V27.H8]
	WIDEN(24, 16)
	PRODUCTS(8, 16, 0)
	SUB $1, R2
	CBNZ R2, block16

	FOLD32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 8)
	FMOVS F0, ret+24(FP)
	RET

// ROWS2 and ROWS2END bracket the loop over the blocks of two rows (32
// accumulators for four rows would take every register): rows at R2 and
// R3 sum into V0..V7 and V8..V15 against the w block in V16..V23, each
// row's block loaded into V24..V31. ROWS2 starts a pair: w at R0 (from
// R7), the block count in R1 (from R8), the rows from the xs pointers at R5.
#define ROWS2 \
	MOVD R7, R0 \
	MOVD R8, R1 \
	MOVD 0(R5), R2 \
	MOVD 8(R5), R3 \
	ZERO16

// ROWSBLOCK adds one block of both rows, the w block being in V16..V23.
#define ROWSBLOCK \
	VLD1.P 64(R2), [V24.S4, V25.S4, V26.S4, V27.S4] \
	VLD1.P 64(R2), [V28.S4, V29.S4, V30.S4, V31.S4] \
	PRODUCTS(24, 16, 0) \
	VLD1.P 64(R3), [V24.S4, V25.S4, V26.S4, V27.S4] \
	VLD1.P 64(R3), [V28.S4, V29.S4, V30.S4, V31.S4] \
	PRODUCTS(24, 16, 8)

// ROWS2END writes the pair's two results at R4 and advances R5 and R4 to
// the next pair.
#define ROWS2END \
	FOLD32(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 16) \
	FOLD32(8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 16) \
	FMOVS F0, 0(R4) \
	FMOVS F8, 4(R4) \
	ADD $16, R5 \
	ADD $8, R4

// func dotF32x4NEON(w *float32, xs *[4]*float32, n int, out *[4]float32)
TEXT ·dotF32x4NEON(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R7
	MOVD xs+8(FP), R5
	MOVD n+16(FP), R8
	LSR $5, R8
	MOVD out+24(FP), R4
	MOVD $2, R6

pairs:
	ROWS2

block:
	VLD1.P 64(R0), [V16.S4, V17.S4, V18.S4, V19.S4]
	VLD1.P 64(R0), [V20.S4, V21.S4, V22.S4, V23.S4]
	ROWSBLOCK
	SUB $1, R1
	CBNZ R1, block

	ROWS2END
	SUB $1, R6
	CBNZ R6, pairs
	RET

// func dotF16x4NEON(w *uint16, xs *[4]*float32, n int, out *[4]float32)
TEXT ·dotF16x4NEON(SB), NOSPLIT, $0-32
	MOVD w+0(FP), R7
	MOVD xs+8(FP), R5
	MOVD n+16(FP), R8
	LSR $5, R8
	MOVD out+24(FP), R4
	MOVD $2, R6

pairs:
	ROWS2

block:
	// The w block's halves widen through V24..V27, before the rows'
	// values are loaded there.
	VLD1.P 64(R0), [V24.H8, V25.H8, V26.H8, V27.H8]
	WIDEN(24, 16)
	ROWSBLOCK
	SUB $1, R1
	CBNZ R1, block

	ROWS2END
	SUB $1, R6
	CBNZ R6, pairs
	RET

// func axpyNEON(dst *float32, a float32, x *float32, n int)
TEXT ·axpyNEON(SB), NOSPLIT, $0-32
	MOVD dst+0(FP), R0
	FMOVS a+8(FP), F30
	MOVD x+16(FP), R1
	MOVD n+24(FP), R2
	LSR $3, R2

eight:
	VLD1.P 32(R1), [V0.S4, V1.S4]
	VLD1 (R0), [V2.S4, V3.S4]
	FMULE4S(30, 0, 0, 0)
	FMULE4S(30, 0, 1, 1)
	FADD4S(0, 2, 2)
	FADD4S(1, 3, 3)
	VST1.P [V2.S4, V3.S4], 32(R0)
	SUB $1, R2
	CBNZ R2, eight
	RET
