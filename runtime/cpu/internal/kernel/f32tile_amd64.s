//go:build !purego

#include "textflag.h"

// Macros of axpyRows4AVX512 (below).

// AX4PTRS loads the four dst pointers into R8..R11 and the four a
// pointers into R12..R15, each advanced by the column offset BX (dst) or
// not (a).
#define AX4PTRS \
	MOVQ dst+0(FP), DX \
	MOVQ 0(DX), R8 \
	MOVQ 8(DX), R9 \
	MOVQ 16(DX), R10 \
	MOVQ 24(DX), R11 \
	ADDQ BX, R8 \
	ADDQ BX, R9 \
	ADDQ BX, R10 \
	ADDQ BX, R11 \
	MOVQ a+8(FP), DX \
	MOVQ 0(DX), R12 \
	MOVQ 8(DX), R13 \
	MOVQ 16(DX), R14 \
	MOVQ 24(DX), R15

// AX4BCAST broadcasts a_r[t] (t: the row counter AX) into Z20..Z23.
#define AX4BCAST \
	VBROADCASTSS (R12)(AX*4), Z20 \
	VBROADCASTSS (R13)(AX*4), Z21 \
	VBROADCASTSS (R14)(AX*4), Z22 \
	VBROADCASTSS (R15)(AX*4), Z23

// AX4MA adds the broadcast B times X (one register of x) to D.
#define AX4MA(X, B, T, D) \
	VMULPS X, B, T \
	VADDPS T, D, D



// dotF32TileAVX512 is DotF32Block's register tile: four weight rows
// against three input rows, twelve sums, each in its own 32 lanes (two
// 512-bit registers: lanes 0..15 and 16..31), products and sums as
// separate instructions (no FMA), so each lane is dotF32Go's. The sums
// of output (input i, weight j) are Z(8i+2j) (lanes 0..15) and
// Z(8i+2j+1) (lanes 16..31); the weight blocks sit in Z24..Z27, an input
// block in Z28, products in Z29..Z31. dotF16TileAVX512 (DotF16Block) is
// the same body (TILE) with the weights' halves widened as they load
// (VCVTPH2PS, exact): the f32 tile's bits on the widened weights.

// FOLD512 leaves in X24's low lane the fold dotF32Go spells out of the
// 32 lanes in LO (0..15) and HI (16..31), whose low halves are YLO and
// YHI: (r0+r1) + (r2+r3) of the four eight-lane quarters, then
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
#define FOLD512(LO, HI, YLO, YHI) \
	VEXTRACTF64X4 $1, LO, Y24 \
	VADDPS Y24, YLO, Y24 \
	VEXTRACTF64X4 $1, HI, Y25 \
	VADDPS Y25, YHI, Y25 \
	VADDPS Y25, Y24, Y24 \
	VEXTRACTF32X4 $1, Y24, X25 \
	VADDPS X25, X24, X24 \
	VMOVHLPS X24, X24, X25 \
	VADDPS X25, X24, X24 \
	VMOVSHDUP X24, X25 \
	VADDSS X25, X24, X24

// The weights' loads: WL32/WL16 a block half (sixteen values) at byte
// offset OFF of the half's weights (CX: the block's offset in the row),
// WT32/WT16 value CX of the row into X25's low lane, two instructions
// each (TAIL512's jumps count them).
#define WL32(OFF, R, Z) VMOVUPS OFF(R)(CX*1), Z
#define WL16(OFF, R, Z) VCVTPH2PS OFF(R)(CX*1), Z
#define WT32(W) \
	VMOVSS (W)(CX*4), X25 \
	VMOVAPS X25, X25
#define WT16(W) \
	VPBROADCASTW (W)(CX*2), X25 \
	VCVTPH2PS X25, X25

// TAIL512 adds to X24, one product and one sum at a time, the products
// of weight row W and input row X past the blocks (BX bytes of x in) up
// to k, as DotF32's tail does; WT loads a weight.
#define TAIL512(WT, W, X) \
	MOVQ BX, CX \
	SHRQ $2, CX \
	CMPQ CX, k+24(FP) \
	JGE  8(PC) \
	WT(W) \
	VMULSS (X)(CX*4), X25, X25 \
	VADDSS X25, X24, X24 \
	INCQ CX \
	CMPQ CX, k+24(FP) \
	JLT  -6(PC)

