// The expansion of sixteen rows of a K quant's weights for the wide
// kernel (dotWideKVNNI, blocks_wide_amd64.s), included by blocks_amd64.s
// once per K type with KWNAME, KCONSTS, KTSCALES (the four-row loop's
// super-block decoding: the half factors in Z6 in kLane's order, d in
// X10's first lane, for Q4_K and Q5_K dmin·m in Y5, for Q2_K the halves'
// in Z5) and KUNPACK2 (a pair of groups' codes as int16: the even inputs
// of both in Z8, the odd ones in Z9, dword 8h+k holding lane k of group
// h's) defined, MIN1 for the types with a min a group, MIN2 for Q2_K's
// (a min a half) and SPLIT for Q6_K and Q3_K (their d's before their
// factors).
//
// Each row's codes are multiplied by their half group's factor as they
// unpack (exact in int16: |code·factor| is at most 32·128 = 4096), so
// that a half group's integer sum is already f·half; each pair then goes
// to row j of the pair's two 16×16 blocks of dwords (dst, 2 KiB a pair:
// the even inputs' block, then the odd ones'), and each super-block's
// mins (dwords 0..7) and d (dword 8) to row j of a 16×16 block (dsc, 1
// KiB a super-block): transposeWide then turns every block, so that a
// vector holds one lane of all sixteen rows (the codes as the other
// types' expansions leave them; a super-block's mins of group j for the
// sixteen rows at 64·j, their d at 512; Q2_K's a block of its sixteen
// halves' mins and one of its d, 2 KiB). Registers: R8 and R9 a row's
// codes and scale words, R10 the row, R11 and R12 its rows of the
// destinations (0(SP) the row's first of dsc), R13 (SPLIT) its factors,
// R14 the codes' next pair, CX the super-blocks left, Z20..Z23 the
// factors' places in each pair of a super-block (kwfac), Z24 kwdup;
// KTSCALES may use AX, BX and DX.
//
// With KWAVX2 defined, the AVX2 form for CPUs without AVX-512 (for
// dotWideKAVX2, after transposeWideAVX2), the same layout: KCONSTS2,
// KUNPACK(OFF) and KCB are the AVX2 one-row loop's (a group's codes as
// int16, the even inputs in Y8, the odd ones in Y9), and KTSCALES leaves
// the half factors as X6's bytes in the halves' own order and Q2_K's
// mins of halves 0..7 in Y5, of 8..15 in Y7. Each super-block's factors
// are widened to a table of words in the frame (8(SP): word h the factor
// of half h), and a group's codes are multiplied by those of its halves
// (words 0..7 of Y8 and Y9 are its first half's inputs, 8..15 its
// second's: one factor a 128-bit lane) and stored as its half of row j.

#ifdef KWAVX2
// KW2GROUP(J): group J of the super-block, its halves' factors the words
// 2J and 2J+1 of the table.
#define KW2GROUP(J) \
	KUNPACK(J*KCB) \
	VPBROADCASTW (8+4*J)(SP), X12 \
	VPBROADCASTW (10+4*J)(SP), X13 \
	VINSERTI128 $1, X13, Y12, Y12 \
	VPMULLW Y12, Y8, Y8 \
	VPMULLW Y12, Y9, Y9 \
	VMOVDQU Y8, (J/2*2048+J%2*32)(R14) \
	VMOVDQU Y9, (1024+J/2*2048+J%2*32)(R14)
#else
// KWPAIR(OFF, ZI): a pair of groups unpacked, times its halves' factors
// (Z6's lanes ZI picks, each factor in both words of a dword), to OFF(R14)
// and 1024+OFF(R14).
#define KWPAIR(OFF, ZI) \
	KUNPACK2 \
	VPERMD Z6, ZI, Z25 \
	VPSHUFB Z24, Z25, Z25 \
	VPMULLW Z25, Z8, Z8 \
	VPMULLW Z25, Z9, Z9 \
	VMOVDQU32 Z8, OFF(R14) \
	VMOVDQU32 Z9, 1024+OFF(R14)
#endif

// func KWNAME(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)
//
// at: the byte of a row's scale words where the first super-block's
// decoding starts; split: how far its factors lie after that (SPLIT).
TEXT KWNAME(SB), NOSPLIT, $40-72
#ifdef KWAVX2
	KCONSTS2
#else
	VPBROADCASTW w0f<>(SB), Z28
	KCONSTS
	VMOVDQU32 kwfac<>(SB), Z20
	VPBROADCASTD kwone<>(SB), Z25
	VPADDD Z25, Z20, Z21
	VPADDD Z25, Z21, Z22
	VPADDD Z25, Z22, Z23
	VBROADCASTI32X4 kwdup<>(SB), Z24
#endif
	MOVQ codes+0(FP), R8
	MOVQ scales+8(FP), R9
	ADDQ at+16(FP), R9
	MOVQ dst+56(FP), R11
	MOVQ dsc+64(FP), R12
	XORQ R10, R10

kwrow:
	MOVQ R8, SI
	MOVQ R9, DI
#ifdef SPLIT
	MOVQ DI, R13
	ADDQ split+24(FP), R13
#endif
	MOVQ R11, R14
	MOVQ R12, 0(SP)
	MOVQ groups+48(FP), CX
	SHRQ $3, CX

kwsuper:
	KTSCALES
#ifdef KWAVX2
	VPMOVSXBW X6, Y6
	VMOVDQU Y6, 8(SP)
#endif
#ifdef MIN2
#ifdef KWAVX2
	VMOVUPS Y5, (R12)
	VMOVUPS Y7, 32(R12)
#else
	VMOVUPS Z5, (R12)
#endif
	VMOVSS X10, 1024(R12)
	ADDQ $2048, R12
#else
#ifdef MIN1
	VMOVUPS Y5, (R12)
#endif
	VMOVSS X10, 32(R12)
	ADDQ $1024, R12
#endif
#ifdef KWAVX2
	KW2GROUP(0)
	KW2GROUP(1)
	KW2GROUP(2)
	KW2GROUP(3)
	KW2GROUP(4)
	KW2GROUP(5)
	KW2GROUP(6)
	KW2GROUP(7)
	ADDQ $(8*KCB), SI
#else
	KWPAIR(0, Z20)
	KWPAIR(2048, Z21)
	KWPAIR(4096, Z22)
	KWPAIR(6144, Z23)
#endif
	ADDQ $8192, R14
	DECQ CX
	JNZ  kwsuper

	ADDQ cstride+32(FP), R8
	ADDQ sstride+40(FP), R9
	ADDQ $64, R11
	MOVQ 0(SP), R12
	ADDQ $64, R12
	INCQ R10
	CMPQ R10, $16
	JLT  kwrow
	VZEROUPPER
	RET

#ifdef KWAVX2
#undef KW2GROUP
#else
#undef KWPAIR
#endif
