// The AVX-512 block products for four rows of activations at once
// (blocks_amd64.s includes it twice per type, as TILENAME with the
// type's CONSTS, SCALES, UNPACK and UNPACK2 and flags, as the one-row loop
// of blocks_avx512_amd64.h, and with VNNI defined for CPUs with
// VPDPWSSD): each weight row's codes unpack and its scales decode once for
// the four rows, and each row's products, scaling and accumulation are
// the one-row loop's in the same order, so every result has dotBlocksGo's
// bits. The activations are packed four rows together (QTile.Data): per
// pair of groups the four rows' 64 codes (512 bytes), then their d spread
// over the pair's lanes (d of the even group in lanes 0..7, of the odd one
// in 8..15: 256 bytes), a lone last group likewise (64 bytes of codes and
// 64 of d a row); and per chunk of eight groups the rows' 16 ds, then
// their 16 half sums (for Q2_K), for the min terms (QTile.DS, Halves).
// f32(S·d) is then one multiply of the pair's scales (Z19) by the row's d,
// the one-row loop's product in the other order, which is the same float.
//
// Registers besides the one-row loop's: Z20..Z23 the four rows'
// accumulators, Y24..Y27 their min lanes, Z19 the pair's scales, Y7 the
// mask of a last chunk's groups; with ROWS8 (two tiles, eight rows: the
// types without mins, TILENAME's second form) Z24..Z27 the second tile's
// accumulators, R11 its data, Y28 zero. The frame holds the next row's scale
// words (128), the rows left (136) and the next outputs (144) (with
// ROWS8 also the next row's codes (120) and lanes in acc (112)); outputs of
// activation row r lie r·ostride bytes after the first row's.

#ifdef MIN1
#define MINS
#endif
#ifdef MIN2
#define MINS
#endif

// TROW(P, X, R, ZA) adds row R's products with the pair unpacked in Z8
// and Z9 (its codes at X+R·128(P), P the tile's data) to ZA, scaled by
// f32(S·d): the type's scales of the pair in Z19, the row's d at
// X+512+R·64(P).
#ifdef VNNI
#define TDOT(P, X, R) \
	VPMADDWD X+R*128(P), Z8, Z10 \
	VPDPWSSD X+R*128+64(P), Z9, Z10
#else
#define TDOT(P, X, R) \
	VPMADDWD X+R*128(P), Z8, Z10 \
	VPMADDWD X+R*128+64(P), Z9, Z11 \
	VPADDD Z11, Z10, Z10
#endif
#define TROW(P, X, R, ZA) \
	TDOT(P, X, R) \
	VCVTDQ2PS Z10, Z10 \
	VMULPS X+512+R*64(P), Z19, Z11 \
	VMULPS Z11, Z10, Z10 \
	VADDPS Z10, ZA, ZA

// With ROWS8 (types without mins or half-group scales), a second tile's
// four rows (its data at R11) meet the same unpacked pair too, into
// Z24..Z27: the unpacking and scale spreading then cost an eighth of a
// pair per row, not a quarter, the kernel's one cost besides each row's
// own six instructions. That form takes a block of a row's columns
// (groups groups from codes, scales and the tiles' data as given, each
// row's codes cstride bytes after the last's): mode&1 starts each row's
// lanes from acc (512 bytes a row of weights), where the block before
// left them, and mode&2 folds them to the outputs, else they go back to
// acc (dotBlocksTile8Asm).
#ifdef ROWS8
#define TGROUP(X) \
	UNPACK2 \
	VPERMPS Z3, Z16, Z19 \
	VPADDD Z17, Z16, Z16 \
	TROW(R8, X, 0, Z20) \
	TROW(R8, X, 1, Z21) \
	TROW(R8, X, 2, Z22) \
	TROW(R8, X, 3, Z23) \
	TROW(R11, X, 0, Z24) \
	TROW(R11, X, 1, Z25) \
	TROW(R11, X, 2, Z26) \
	TROW(R11, X, 3, Z27)
#else
#define TGROUP(X) \
	UNPACK2 \
	VPERMPS Z3, Z16, Z19 \
	VPADDD Z17, Z16, Z16 \
	TROW(R8, X, 0, Z20) \
	TROW(R8, X, 1, Z21) \
	TROW(R8, X, 2, Z22) \
	TROW(R8, X, 3, Z23)