// OUT folds output (LO, HI) of weight row W and input row X, adds the
// tail and stores it at DST.
#define OUT(WT, LO, HI, YLO, YHI, W, X, DST) \
	FOLD512(LO, HI, YLO, YHI) \
	TAIL512(WT, W, X) \
	VMOVSS X24, DST

// ROW12 multiplies the input block at X (offset AX, +OFF bytes) by the
// four weight blocks and adds the products to A0..A3.
#define ROW12(X, OFF, A0, A1, A2, A3) \
	VMOVUPS OFF(X)(AX*1), Z28 \
	VMULPS Z24, Z28, Z29 \
	VMULPS Z25, Z28, Z30 \
	VMULPS Z26, Z28, Z31 \
	VADDPS Z29, A0, A0 \
	VADDPS Z30, A1, A1 \
	VMULPS Z27, Z28, Z29 \
	VADDPS Z31, A2, A2 \
	VADDPS Z29, A3, A3

// HALF does one half (XOFF 0: lanes 0..15, 64: lanes 16..31; WOFF the
// weights' byte offset of the same values) of a 32-value block for the
// twelve sums.
#define HALF(WL, XOFF, WOFF, B00, B01, B02, B03, B10, B11, B12, B13, B20, B21, B22, B23) \
	WL(WOFF, SI, Z24) \
	WL(WOFF, DI, Z25) \
	WL(WOFF, R8, Z26) \
	WL(WOFF, R9, Z27) \
	ROW12(DX, XOFF, B00, B01, B02, B03) \
	ROW12(R15, XOFF, B10, B11, B12, B13) \
	ROW12(R14, XOFF, B20, B21, B22, B23)

// TILE is the body of dotF32TileAVX512 and dotF16TileAVX512 for the
// weights' loads WL and WT, their element size WSIZE (4 or 2 bytes) and
// log2 WSHIFT, and the byte offset WOFF of a block's second half.
#define TILE(WL, WT, WSIZE, WSHIFT, WOFF) \
	MOVQ w+0(FP), SI \
	MOVQ k+24(FP), R12 \
	SHLQ $WSHIFT, R12 \
	LEAQ (SI)(R12*1), DI \
	LEAQ (DI)(R12*1), R8 \
	LEAQ (R8)(R12*1), R9 \
	MOVQ x+8(FP), DX \
	MOVQ nb+16(FP), BX \
	SHLQ $2, BX \
	MOVQ xstride+32(FP), R13 \
	SHLQ $2, R13 \
	MOVQ m+40(FP), R11 \
	MOVQ out+48(FP), R10 \
	MOVQ stride+56(FP), R12 \
	SHLQ $2, R12 \
rows: \
	LEAQ (DX)(R13*1), R15 \
	LEAQ (R15)(R13*1), R14 \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z4, Z4, Z4 \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
	VPXORD Z8, Z8, Z8 \
	VPXORD Z9, Z9, Z9 \
	VPXORD Z10, Z10, Z10 \
	VPXORD Z11, Z11, Z11 \
	VPXORD Z12, Z12, Z12 \
	VPXORD Z13, Z13, Z13 \
	VPXORD Z14, Z14, Z14 \
	VPXORD Z15, Z15, Z15 \
	VPXORD Z16, Z16, Z16 \
	VPXORD Z17, Z17, Z17 \
	VPXORD Z18, Z18, Z18 \
	VPXORD Z19, Z19, Z19 \
	VPXORD Z20, Z20, Z20 \
	VPXORD Z21, Z21, Z21 \
	VPXORD Z22, Z22, Z22 \
	VPXORD Z23, Z23, Z23 \
	XORQ AX, AX \
	XORQ CX, CX \
	TESTQ BX, BX \
	JZ   fold \
block: \
	HALF(WL, 0, 0, Z0, Z2, Z4, Z6, Z8, Z10, Z12, Z14, Z16, Z18, Z20, Z22) \
	HALF(WL, 64, WOFF, Z1, Z3, Z5, Z7, Z9, Z11, Z13, Z15, Z17, Z19, Z21, Z23) \
	ADDQ $128, AX \
	ADDQ $(32*WSIZE), CX \
	CMPQ AX, BX \
	JLT  block \
