//go:build !purego

#include "textflag.h"

// The wide kernel (blocks_wide.go): sixteen rows of weights, expanded by
// the type's expandWide (blocks_wide_avx512_amd64.h) so that a vector
// holds one int16 pair of codes of all sixteen rows (transposeWide turns
// the scales' blocks, and the codes' of the types unpacked a row at a
// time), meet four rows of activations (a QTile) at a time.

// KWARGS: the pointers and counts of the K quants' wide products for row
// R10 of the tile: AX the codes, DX the super-blocks' mins and d (the d
// BX bytes on, the next super-block's SI bytes), R8 the row's K codes,
// R11 its KD, R12 its group sums (the next super-block's DI bytes on), CX
// the super-blocks; Q2_K's (mode&8) super-blocks have sixteen mins of
// halves before d, and sixteen sums a row, so every size doubles.
#define KWARGS \
	MOVQ mode+64(FP), CX \
	SHRQ $3, CX \
	ANDQ $1, CX \
	MOVQ $512, BX \
	SHLQ CX, BX \
	MOVQ $1024, SI \
	SHLQ CX, SI \
	MOVQ $128, DI \
	SHLQ CX, DI \
	MOVQ R10, R12 \
	SHLQ $5, R12 \
	SHLQ CX, R12 \
	ADDQ sums+40(FP), R12 \
	MOVQ w+0(FP), AX \
	MOVQ sc+8(FP), DX \
	MOVQ groups+48(FP), CX \
	SHRQ $3, CX \
	MOVQ R10, R8 \
	IMULQ xstride+24(FP), R8 \
	ADDQ xq+16(FP), R8 \
	MOVQ kd+32(FP), R11 \
	LEAQ (R11)(R10*4), R11

// FOLD8(A0, A1, A2, A3, A4, A5, A6, A7): fold8 (blocks.go) of eight
// vectors of lanes, to A0: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
#define FOLD8(A0, A1, A2, A3, A4, A5, A6, A7) \
	VADDPS A4, A0, A0 \
	VADDPS A6, A2, A2 \
	VADDPS A2, A0, A0 \
	VADDPS A5, A1, A1 \
	VADDPS A7, A3, A3 \
	VADDPS A3, A1, A1 \
	VADDPS A1, A0, A0