#endif

// TSINGLE(P, R, ZA): row R's products with a lone last group unpacked in
// Y8 and Y9 (VEX writes: the upper halves stay zero).
#define TSINGLE(P, R, ZA) \
	VPMADDWD R*64(P), Y8, Y10 \
	VPMADDWD R*64+32(P), Y9, Y11 \
	VPADDD Y11, Y10, Y10 \
	VCVTDQ2PS Y10, Y10 \
	VMULPS 256+R*64(P), Y19, Y11 \
	VMULPS Y11, Y10, Y10 \
	VADDPS Z10, ZA, ZA

#ifdef MIN1
#ifdef FULL
#define TMIN1(R, YM) \
	VSHUFPS $0xDD, Y9, Y8, Y11 \
	VPERMPD $0xD8, Y11, Y11 \
	VMULPS Y11, Y5, Y11 \
	VADDPS Y11, YM, YM
#else
#define TMIN1(R, YM) \
	VSHUFPS $0xDD, Y9, Y8, Y11 \
	VPERMPD $0xD8, Y11, Y11 \
	VMULPS Y11, Y5, Y11 \
	VANDPS Y7, Y11, Y11 \
	VADDPS Y11, YM, YM
#endif
#else
#define TMIN1(R, YM)
#endif

#ifdef MIN2
#define TMIN2(R, YM) \
	VMOVUPS R*64(R13), Y8 \
	VMOVUPS R*64+32(R13), Y9 \
	VSHUFPS $0x88, Y9, Y8, Y11 \
	VPERMPD $0xD8, Y11, Y11 \
	VMULPS Y11, Y5, Y11 \
	VADDPS Y11, YM, YM \
	VSHUFPS $0xDD, Y9, Y8, Y11 \
	VPERMPD $0xD8, Y11, Y11 \
	VMULPS Y11, Y6, Y11 \
	VADDPS Y11, YM, YM
#else
#define TMIN2(R, YM)
#endif

// TMINS(R, YM): row R's min terms of the chunk (ds at R·64(R12)) added
// to YM, as the one-row loop computes them.
#define TMINS(R, YM) \
	VMOVUPS R*64(R12), Y8 \
	VMOVUPS R*64+32(R12), Y9 \
	TMIN1(R, YM) \
	TMIN2(R, YM)

// TFOLD(ZA, YM, R): dotBlocksGo's horizontal sums of row R's lanes, to
// its output.
#define TFOLD(ZA, YM, R) \
	VEXTRACTF64X4 $1, ZA, Y9 \
	VMOVAPS ZA, Z8 \
	VADDPS Y9, Y8, Y8 \
	VEXTRACTF128 $1, Y8, X9 \
	VADDPS X9, X8, X8 \
	VMOVHLPS X8, X8, X9 \
	VADDPS X9, X8, X8 \
	VMOVSHDUP X8, X9 \
	VADDSS X9, X8, X8 \
	VMOVAPS YM, Y10 \
	VEXTRACTF128 $1, Y10, X9 \
	VADDPS X9, X10, X10 \
	VMOVHLPS X10, X10, X9 \
	VADDPS X9, X10, X10 \
	VMOVSHDUP X10, X9 \
	VADDSS X9, X10, X10 \
	VADDSS X10, X8, X8 \
	VMOVSS X8, (AX) \
	ADDQ BX, AX