fold: \
	OUT(WT, Z0, Z1, Y0, Y1, SI, DX, 0(R10)) \
	OUT(WT, Z2, Z3, Y2, Y3, DI, DX, 4(R10)) \
	OUT(WT, Z4, Z5, Y4, Y5, R8, DX, 8(R10)) \
	OUT(WT, Z6, Z7, Y6, Y7, R9, DX, 12(R10)) \
	OUT(WT, Z8, Z9, Y8, Y9, SI, R15, 0(R10)(R12*1)) \
	OUT(WT, Z10, Z11, Y10, Y11, DI, R15, 4(R10)(R12*1)) \
	OUT(WT, Z12, Z13, Y12, Y13, R8, R15, 8(R10)(R12*1)) \
	OUT(WT, Z14, Z15, Y14, Y15, R9, R15, 12(R10)(R12*1)) \
	OUT(WT, Z16, Z17, Y16, Y17, SI, R14, 0(R10)(R12*2)) \
	OUT(WT, Z18, Z19, Y18, Y19, DI, R14, 4(R10)(R12*2)) \
	OUT(WT, Z20, Z21, Y20, Y21, R8, R14, 8(R10)(R12*2)) \
	OUT(WT, Z22, Z23, Y22, Y23, R9, R14, 12(R10)(R12*2)) \
	LEAQ (R10)(R12*2), R10 \
	ADDQ R12, R10 \
	LEAQ (R14)(R13*1), DX \
	SUBQ $3, R11 \
	JNZ  rows \
	VZEROUPPER

// func dotF32TileAVX512(w, x *float32, nb, k, xstride, m int, out *float32, stride int)
//
// Weight rows j = 0..3 at w + j·k, input rows i = 0..m-1 (m a multiple of
// three) at x + i·xstride: out[i·stride + j] = DotF32 of the two, its
// first nb values (a multiple of 32) in lanes, the rest one by one.
TEXT ·dotF32TileAVX512(SB), NOSPLIT, $0-64
	TILE(WL32, WT32, 4, 2, 64)
	RET

// func dotF16TileAVX512(w *uint16, x *float32, nb, k, xstride, m int, out *float32, stride int)
//
// dotF32TileAVX512 for weight rows of halves.
TEXT ·dotF16TileAVX512(SB), NOSPLIT, $0-64
	TILE(WL16, WT16, 2, 1, 32)
	RET

// dotF32KeysAVX512 is DotF32Keys' kernel: sixteen keys, stored transposed
// (kt: value d of key t at d·16 + t), against m rows of x, sixteen scores a
// row in one register, each lane its key's DotF32. dotF32Go's 32 lanes
// become, for key t, accumulators indexed by lane j of the definition:
// lane j's four chains (j, j+8, j+16, j+24) are Z0..Z3 over the blocks,
// folded (j, j+8) + (j+16, j+24) into r_j (Z8+j), then the r_j as the
// definition folds its eight lanes, then the tail one value at a time: the
// same products and sums in the same order, sixteen keys at once.

// KLANE computes r_J into R for the row at SI (blocks of 32 values) and
// the keys at DI: a loop over BX blocks (at least one).
#define KLANE(J, R) \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	MOVQ SI, R8 \
	MOVQ DI, R9 \
	MOVQ BX, CX \
	VBROADCASTSS (4*(J))(R8), Z16 \
	VMULPS (64*(J))(R9), Z16, Z4 \
	VADDPS Z4, Z0, Z0 \
	VBROADCASTSS (4*((J)+8))(R8), Z17 \
	VMULPS (64*((J)+8))(R9), Z17, Z5 \
	VADDPS Z5, Z1, Z1 \
	VBROADCASTSS (4*((J)+16))(R8), Z18 \
	VMULPS (64*((J)+16))(R9), Z18, Z6 \
	VADDPS Z6, Z2, Z2 \
	VBROADCASTSS (4*((J)+24))(R8), Z19 \
	VMULPS (64*((J)+24))(R9), Z19, Z7 \
	VADDPS Z7, Z3, Z3 \
	ADDQ $128, R8 \
	ADDQ $2048, R9 \
	DECQ CX \
	JNZ  -15(PC) \
	VADDPS Z1, Z0, Z0 \
	VADDPS Z3, Z2, Z2 \
	VADDPS Z2, Z0, R

