// The AVX-512 loop of the K quants' products for four rows of
// activations at once (DotBlocksTile): each weight row's codes unpack and
// its factors decode once for the four rows, and each row's multiply-adds,
// reductions, scaling and sums are the one-row loop's
// (blocks_k_avx512_amd64.h), so every result has dotBlocksKGo's bits.
// Included by blocks_amd64.s once per type and form with KTNAME, KCONSTS,
// KTSCALES (the super-block's half factors in Z6 in kLane's order, d and
// dmin in X10, for Q4_K and Q5_K dmin·m in Y5) and KUNPACK2 defined, and
// VNNI for the form with VPDPWSSD.
//
// The four rows' KCodes lie one after the other xstride bytes apart (R8,
// R9 = xstride, R10 = 3·xstride); per super-block their KD (R11: four
// floats) and group sums (R12: four rows of eight; with MIN2 their half
// groups' sums, four rows of sixteen, QTile.Halves). Registers: Z16..Z19
// the rows' accumulators, Y1..Y4 their min lanes, X0 the super-block's d, Z20..Z27 a pair's sums
// for each row (two pairs at a time), Z12, Z13, Z30, Z31 the first two
// pairs' reduction of each row. The frame holds the next row's scale
// words (0), the rows left (8) and the next outputs (16); outputs of
// activation row r lie r·ostride bytes after row 0's.

#define KTPF 2048

#ifdef VNNI
#define KTDOT(X, ZP) \
	VPMADDWD X, Z8, ZP \
	VPDPWSSD 64+X, Z9, ZP
#else
#define KTDOT(X, ZP) \
	VPMADDWD X, Z8, ZP \
	VPMADDWD 64+X, Z9, Z5 \
	VPADDD Z5, ZP, ZP
#endif

// KTPAIR(X, Z0, Z1, Z2, Z3): the pair whose activations are at X in each
// row, its sums of row r to Zr.
#define KTPAIR(X, ZR0, ZR1, ZR2, ZR3) \
	KUNPACK2 \
	KTDOT(X(R8), ZR0) \
	KTDOT(X(R8)(R9*1), ZR1) \
	KTDOT(X(R8)(R9*2), ZR2) \
	KTDOT(X(R8)(R10*1), ZR3)

// KTRED(ZA, ZB, ZD): the dword interleave and sum of two pairs' sums
// (ZA the even pair's), to ZD; KTRED2 the qword one.
#define KTRED(ZA, ZB, ZD) \
	VPUNPCKLDQ ZB, ZA, Z10 \
	VPUNPCKHDQ ZB, ZA, Z11 \
	VPADDD Z11, Z10, ZD
#define KTRED2(ZA, ZB, ZD) \
	VPUNPCKLQDQ ZB, ZA, Z10 \
	VPUNPCKHQDQ ZB, ZA, Z11 \
	VPADDD Z11, Z10, ZD

// KTROW(ZC, R, ZACC): row R's half sums in ZC, scaled and added to ZACC.
#define KTROW(ZC, R, ZACC) \
	VPMULLD Z6, ZC, ZC \
	VMULSS 4*R(R11), X0, X7 \
	VBROADCASTSS X7, Z7 \
	VCVTDQ2PS ZC, ZC \
	VMULPS Z7, ZC, ZC \
	VADDPS ZC, ZACC, ZACC

#ifdef MIN1
#define KTMIN(R, YM) \
	VMULPS 32*R(R12), Y5, Y11 \
	VSUBPS Y11, YM, YM
#else
#ifdef MIN2
// Q2_K's: KTSCALES leaves dmin·m of the sixteen halves in Z5; those of
// halves 0..7 meet the row's lanes first, then those of 8..15.
#define KTMIN(R, YM) \
	VMULPS 64*R(R12), Z5, Z11 \
	VSUBPS Y11, YM, YM \
	VEXTRACTF64X4 $1, Z11, Y11 \
	VSUBPS Y11, YM, YM
#else
#define KTMIN(R, YM)
#endif
#endif

// KTFOLD(ZA, YM): foldLanes of a row's lanes, to its output.
#define KTFOLD(ZA, YM) \
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

// func KTNAME(codes, scales *uint32, sstride int, xq *int16, xstride int, kd, sums *float32, groups, rows int, out *float32, ostride int)
TEXT KTNAME(SB), NOSPLIT, $24-88
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), AX
	MOVQ AX, 0(SP)
	MOVQ rows+64(FP), AX
	MOVQ AX, 8(SP)
	MOVQ out+72(FP), AX
	MOVQ AX, 16(SP)
	VPBROADCASTW w0f<>(SB), Z28
	KCONSTS

ktrow:
	MOVQ 0(SP), DI
	MOVQ sstride+16(FP), AX
	ADDQ DI, AX
	MOVQ AX, 0(SP)
	MOVQ xq+24(FP), R8
	MOVQ xstride+32(FP), R9
	LEAQ (R9)(R9*2), R10
	MOVQ kd+40(FP), R11
	MOVQ sums+48(FP), R12
	MOVQ groups+56(FP), CX
	SHRQ $3, CX
#ifdef SPLIT
	LEAQ (DI)(CX*2), R13
#endif
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4

ktsuper:
	PREFETCHT0 KTPF(SI)
	PREFETCHT0 KTPF+64(SI)
	PREFETCHT0 KTPF+128(SI)
	PREFETCHT0 512(DI)
	KTSCALES
	VMOVAPS X10, X0
	KTMIN(0, Y1)
	KTMIN(1, Y2)
	KTMIN(2, Y3)
	KTMIN(3, Y4)
	KTPAIR(0, Z20, Z22, Z24, Z26)
	KTPAIR(128, Z21, Z23, Z25, Z27)
	KTRED(Z20, Z21, Z12)
	KTRED(Z22, Z23, Z13)
	KTRED(Z24, Z25, Z30)
	KTRED(Z26, Z27, Z31)
	KTPAIR(256, Z20, Z22, Z24, Z26)
	KTPAIR(384, Z21, Z23, Z25, Z27)
	KTRED(Z20, Z21, Z20)
	KTRED(Z22, Z23, Z22)
	KTRED(Z24, Z25, Z24)
	KTRED(Z26, Z27, Z26)
	KTRED2(Z12, Z20, Z20)
	KTRED2(Z13, Z22, Z22)
	KTRED2(Z30, Z24, Z24)
	KTRED2(Z31, Z26, Z26)
	KTROW(Z20, 0, Z16)
	KTROW(Z22, 1, Z17)
	KTROW(Z24, 2, Z18)
	KTROW(Z26, 3, Z19)
	ADDQ $512, R8
	ADDQ $16, R11
#ifdef MIN2
	ADDQ $256, R12
#else
	ADDQ $128, R12
#endif
	DECQ CX
	JNZ  ktsuper

	MOVQ 16(SP), AX
	MOVQ ostride+80(FP), BX
	KTFOLD(Z16, Y1)
	KTFOLD(Z17, Y2)
	KTFOLD(Z18, Y3)
	KTFOLD(Z19, Y4)
	MOVQ 16(SP), AX
	ADDQ $4, AX
	MOVQ AX, 16(SP)
	DECQ 8(SP)
	JNZ  ktrow
	VZEROUPPER
	RET

#undef KTPF
#undef KTDOT
#undef KTPAIR
#undef KTRED
#undef KTRED2
#undef KTROW
#undef KTMIN
#undef KTFOLD