#ifdef ROWS8
// TFOLD8: TFOLD of the eight rows Z20..Z27 at once, to the outputs at AX
// + r·BX: each step adds the lanes TFOLD's adds, of two rows an
// instruction, then four, then eight, so each result is the same float
// (TFOLD's mins fold is of zeros here: the +0 it adds, added too). Per
// row, TFOLD's chain of 17 instructions cost a 576-wide weight row's
// eight products as much as two of its nine pairs of groups; this is 35
// for the eight.
#define TFOLD8 \
	VSHUFF64X2 $0x44, Z21, Z20, Z8 \
	VSHUFF64X2 $0xEE, Z21, Z20, Z9 \
	VADDPS Z9, Z8, Z0 \
	VSHUFF64X2 $0x44, Z23, Z22, Z8 \
	VSHUFF64X2 $0xEE, Z23, Z22, Z9 \
	VADDPS Z9, Z8, Z1 \
	VSHUFF64X2 $0x44, Z25, Z24, Z8 \
	VSHUFF64X2 $0xEE, Z25, Z24, Z9 \
	VADDPS Z9, Z8, Z2 \
	VSHUFF64X2 $0x44, Z27, Z26, Z8 \
	VSHUFF64X2 $0xEE, Z27, Z26, Z9 \
	VADDPS Z9, Z8, Z4 \
	VSHUFF32X4 $0x88, Z1, Z0, Z8 \
	VSHUFF32X4 $0xDD, Z1, Z0, Z9 \
	VADDPS Z9, Z8, Z5 \
	VSHUFF32X4 $0x88, Z4, Z2, Z8 \
	VSHUFF32X4 $0xDD, Z4, Z2, Z9 \
	VADDPS Z9, Z8, Z6 \
	VSHUFPS $0x44, Z6, Z5, Z8 \
	VSHUFPS $0xEE, Z6, Z5, Z9 \
	VADDPS Z9, Z8, Z8 \
	VMOVSHDUP Z8, Z9 \
	VADDPS Z9, Z8, Z8 \
	VADDPS Z28, Z8, Z8 \
	LEAQ (BX)(BX*2), CX \
	LEAQ (AX)(BX*4), DX \
	VMOVSS X8, (AX) \
	VEXTRACTPS $2, X8, (DX) \
	VEXTRACTF32X4 $1, Z8, X9 \
	VMOVSS X9, (AX)(BX*1) \
	VEXTRACTPS $2, X9, (DX)(BX*1) \
	VEXTRACTF32X4 $2, Z8, X9 \
	VMOVSS X9, (AX)(BX*2) \
	VEXTRACTPS $2, X9, (DX)(BX*2) \
	VEXTRACTF32X4 $3, Z8, X9 \
	VMOVSS X9, (AX)(CX*1) \
	VEXTRACTPS $2, X9, (DX)(CX*1)

// func TILENAME(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)
TEXT TILENAME(SB), NOSPLIT, $152-96
#else
// func TILENAME(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, ostride int)
TEXT TILENAME(SB), NOSPLIT, $152-80
#endif
#ifdef ROWS8
	MOVQ codes+0(FP), AX
	MOVQ AX, 120(SP)
	MOVQ scales+8(FP), AX
	MOVQ AX, 128(SP)
	MOVQ acc+48(FP), AX
	MOVQ AX, 112(SP)
	MOVQ rows+64(FP), AX
	MOVQ AX, 136(SP)
	MOVQ out+80(FP), AX
	MOVQ AX, 144(SP)