// func dotF32KeysAVX512(x *float32, nb, k, xstride, m int, kt, out *float32, stride int)
//
// Rows i = 0..m-1 of x at x + i·xstride, k values each (the first nb, a
// multiple of 32 and not 0, in lanes); out[i·stride + t] = DotF32 of row i
// and key t, for the sixteen keys in kt.
TEXT ·dotF32KeysAVX512(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), BX
	SHRQ $5, BX
	MOVQ xstride+24(FP), R13
	SHLQ $2, R13
	MOVQ m+32(FP), R11
	MOVQ kt+40(FP), DI
	MOVQ out+48(FP), R10
	MOVQ stride+56(FP), R12
	SHLQ $2, R12
	MOVQ k+16(FP), DX
	SUBQ nb+8(FP), DX

krows:
	KLANE(0, Z8)
	KLANE(1, Z9)
	KLANE(2, Z10)
	KLANE(3, Z11)
	KLANE(4, Z12)
	KLANE(5, Z13)
	KLANE(6, Z14)
	KLANE(7, Z15)
	VADDPS Z12, Z8, Z8
	VADDPS Z14, Z10, Z10
	VADDPS Z10, Z8, Z8
	VADDPS Z13, Z9, Z9
	VADDPS Z15, Z11, Z11
	VADDPS Z11, Z9, Z9
	VADDPS Z9, Z8, Z8
	MOVQ DX, CX
	TESTQ CX, CX
	JZ   ktail
	VBROADCASTSS (R8), Z16
	VMULPS (R9), Z16, Z4
	VADDPS Z4, Z8, Z8
	ADDQ $4, R8
	ADDQ $64, R9
	DECQ CX
	JNZ  -6(PC)

ktail:
	VMOVUPS Z8, (R10)
	ADDQ R12, R10
	ADDQ R13, SI
	DECQ R11
	JNZ  krows
	VZEROUPPER
	RET

// axpyRows4AVX512 is AxpyRows4's kernel: four sums over the same rows of
// x, their columns kept in registers while every row adds to them, each
// element one product and one sum a row, rows in order (no FMA): Axpy's
// loop row after row for each of the four. Columns go 64 at a time (four
// registers a sum: Z0..Z15), then 16, then 8; x's columns in Z16..Z19,
// a's broadcasts in Z20..Z23, products in Z24..Z31.

// func axpyRows4AVX512(dst, a *[4]*float32, x *float32, rows, stride, n int)
TEXT ·axpyRows4AVX512(SB), NOSPLIT, $0-48
	MOVQ stride+32(FP), DI
	SHLQ $2, DI
	XORQ BX, BX // column offset in bytes
	MOVQ n+40(FP), CX
	SHLQ $2, CX

cols64:
	MOVQ CX, DX
	SUBQ BX, DX
	CMPQ DX, $256
	JLT  cols16
	AX4PTRS
	VMOVUPS 0(R8), Z0
	VMOVUPS 64(R8), Z1
	VMOVUPS 128(R8), Z2
	VMOVUPS 192(R8), Z3
	VMOVUPS 0(R9), Z4
	VMOVUPS 64(R9), Z5
	VMOVUPS 128(R9), Z6
	VMOVUPS 192(R9), Z7
	VMOVUPS 0(R10), Z8
	VMOVUPS 64(R10), Z9
	VMOVUPS 128(R10), Z10
	VMOVUPS 192(R10), Z11
	VMOVUPS 0(R11), Z12
	VMOVUPS 64(R11), Z13
	VMOVUPS 128(R11), Z14
	VMOVUPS 192(R11), Z15
	MOVQ x+16(FP), SI
	ADDQ BX, SI
	XORQ AX, AX

