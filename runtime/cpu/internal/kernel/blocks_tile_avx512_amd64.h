// The AVX-512 block products for four rows of activations at once
// (blocks_amd64.s includes it twice per type, as TILENAME with the
// type's CONSTS, SCALES, UNPACK and UNPACK2 and flags, as the one-row loop
// of blocks_avx512_amd64.h, and with VNNI defined for CPUs with
// VPDPWSSD): each weight row's codes unpack and its scales decode once for
// the four rows, and each row's sums, scaling and accumulation are
// dotBlocksGo's, so every result has its bits. The activations are packed
// four rows together (QTile.Data): per pair of groups the four rows' 64
// codes (512 bytes), then the rows' d (the even group's for rows 0..3,
// twice, then the odd one's: 64 bytes, in a 256-byte slot), a lone last
// group likewise (64 bytes of codes a row, then its d); and per chunk of
// eight groups the rows' 16 ds, for the min terms (QTile.DS).
//
// A pair's products of the four rows, a vector a row, are summed in one
// transpose: a vector of each 128-bit quarter's sums (a half group's) for
// the four rows, the quarters the even group's halves then the odd
// one's; then converted, scaled by f32(S·d) (the pair's scales, Z19,
// times the rows' d) and added to the accumulator of the pair's place in
// its chunk (acc_p: Z20+p, group 2p in quarter 0, 2p+1 in quarter 2, a
// lane a row). Registers besides the one-row loop's: Z0..Z2 and Z29 a
// pair's four rows' products, Z30 and Z31 temporaries, Y24..Y27 the rows'
// min lanes, K6 the lone group's lanes; with ROWS8 (two tiles, eight rows:
// the types without mins, TILENAME's second form)
// Z24..Z27 the second tile's accumulators, R11 its data, Z28 zero. The
// frame holds the next row's scale words (128), the rows left (136) and
// the next outputs (144) (with ROWS8 also the next row's codes (120) and
// lanes in acc (112)); outputs of activation row r lie r·ostride bytes
// after the first row's.

// TDOT(P, X, R, V): row R's integer lanes of the pair unpacked in Z8
// and Z9 (its codes at X+R·128(P), P the tile's data), to V.
#ifdef VNNI
#define TDOT(P, X, R, V) \
	VPMADDWD X+R*128(P), Z8, V \
	VPDPWSSD X+R*128+64(P), Z9, V
#else
#define TDOT(P, X, R, V) \
	VPMADDWD X+R*128(P), Z8, V \
	VPMADDWD X+R*128+64(P), Z9, Z10 \
	VPADDD Z10, V, V
#endif

// TRED: the four rows' lanes in Z0, Z1, Z2, Z29 to Z0: each 128-bit
// quarter's four sums, one a row (dword and qword unpacks and adds).
#define TRED \
	VPUNPCKLDQ Z1, Z0, Z10 \
	VPUNPCKHDQ Z1, Z0, Z11 \
	VPADDD Z11, Z10, Z10 \
	VPUNPCKLDQ Z29, Z2, Z11 \
	VPUNPCKHDQ Z29, Z2, Z30 \
	VPADDD Z30, Z11, Z11 \
	VPUNPCKLQDQ Z11, Z10, Z0 \
	VPUNPCKHQDQ Z11, Z10, Z1 \
	VPADDD Z1, Z0, Z0

// TTERM(D, ZACC, MASK): the reduced sums in Z0 as dotBlocksGo's terms,
// f32(f32(S)·f32(s·d)) with the pair's scales in Z19 and the rows' d at
// D, added to ZACC, a group's two halves' sums first added.
#define TTERM(D, ZACC, MASK) \
	VSHUFI32X4 $0xB1, Z0, Z0, Z10 \
	VPADDD Z10, Z0, Z0 \
	VCVTDQ2PS Z0, Z0 \
	VMULPS D, Z19, Z10 \
	VMULPS Z10, Z0, Z0 \
	VADDPS Z0, ZACC, MASK, ZACC