#else
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), AX
	MOVQ AX, 128(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 136(SP)
	MOVQ out+64(FP), AX
	MOVQ AX, 144(SP)
#endif
	CONSTS
#ifdef HALVES
	VMOVDQU32 lohi512<>(SB), Z18
#else
	VMOVDQU32 pair512<>(SB), Z18
#endif
	VPBROADCASTD two32<>(SB), Z17

trow:
#ifdef ROWS8
	// A row's codes of the columns taken, cstride bytes from the last
	// row's; its lanes from acc where mode&1 (the columns before).
	MOVQ 120(SP), SI
	MOVQ cstride+16(FP), AX
	ADDQ SI, AX
	MOVQ AX, 120(SP)
	MOVQ 128(SP), DI
	MOVQ sstride+24(FP), AX
	ADDQ DI, AX
	MOVQ AX, 128(SP)
	MOVQ xq+32(FP), R8
	MOVQ xq1+40(FP), R11
	MOVQ groups+56(FP), CX
	VPXORD Z28, Z28, Z28
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	TESTQ $1, mode+72(FP)
	JZ    tchunk
	MOVQ  112(SP), AX
	VMOVUPS (AX), Z20
	VMOVUPS 64(AX), Z21
	VMOVUPS 128(AX), Z22
	VMOVUPS 192(AX), Z23
	VMOVUPS 256(AX), Z24
	VMOVUPS 320(AX), Z25
	VMOVUPS 384(AX), Z26
	VMOVUPS 448(AX), Z27
	JMP   tchunk
#else
	MOVQ 128(SP), DI
	MOVQ sstride+16(FP), AX
	ADDQ DI, AX
	MOVQ AX, 128(SP)
	MOVQ xq+24(FP), R8
	MOVQ ds+32(FP), R12
	MOVQ hs+40(FP), R13
	MOVQ groups+48(FP), CX
#ifdef SPLIT
	MOVQ CX, R13
	SHRQ $2, R13
	ADDQ DI, R13
#endif
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
#endif

tchunk:
	MOVQ $8, DX
#ifndef FULL
	CMPQ CX, DX
	CMOVQLT CX, DX
#endif
	SCALES
#ifdef MIN1
#ifndef FULL
	VMOVQ DX, X8
	VPBROADCASTD X8, Y7
	VPCMPGTD lanes<>(SB), Y7, Y7
#endif
#endif
#ifdef MINS
	TMINS(0, Y24)
	TMINS(1, Y25)
	TMINS(2, Y26)
	TMINS(3, Y27)
#endif
#ifdef MIN2
	ADDQ $256, R13
#endif
#ifdef HALVES
	VINSERTF64X4 $1, Y4, Z3, Z3
#endif
	VMOVDQA32 Z18, Z16
#ifdef FULL
	TGROUP(0)
	TGROUP(768)
	TGROUP(1536)
	TGROUP(2304)
	ADDQ $3072, R8
#ifdef ROWS8
	ADDQ $3072, R11
#endif
	JMP  tnext
#endif
	MOVQ DX, R9
	SHRQ $1, R9
	JZ   tsingle

tpair:
	TGROUP(0)
	ADDQ $768, R8
#ifdef ROWS8
	ADDQ $768, R11
#endif
	DECQ R9
	JNZ  tpair

tsingle:
	TESTQ $1, DX
	JZ    tnext
	UNPACK
	VPERMPS Z3, Z16, Z19
	TSINGLE(R8, 0, Z20)
	TSINGLE(R8, 1, Z21)
	TSINGLE(R8, 2, Z22)
	TSINGLE(R8, 3, Z23)
	ADDQ $512, R8
#ifdef ROWS8
	TSINGLE(R11, 0, Z24)
	TSINGLE(R11, 1, Z25)
	TSINGLE(R11, 2, Z26)
	TSINGLE(R11, 3, Z27)
	ADDQ $512, R11
#endif

tnext:
#ifndef ROWS8
	ADDQ $256, R12
#endif
	SUBQ DX, CX
	JNZ  tchunk

#ifdef ROWS8
	// Where mode&2 (the last columns), the rows' results; else their lanes
	// to acc for the next columns. No mins: each row's fold(macc) is fold
	// of zeros (Y28).
	MOVQ  112(SP), AX
	TESTQ $2, mode+72(FP)
	JNZ   tfold
	VMOVUPS Z20, (AX)
	VMOVUPS Z21, 64(AX)
	VMOVUPS Z22, 128(AX)
	VMOVUPS Z23, 192(AX)
	VMOVUPS Z24, 256(AX)
	VMOVUPS Z25, 320(AX)
	VMOVUPS Z26, 384(AX)
	VMOVUPS Z27, 448(AX)
tfold:
	ADDQ  $512, AX
	MOVQ  AX, 112(SP)
	TESTQ $2, mode+72(FP)
	JZ    tadvance
	MOVQ 144(SP), AX
	MOVQ ostride+88(FP), BX
	TFOLD8
tadvance:
#else
	MOVQ 144(SP), AX
	MOVQ ostride+72(FP), BX
	TFOLD(Z20, Y24, 0)
	TFOLD(Z21, Y25, 1)
	TFOLD(Z22, Y26, 2)
	TFOLD(Z23, Y27, 3)
#endif
	MOVQ 144(SP), AX
	ADDQ $4, AX
	MOVQ AX, 144(SP)
	DECQ 136(SP)
	JNZ  trow
	VZEROUPPER
	RET

#undef TGROUP
#undef TMINS
#undef TDOT
#undef TMIN1
#undef TMIN2
#undef TROW
#undef TSINGLE
#undef TFOLD
#ifdef ROWS8
#undef TFOLD8
#endif
#ifdef MINS
#undef MINS
#endif