// func transposeWide(p unsafe.Pointer, n int)
//
// transposeWide transposes n blocks of 16×16 dwords at p in place (row j
// of a block, 64 bytes, becomes column j): dword unpacks of pairs of rows,
// qword unpacks of pairs of those, then two rounds of 128-bit lane
// shuffles.
TEXT ·transposeWide(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JZ    tdone

tblock:
	VMOVDQU32 0(AX), Z0
	VMOVDQU32 64(AX), Z1
	VMOVDQU32 128(AX), Z2
	VMOVDQU32 192(AX), Z3
	VMOVDQU32 256(AX), Z4
	VMOVDQU32 320(AX), Z5
	VMOVDQU32 384(AX), Z6
	VMOVDQU32 448(AX), Z7
	VMOVDQU32 512(AX), Z8
	VMOVDQU32 576(AX), Z9
	VMOVDQU32 640(AX), Z10
	VMOVDQU32 704(AX), Z11
	VMOVDQU32 768(AX), Z12
	VMOVDQU32 832(AX), Z13
	VMOVDQU32 896(AX), Z14
	VMOVDQU32 960(AX), Z15
	VPUNPCKLDQ Z1, Z0, Z16
	VPUNPCKHDQ Z1, Z0, Z17
	VPUNPCKLDQ Z3, Z2, Z18
	VPUNPCKHDQ Z3, Z2, Z19
	VPUNPCKLDQ Z5, Z4, Z20
	VPUNPCKHDQ Z5, Z4, Z21
	VPUNPCKLDQ Z7, Z6, Z22
	VPUNPCKHDQ Z7, Z6, Z23
	VPUNPCKLDQ Z9, Z8, Z24
	VPUNPCKHDQ Z9, Z8, Z25
	VPUNPCKLDQ Z11, Z10, Z26
	VPUNPCKHDQ Z11, Z10, Z27
	VPUNPCKLDQ Z13, Z12, Z28
	VPUNPCKHDQ Z13, Z12, Z29
	VPUNPCKLDQ Z15, Z14, Z30
	VPUNPCKHDQ Z15, Z14, Z31
	VPUNPCKLQDQ Z18, Z16, Z0
	VPUNPCKHQDQ Z18, Z16, Z1
	VPUNPCKLQDQ Z19, Z17, Z2
	VPUNPCKHQDQ Z19, Z17, Z3
	VPUNPCKLQDQ Z22, Z20, Z4
	VPUNPCKHQDQ Z22, Z20, Z5
	VPUNPCKLQDQ Z23, Z21, Z6
	VPUNPCKHQDQ Z23, Z21, Z7
	VPUNPCKLQDQ Z26, Z24, Z8
	VPUNPCKHQDQ Z26, Z24, Z9
	VPUNPCKLQDQ Z27, Z25, Z10
	VPUNPCKHQDQ Z27, Z25, Z11
	VPUNPCKLQDQ Z30, Z28, Z12
	VPUNPCKHQDQ Z30, Z28, Z13
	VPUNPCKLQDQ Z31, Z29, Z14
	VPUNPCKHQDQ Z31, Z29, Z15
	VSHUFI32X4 $0x88, Z4, Z0, Z16
	VSHUFI32X4 $0xDD, Z4, Z0, Z20
	VSHUFI32X4 $0x88, Z12, Z8, Z24
	VSHUFI32X4 $0xDD, Z12, Z8, Z28
	VSHUFI32X4 $0x88, Z5, Z1, Z17
	VSHUFI32X4 $0xDD, Z5, Z1, Z21
	VSHUFI32X4 $0x88, Z13, Z9, Z25
	VSHUFI32X4 $0xDD, Z13, Z9, Z29
	VSHUFI32X4 $0x88, Z6, Z2, Z18
	VSHUFI32X4 $0xDD, Z6, Z2, Z22
	VSHUFI32X4 $0x88, Z14, Z10, Z26
	VSHUFI32X4 $0xDD, Z14, Z10, Z30
	VSHUFI32X4 $0x88, Z7, Z3, Z19
	VSHUFI32X4 $0xDD, Z7, Z3, Z23
	VSHUFI32X4 $0x88, Z15, Z11, Z27
	VSHUFI32X4 $0xDD, Z15, Z11, Z31
	VSHUFI32X4 $0x88, Z24, Z16, Z0
	VMOVDQU32 Z0, 0(AX)
	VSHUFI32X4 $0xDD, Z24, Z16, Z1
	VMOVDQU32 Z1, 512(AX)
	VSHUFI32X4 $0x88, Z28, Z20, Z2
	VMOVDQU32 Z2, 256(AX)
	VSHUFI32X4 $0xDD, Z28, Z20, Z3
	VMOVDQU32 Z3, 768(AX)
	VSHUFI32X4 $0x88, Z25, Z17, Z0
	VMOVDQU32 Z0, 64(AX)
	VSHUFI32X4 $0xDD, Z25, Z17, Z1
	VMOVDQU32 Z1, 576(AX)
	VSHUFI32X4 $0x88, Z29, Z21, Z2
	VMOVDQU32 Z2, 320(AX)
	VSHUFI32X4 $0xDD, Z29, Z21, Z3
	VMOVDQU32 Z3, 832(AX)
	VSHUFI32X4 $0x88, Z26, Z18, Z0
	VMOVDQU32 Z0, 128(AX)
	VSHUFI32X4 $0xDD, Z26, Z18, Z1
	VMOVDQU32 Z1, 640(AX)
	VSHUFI32X4 $0x88, Z30, Z22, Z2
	VMOVDQU32 Z2, 384(AX)
	VSHUFI32X4 $0xDD, Z30, Z22, Z3
	VMOVDQU32 Z3, 896(AX)
	VSHUFI32X4 $0x88, Z27, Z19, Z0
	VMOVDQU32 Z0, 192(AX)
	VSHUFI32X4 $0xDD, Z27, Z19, Z1
	VMOVDQU32 Z1, 704(AX)
	VSHUFI32X4 $0x88, Z31, Z23, Z2
	VMOVDQU32 Z2, 448(AX)
	VSHUFI32X4 $0xDD, Z31, Z23, Z3
	VMOVDQU32 Z3, 960(AX)
	ADDQ $1024, AX
	DECQ CX
	JNZ  tblock

tdone:
	VZEROUPPER
	RET

// GK(W, X, XO, ZC): lane k of a group for the sixteen weight rows: the
// int16 pairs of codes at W(AX) and 1024+W(AX) (even inputs 4k, 4k+2, odd
// ones 4k+1, 4k+3) meet the activation row's pairs at X(R8) and XO(R8)
// broadcast, exactly in int32, added to ZC: a group's eight lanes go to
// four such sums, which GSUM adds.
#define GK(W, X, XO, ZC) \
	VMOVDQU32 W(AX), Z3 \
	VPDPWSSD.BCST X(R8), Z3, ZC \
	VMOVDQU32 1024+W(AX), Z4 \
	VPDPWSSD.BCST XO(R8), Z4, ZC

// GSUM(ZA): the group's integer sum S (of Z5..Z8, exact) as
// f32(f32(S)·sd) (sd in Z1) added to ZA: dotBlocksGo's term of the group,
// for sixteen weight rows at once.
#define GSUM(ZA) \
	VPADDD Z6, Z5, Z5 \
	VPADDD Z8, Z7, Z7 \
	VPADDD Z7, Z5, Z5 \
	VCVTDQ2PS Z5, Z5 \
	VMULPS Z1, Z5, Z5 \
	VADDPS Z5, ZA, ZA

#define GZERO \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7 \
	VPXORD Z8, Z8, Z8

// GGROUP(W, X, XO, ZA): a group whose lanes' codes are at W(AX) and whose
// activations are at X(R8), the odd inputs XO bytes after the even ones.
#define GGROUP(W, X, XO, ZA) \
	GZERO \
	GK(W, X, X+XO, Z5) \
	GK(W+64, X+4, X+XO+4, Z6) \
	GK(W+128, X+8, X+XO+8, Z7) \
	GK(W+192, X+12, X+XO+12, Z8) \
	GK(W+256, X+16, X+XO+16, Z5) \
	GK(W+320, X+20, X+XO+20, Z6) \
	GK(W+384, X+24, X+XO+24, Z7) \
	GK(W+448, X+28, X+XO+28, Z8) \
	GSUM(ZA)

// GPAIR(ZE, ZO): a pair of groups, the even one's term to ZE, the odd
// one's to ZO; then the pointers and count move on.
#define GPAIR(ZE, ZO) \
	VMOVUPS (DX), Z0 \
	VMULPS.BCST (R9), Z0, Z1 \
	GGROUP(0, 0, 64, ZE) \
	VMOVUPS 64(DX), Z0 \
	VMULPS.BCST 32(R9), Z0, Z1 \
	GGROUP(512, 32, 64, ZO) \
	ADDQ $2048, AX \
	ADDQ $128, DX \
	ADDQ $768, R8 \
	ADDQ $768, R9 \
	SUBQ $2, CX

// GLONE(ZA): a lone last group (an even one): the row's 32 codes at r·64
// of the pair's slot (R8 is at r·128), its d at 256 + r·4.
#define GLONE(ZA) \
	MOVQ R10, BX \
	SHLQ $6, BX \
	SUBQ BX, R8 \
	MOVQ R8, R9 \
	SUBQ BX, R9 \
	LEAQ 256(R9)(R10*4), R9 \
	VMOVUPS (DX), Z0 \
	VMULPS.BCST (R9), Z0, Z1 \
	GGROUP(0, 0, 32, ZA)

// func dotWideVNNI(w *int32, sc *float32, xq *int16, groups int, acc *float32, mode int, out *float32, ostride int)
//
// dotWideVNNI adds the products of groups groups of sixteen expanded
// weight rows (w: 2 KiB a pair of groups, as transposeWide leaves them;
// sc: each group's sixteen scales) with each of the four rows of a QTile
// (xq: its data from the first of the groups, which is a multiple of 8)
// to the row's lanes: Z16..Z23, group g's term in Z16+g%8 (dotBlocksGo's
// acc, a weight row a vector lane). With mode&1 the lanes start from acc
// (512 bytes a row), where the groups before left them; with mode&2 they
// fold to the row's sixteen results at out + r·ostride, else they go
// back to acc.
TEXT ·dotWideVNNI(SB), NOSPLIT, $0-64
	MOVQ xq+16(FP), R11
	MOVQ acc+32(FP), R12
	MOVQ out+48(FP), R13
	XORQ R10, R10

wrow:
	TESTQ $1, mode+40(FP)
	JNZ   wload
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	JMP wgo

wload:
	VMOVUPS 0(R12), Z16
	VMOVUPS 64(R12), Z17
	VMOVUPS 128(R12), Z18
	VMOVUPS 192(R12), Z19
	VMOVUPS 256(R12), Z20
	VMOVUPS 320(R12), Z21
	VMOVUPS 384(R12), Z22
	VMOVUPS 448(R12), Z23

wgo:
#define WLANE0 Z16
#define WLANE1 Z17
#define WLANE2 Z18
#define WLANE3 Z19
#define WLANE4 Z20
#define WLANE5 Z21
#define WLANE6 Z22
#define WLANE7 Z23
#define WPAIR GPAIR
#define WLONE GLONE
#include "blocks_wide_walk_amd64.h"

wend:
	TESTQ $2, mode+40(FP)
	JZ    wstore
	// dotBlocksGo's fold, plus the fold of the mins' lanes (zeros: the
	// types here have no mins).
	FOLD8(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)
	VPXORD Z1, Z1, Z1
	VADDPS Z1, Z16, Z0
	MOVQ  R10, BX
	IMULQ ostride+56(FP), BX
	VMOVUPS Z0, (R13)(BX*1)
	JMP   wnext

wstore:
	VMOVUPS Z16, 0(R12)
	VMOVUPS Z17, 64(R12)
	VMOVUPS Z18, 128(R12)
	VMOVUPS Z19, 192(R12)
	VMOVUPS Z20, 256(R12)
	VMOVUPS Z21, 320(R12)
	VMOVUPS Z22, 384(R12)
	VMOVUPS Z23, 448(R12)

wnext:
	ADDQ $512, R12
	INCQ R10
	CMPQ R10, $4
	JLT  wrow
	VZEROUPPER
	RET

// The K quants' wide kernel (dotBlocksKGo's bits, blocks_k.go): sixteen
// weight rows expanded by the type's expandKWide
// (blocks_k_wide_amd64.h), their codes already times their half
// groups' factors, meet a QTile's K codes a row at a time. Per
// super-block and row of activations, each half group's sixteen integer
// sums f·half (one a weight row, in four lanes' multiply-adds of codes
// and broadcast activations) become f32, are scaled by f32(d·D) (the
// rows' d times the activation row's KD, Z0) and are added to the
// accumulator of the half's lane (kLane: Z16 + L); the mins, where the
// type has them, meet the row's group sums (Q2_K's: half groups' sums)
// into eight more (Z9..Z15, Z4: macc). Registers: AX the expanded codes,
// DX the super-blocks' mins and d (the d BX bytes on, the next
// super-block's SI bytes), R8 the row's K codes, R11 its KD, R12 its
// group sums (the next super-block's DI bytes on), CX the super-blocks
// left, R9 the row's lanes in acc (1536 bytes a row: the 16 lanes, then
// the 8 of the mins), R10 the row.

// KWK(W, X, ZC): lane k of a group for the sixteen weight rows: the int16
// pairs of codes at W(AX) and 1024+W(AX) meet the activation row's pairs
// at X(R8) and X+64(R8), broadcast, added to ZC exactly in int32.
#define KWK(W, X, ZC) \
	VMOVDQU32 W(AX), Z3 \
	VPDPWSSD.BCST X(R8), Z3, ZC \
	VMOVDQU32 1024+W(AX), Z2 \
	VPDPWSSD.BCST X+64(R8), Z2, ZC

// KWHALF(ZA, ZL): a half's sums f·half (ZA) as f32(f32(f·half)·s), added
// to ZL.
#define KWHALF(ZA, ZL) \
	VCVTDQ2PS ZA, ZA \
	VMULPS Z0, ZA, ZA \
	VADDPS ZA, ZL, ZL

// KWGROUP(W, X, ZA, ZB): a group whose lanes' codes are at W(AX) and whose
// activations are at X(R8): its first half (lanes 0..3) to ZA, its second
// to ZB, each half's sums one chain of multiply-adds.
#define KWGROUP(W, X, ZA, ZB) \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z7, Z7, Z7 \
	KWK(W, X, Z5) \
	KWK(W+256, X+16, Z7) \
	KWK(W+64, X+4, Z5) \
	KWK(W+320, X+20, Z7) \
	KWK(W+128, X+8, Z5) \
	KWK(W+384, X+24, Z7) \
	KWK(W+192, X+12, Z5) \
	KWK(W+448, X+28, Z7) \
	KWHALF(Z5, ZA) \
	KWHALF(Z7, ZB)

// KWMIN(J, ZM): group j's mins of the sixteen rows (dmin·m) times the
// row's sum of the group, taken from ZM: the twin's f32(−(dmin·m)·sum)
// added.
#define KWMIN(J, ZM) \
	VMOVUPS J*64(DX), Z1 \
	VMULPS.BCST J*4(R12), Z1, Z1 \
	VSUBPS Z1, ZM, ZM

// func dotWideKVNNI(w *int32, sc *float32, xq *int16, xstride int, kd, sums *float32, groups int, acc *float32, mode int, out *float32, ostride int)
//
// dotWideKVNNI adds the products of groups groups (whole super-blocks) of
// sixteen expanded weight rows (w: 2 KiB a pair of groups; sc: 1 KiB a
// super-block) with each of the four rows of a QTile (xq its K codes from
// the first of the groups, rows xstride bytes apart; kd and sums its KD
// and KSums from the first super-block) to the row's lanes. With mode&1
// the lanes start from acc (1536 bytes a row), else from zero; with
// mode&2 they fold (foldLanes) to the row's sixteen results at out +
// r·ostride, else they go back to acc; mode&4 says the type has a min a
// group, mode&8 a min a half group (Q2_K: sc 2 KiB a super-block, its
// sixteen mins then its d; sums the tiles' half sums, QTile.Halves).
TEXT ·dotWideKVNNI(SB), NOSPLIT, $0-88
	XORQ R10, R10

kwrow:
	MOVQ R10, R9
	IMULQ $1536, R9
	ADDQ acc+56(FP), R9
	TESTQ $1, mode+64(FP)
	JNZ   kwload
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z4, Z4, Z4
	JMP   kwgo

kwload:
	VMOVUPS 0(R9), Z16
	VMOVUPS 64(R9), Z17
	VMOVUPS 128(R9), Z18
	VMOVUPS 192(R9), Z19
	VMOVUPS 256(R9), Z20
	VMOVUPS 320(R9), Z21
	VMOVUPS 384(R9), Z22
	VMOVUPS 448(R9), Z23
	VMOVUPS 512(R9), Z24
	VMOVUPS 576(R9), Z25
	VMOVUPS 640(R9), Z26
	VMOVUPS 704(R9), Z27
	VMOVUPS 768(R9), Z28
	VMOVUPS 832(R9), Z29
	VMOVUPS 896(R9), Z30
	VMOVUPS 960(R9), Z31
	VMOVUPS 1024(R9), Z9
	VMOVUPS 1088(R9), Z10
	VMOVUPS 1152(R9), Z11
	VMOVUPS 1216(R9), Z12
	VMOVUPS 1280(R9), Z13
	VMOVUPS 1344(R9), Z14
	VMOVUPS 1408(R9), Z15
	VMOVUPS 1472(R9), Z4

kwgo:
	KWARGS

kwsuper:
	VMOVUPS (DX)(BX*1), Z0
	VMULPS.BCST (R11), Z0, Z0
	// The mins: a group's (mode&4) or, for Q2_K (mode&8), the halves'
	// 0..7 to their lanes, then 8..15's (dotBlocksKGo's order).
	TESTQ $12, mode+64(FP)
	JZ    kwnomin
	KWMIN(0, Z9)
	KWMIN(1, Z10)
	KWMIN(2, Z11)
	KWMIN(3, Z12)
	KWMIN(4, Z13)
	KWMIN(5, Z14)
	KWMIN(6, Z15)
	KWMIN(7, Z4)
	TESTQ $8, mode+64(FP)
	JZ    kwnomin
	KWMIN(8, Z9)
	KWMIN(9, Z10)
	KWMIN(10, Z11)
	KWMIN(11, Z12)
	KWMIN(12, Z13)
	KWMIN(13, Z14)
	KWMIN(14, Z15)
	KWMIN(15, Z4)

kwnomin:
	// Group j's halves 2j and 2j+1 go to lanes kLane(2j), kLane(2j+1).
	KWGROUP(0, 0, Z16, Z20)
	KWGROUP(512, 32, Z24, Z28)
	KWGROUP(2048, 128, Z17, Z21)
	KWGROUP(2560, 160, Z25, Z29)
	KWGROUP(4096, 256, Z18, Z22)
	KWGROUP(4608, 288, Z26, Z30)
	KWGROUP(6144, 384, Z19, Z23)
	KWGROUP(6656, 416, Z27, Z31)
	ADDQ $8192, AX
	ADDQ SI, DX
	ADDQ $512, R8
	ADDQ $16, R11
	ADDQ DI, R12
	DECQ CX
	JNZ  kwsuper

	TESTQ $2, mode+64(FP)
	JZ    kwstore
	// foldLanes: a_k = lane k + lane 8+k, then fold8(a) + fold8(macc),
	// fold8(v) = ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)).
	VADDPS Z24, Z16, Z16
	VADDPS Z25, Z17, Z17
	VADDPS Z26, Z18, Z18
	VADDPS Z27, Z19, Z19
	VADDPS Z28, Z20, Z20
	VADDPS Z29, Z21, Z21
	VADDPS Z30, Z22, Z22
	VADDPS Z31, Z23, Z23
	FOLD8(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)
	FOLD8(Z9, Z10, Z11, Z12, Z13, Z14, Z15, Z4)
	VADDPS Z9, Z16, Z0
	MOVQ  R10, BX
	IMULQ ostride+80(FP), BX
	ADDQ  out+72(FP), BX
	VMOVUPS Z0, (BX)
	JMP   kwnext

kwstore:
	VMOVUPS Z16, 0(R9)
	VMOVUPS Z17, 64(R9)
	VMOVUPS Z18, 128(R9)
	VMOVUPS Z19, 192(R9)
	VMOVUPS Z20, 256(R9)
	VMOVUPS Z21, 320(R9)
	VMOVUPS Z22, 384(R9)
	VMOVUPS Z23, 448(R9)
	VMOVUPS Z24, 512(R9)
	VMOVUPS Z25, 576(R9)
	VMOVUPS Z26, 640(R9)
	VMOVUPS Z27, 704(R9)
	VMOVUPS Z28, 768(R9)
	VMOVUPS Z29, 832(R9)
	VMOVUPS Z30, 896(R9)
	VMOVUPS Z31, 960(R9)
	VMOVUPS Z9, 1024(R9)
	VMOVUPS Z10, 1088(R9)
	VMOVUPS Z11, 1152(R9)
	VMOVUPS Z12, 1216(R9)
	VMOVUPS Z13, 1280(R9)
	VMOVUPS Z14, 1344(R9)
	VMOVUPS Z15, 1408(R9)
	VMOVUPS Z4, 1472(R9)

kwnext:
	INCQ R10
	CMPQ R10, $4
	JLT  kwrow
	VZEROUPPER
	RET

// ---- The AVX2 form: the wide kernel for CPUs without AVX-512
// (blocks_wide.go), on the same expanded layouts (the expansions of
// blocks_wide_rows_amd64.h and blocks_k_wide_amd64.h, then
// transposeWideAVX2) and the products of blocks_wide_dot_avx2_amd64.h.

// TR8(SRC, DST): the 8×8 block of dwords whose rows lie 64 bytes apart at
// SRC to DST transposed (row j becomes column j): dword unpacks of pairs
// of rows, qword unpacks of pairs of those, then the 128-bit halves
// exchanged. Every row is read before any is written, so SRC may be DST.
#define TR8(SRC, DST) \
	VMOVDQU 0+SRC, Y0 \
	VMOVDQU 64+SRC, Y1 \
	VMOVDQU 128+SRC, Y2 \
	VMOVDQU 192+SRC, Y3 \
	VMOVDQU 256+SRC, Y4 \
	VMOVDQU 320+SRC, Y5 \
	VMOVDQU 384+SRC, Y6 \
	VMOVDQU 448+SRC, Y7 \
	VPUNPCKLDQ Y1, Y0, Y8 \
	VPUNPCKHDQ Y1, Y0, Y9 \
	VPUNPCKLDQ Y3, Y2, Y10 \
	VPUNPCKHDQ Y3, Y2, Y11 \
	VPUNPCKLDQ Y5, Y4, Y12 \
	VPUNPCKHDQ Y5, Y4, Y13 \
	VPUNPCKLDQ Y7, Y6, Y14 \
	VPUNPCKHDQ Y7, Y6, Y15 \
	VPUNPCKLQDQ Y10, Y8, Y0 \
	VPUNPCKHQDQ Y10, Y8, Y1 \
	VPUNPCKLQDQ Y11, Y9, Y2 \
	VPUNPCKHQDQ Y11, Y9, Y3 \
	VPUNPCKLQDQ Y14, Y12, Y4 \
	VPUNPCKHQDQ Y14, Y12, Y5 \
	VPUNPCKLQDQ Y15, Y13, Y6 \
	VPUNPCKHQDQ Y15, Y13, Y7 \
	VPERM2I128 $0x20, Y4, Y0, Y8 \
	VPERM2I128 $0x20, Y5, Y1, Y9 \
	VPERM2I128 $0x20, Y6, Y2, Y10 \
	VPERM2I128 $0x20, Y7, Y3, Y11 \
	VPERM2I128 $0x31, Y4, Y0, Y12 \
	VPERM2I128 $0x31, Y5, Y1, Y13 \
	VPERM2I128 $0x31, Y6, Y2, Y14 \
	VPERM2I128 $0x31, Y7, Y3, Y15 \
	VMOVDQU Y8, 0+DST \
	VMOVDQU Y9, 64+DST \
	VMOVDQU Y10, 128+DST \
	VMOVDQU Y11, 192+DST \
	VMOVDQU Y12, 256+DST \
	VMOVDQU Y13, 320+DST \
	VMOVDQU Y14, 384+DST \
	VMOVDQU Y15, 448+DST

// func transposeWideAVX2(p unsafe.Pointer, n int)
//
// transposeWideAVX2 is transposeWide in AVX2: each 16×16 block of dwords
// as four 8×8 ones, the two off the diagonal exchanged (the upper right
// one's transpose through the frame).
TEXT ·transposeWideAVX2(SB), NOSPLIT, $512-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JZ    t2done

t2block:
	TR8(0(AX), 0(AX))
	TR8(544(AX), 544(AX))
	TR8(32(AX), 0(SP))
	TR8(512(AX), 32(AX))
	VMOVDQU 0(SP), Y0
	VMOVDQU 64(SP), Y1
	VMOVDQU 128(SP), Y2
	VMOVDQU 192(SP), Y3
	VMOVDQU 256(SP), Y4
	VMOVDQU 320(SP), Y5
	VMOVDQU 384(SP), Y6
	VMOVDQU 448(SP), Y7
	VMOVDQU Y0, 512(AX)
	VMOVDQU Y1, 576(AX)
	VMOVDQU Y2, 640(AX)
	VMOVDQU Y3, 704(AX)
	VMOVDQU Y4, 768(AX)
	VMOVDQU Y5, 832(AX)
	VMOVDQU Y6, 896(AX)
	VMOVDQU Y7, 960(AX)
	ADDQ $1024, AX
	DECQ CX
	JNZ  t2block

t2done:
	VZEROUPPER
	RET

#define W2DOT ·dotWideAVX2
#define KW2DOT ·dotWideKAVX2
#include "blocks_wide_dot_avx2_amd64.h"
#undef W2DOT
#undef KW2DOT
#define AVXVNNI
#define W2DOT ·dotWideAVXVNNI
#define KW2DOT ·dotWideKAVXVNNI
#include "blocks_wide_dot_avx2_amd64.h"
#undef W2DOT
#undef KW2DOT
#undef AVXVNNI