// TPAIR(P, X, ZACC): a tile's four rows with the unpacked pair at X.
#define TPAIR(P, X, ZACC) \
	TDOT(P, X, 0, Z0) \
	TDOT(P, X, 1, Z1) \
	TDOT(P, X, 2, Z2) \
	TDOT(P, X, 3, Z29) \
	TRED \
	TTERM(X+512(P), ZACC, K7)

// TADV: the tiles' data to the next pair.
#ifdef ROWS8
#define TADV \
	ADDQ $768, R8 \
	ADDQ $768, R11
#else
#define TADV \
	ADDQ $768, R8
#endif

// TGROUP(X, A1, A2): the pair at X, its place's accumulators A1 (and A2,
// the second tile's).
#ifdef ROWS8
#define TGROUP(X, A1, A2) \
	UNPACK2 \
	VPERMPS Z3, Z16, Z19 \
	VPADDD Z17, Z16, Z16 \
	TPAIR(R8, X, A1) \
	TPAIR(R11, X, A2)
#else
#define TGROUP(X, A1, A2) \
	UNPACK2 \
	VPERMPS Z3, Z16, Z19 \
	VPADDD Z17, Z16, Z16 \
	TPAIR(R8, X, A1)
#endif

// TSDOT(P, R, V): row R's lanes of a lone last group unpacked in Y8 and
// Y9 (VEX writes: the upper halves stay zero).
#define TSDOT(P, R, V) \
	VPMADDWD R*64(P), Y8, V \
	VPMADDWD R*64+32(P), Y9, Y10 \
	VPADDD Y10, V, V

// TSTILE(P, ZACC): a tile's four rows with a lone last group, of which
// only the group's lanes (K6) are added.
#define TSTILE(P, ZACC) \
	TSDOT(P, 0, Y0) \
	TSDOT(P, 1, Y1) \
	TSDOT(P, 2, Y2) \
	TSDOT(P, 3, Y29) \
	TRED \
	TTERM(256(P), ZACC, K6)

#ifdef ROWS8
#define TSINGLE(A1, A2) \
	UNPACK \
	VPERMPS Z3, Z16, Z19 \
	TSTILE(R8, A1) \
	TSTILE(R11, A2) \
	ADDQ $512, R8 \
	ADDQ $512, R11
#else
#define TSINGLE(A1, A2) \
	UNPACK \
	VPERMPS Z3, Z16, Z19 \
	TSTILE(R8, A1) \
	ADDQ $512, R8
#endif

// TMINS(R, YM): row R's min terms of the chunk (ds at R·64(R12)) added
// to YM, as the one-row loop computes them.
#define TMINS(R, YM) \
	VMOVUPS R*64(R12), Y8 \
	VMOVUPS R*64+32(R12), Y9 \
	VSHUFPS $0xDD, Y9, Y8, Y11 \
	VPERMPD $0xD8, Y11, Y11 \
	VMULPS Y11, Y5, Y11 \
	VANDPS Y7, Y11, Y11 \
	VADDPS Y11, YM, YM

// TACCFOLD(A0, A1, A2, A3, X): fold8 of four rows' accumulators acc_p
// (A0..A3), ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) in every row's lane,
// to X's lanes 0..3 (a row a lane).
#define TACCFOLD(A0, A1, A2, A3, X) \
	VADDPS A2, A0, Z8 \
	VADDPS A3, A1, Z9 \
	VADDPS Z9, Z8, Z8 \
	VEXTRACTF32X4 $2, Z8, X9 \
	VADDPS X9, X8, X

// TPICKr: lane r of X0 to lane 0 of X8.
#define TPICK0 VMOVAPS X0, X8
#define TPICK1 VMOVSHDUP X0, X8
#define TPICK2 VMOVHLPS X0, X0, X8
#define TPICK3 VPERMILPS $3, X0, X8