rows64:
	VMOVUPS 0(SI), Z16
	VMOVUPS 64(SI), Z17
	VMOVUPS 128(SI), Z18
	VMOVUPS 192(SI), Z19
	AX4BCAST
	AX4MA(Z16, Z20, Z24, Z0)
	AX4MA(Z17, Z20, Z25, Z1)
	AX4MA(Z18, Z20, Z26, Z2)
	AX4MA(Z19, Z20, Z27, Z3)
	AX4MA(Z16, Z21, Z28, Z4)
	AX4MA(Z17, Z21, Z29, Z5)
	AX4MA(Z18, Z21, Z30, Z6)
	AX4MA(Z19, Z21, Z31, Z7)
	AX4MA(Z16, Z22, Z24, Z8)
	AX4MA(Z17, Z22, Z25, Z9)
	AX4MA(Z18, Z22, Z26, Z10)
	AX4MA(Z19, Z22, Z27, Z11)
	AX4MA(Z16, Z23, Z28, Z12)
	AX4MA(Z17, Z23, Z29, Z13)
	AX4MA(Z18, Z23, Z30, Z14)
	AX4MA(Z19, Z23, Z31, Z15)
	ADDQ DI, SI
	INCQ AX
	CMPQ AX, rows+24(FP)
	JLT  rows64
	VMOVUPS Z0, 0(R8)
	VMOVUPS Z1, 64(R8)
	VMOVUPS Z2, 128(R8)
	VMOVUPS Z3, 192(R8)
	VMOVUPS Z4, 0(R9)
	VMOVUPS Z5, 64(R9)
	VMOVUPS Z6, 128(R9)
	VMOVUPS Z7, 192(R9)
	VMOVUPS Z8, 0(R10)
	VMOVUPS Z9, 64(R10)
	VMOVUPS Z10, 128(R10)
	VMOVUPS Z11, 192(R10)
	VMOVUPS Z12, 0(R11)
	VMOVUPS Z13, 64(R11)
	VMOVUPS Z14, 128(R11)
	VMOVUPS Z15, 192(R11)
	ADDQ $256, BX
	JMP  cols64

cols16:
	CMPQ DX, $64
	JLT  cols8
	AX4PTRS
	VMOVUPS (R8), Z0
	VMOVUPS (R9), Z1
	VMOVUPS (R10), Z2
	VMOVUPS (R11), Z3
	MOVQ x+16(FP), SI
	ADDQ BX, SI
	XORQ AX, AX

rows16:
	VMOVUPS (SI), Z16
	AX4BCAST
	AX4MA(Z16, Z20, Z24, Z0)
	AX4MA(Z16, Z21, Z25, Z1)
	AX4MA(Z16, Z22, Z26, Z2)
	AX4MA(Z16, Z23, Z27, Z3)
	ADDQ DI, SI
	INCQ AX
	CMPQ AX, rows+24(FP)
	JLT  rows16
	VMOVUPS Z0, (R8)
	VMOVUPS Z1, (R9)
	VMOVUPS Z2, (R10)
	VMOVUPS Z3, (R11)
	ADDQ $64, BX
	MOVQ CX, DX
	SUBQ BX, DX
	JMP  cols16

cols8:
	CMPQ DX, $32
	JLT  done4
	AX4PTRS
	VMOVUPS (R8), Y0
	VMOVUPS (R9), Y1
	VMOVUPS (R10), Y2
	VMOVUPS (R11), Y3
	MOVQ x+16(FP), SI
	ADDQ BX, SI
	XORQ AX, AX

rows8:
	VMOVUPS (SI), Y16
	VBROADCASTSS (R12)(AX*4), Y20
	VBROADCASTSS (R13)(AX*4), Y21
	VBROADCASTSS (R14)(AX*4), Y22
	VBROADCASTSS (R15)(AX*4), Y23
	AX4MA(Y16, Y20, Y24, Y0)
	AX4MA(Y16, Y21, Y25, Y1)
	AX4MA(Y16, Y22, Y26, Y2)
	AX4MA(Y16, Y23, Y27, Y3)
	ADDQ DI, SI
	INCQ AX
	CMPQ AX, rows+24(FP)
	JLT  rows8
	VMOVUPS Y0, (R8)
	VMOVUPS Y1, (R9)
	VMOVUPS Y2, (R10)
	VMOVUPS Y3, (R11)
	ADDQ $32, BX
	MOVQ CX, DX
	SUBQ BX, DX
	JMP  cols8

done4:
	VZEROUPPER
	RET