// TFOLD(PICK, YM): row R's result: its fold of lanes (lane R of X0,
// brought to lane 0 by PICK into X8) plus the fold of its min lanes YM,
// to its output.
#define TFOLD(PICK, YM) \
	PICK \
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
// TFOLD8: the eight rows' results (no mins: fold of zeros, the +0 of
// Z28 added) to the outputs at AX + r·BX.
#define TFOLD8 \
	TACCFOLD(Z20, Z21, Z22, Z23, X0) \
	VADDPS X28, X0, X0 \
	TACCFOLD(Z24, Z25, Z26, Z27, X1) \
	VADDPS X28, X1, X1 \
	LEAQ (BX)(BX*2), CX \
	LEAQ (AX)(BX*4), DX \
	VMOVSS X0, (AX) \
	VEXTRACTPS $1, X0, (AX)(BX*1) \
	VEXTRACTPS $2, X0, (AX)(BX*2) \
	VEXTRACTPS $3, X0, (AX)(CX*1) \
	VMOVSS X1, (DX) \
	VEXTRACTPS $1, X1, (DX)(BX*1) \
	VEXTRACTPS $2, X1, (DX)(BX*2) \
	VEXTRACTPS $3, X1, (DX)(CX*1)

// func TILENAME(codes, scales *uint32, cstride, sstride int, xq, xq1 *int16, acc *float32, groups, rows, mode int, out *float32, ostride int)
TEXT TILENAME(SB), NOSPLIT, $152-96
#else
// func TILENAME(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, ostride int)
TEXT TILENAME(SB), NOSPLIT, $152-72
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
	MOVQ rows+48(FP), AX
	MOVQ AX, 136(SP)
	MOVQ out+56(FP), AX
	MOVQ AX, 144(SP)
#endif
	CONSTS
	VMOVDQU32 pair512<>(SB), Z18
	VPBROADCASTD two32<>(SB), Z17
	MOVL $0x00FF, AX
	KMOVW AX, K6
	KXNORW K7, K7, K7

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
	MOVQ groups+40(FP), CX
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
	CMPQ CX, DX
	CMOVQLT CX, DX
	SCALES
#ifdef MIN1
	VMOVQ DX, X8
	VPBROADCASTD X8, Y7
	VPCMPGTD lanes<>(SB), Y7, Y7
#endif
#ifdef MIN1
	TMINS(0, Y24)
	TMINS(1, Y25)
	TMINS(2, Y26)
	TMINS(3, Y27)
#endif
	VMOVDQA32 Z18, Z16
	// Up to four pairs, each to its place's accumulators, then an even
	// group alone where the count is odd.
	MOVQ DX, R9
	SHRQ $1, R9
	JZ   tsingle0
	TGROUP(0, Z20, Z24)
	TADV
	DECQ R9
	JZ   tsingle1
	TGROUP(0, Z21, Z25)
	TADV
	DECQ R9
	JZ   tsingle2
	TGROUP(0, Z22, Z26)
	TADV
	DECQ R9
	JZ   tsingle3
	TGROUP(0, Z23, Z27)
	TADV
	JMP  tnext

tsingle0:
	TESTQ $1, DX
	JZ    tnext
	TSINGLE(Z20, Z24)
	JMP   tnext

tsingle1:
	TESTQ $1, DX
	JZ    tnext
	TSINGLE(Z21, Z25)
	JMP   tnext

tsingle2:
	TESTQ $1, DX
	JZ    tnext
	TSINGLE(Z22, Z26)
	JMP   tnext

tsingle3:
	TESTQ $1, DX
	JZ    tnext
	TSINGLE(Z23, Z27)

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
	MOVQ ostride+64(FP), BX
	TACCFOLD(Z20, Z21, Z22, Z23, X0)
	TFOLD(TPICK0, Y24)
	TFOLD(TPICK1, Y25)
	TFOLD(TPICK2, Y26)
	TFOLD(TPICK3, Y27)
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
#undef TRED
#undef TTERM
#undef TPAIR
#undef TSDOT
#undef TSTILE
#undef TSINGLE
#undef TADV
#undef TACCFOLD
#undef TFOLD
#undef TPICK0
#undef TPICK1
#undef TPICK2
#undef TPICK3
#ifdef ROWS8
#undef TFOLD8
#endif
