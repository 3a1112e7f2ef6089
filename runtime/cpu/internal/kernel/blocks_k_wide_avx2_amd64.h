// The AVX2 expansion of sixteen rows of a K quant's weights for the wide
// kernel (dotWideKAVX2, blocks_wide_amd64.s): blocks_k_wide_avx512_amd64.h's
// layout, so that transposeWideAVX2 then leaves what dotWideKVNNI reads.
// Included by blocks_amd64.s once per K type with KW2NAME, KCONSTS2,
// KUNPACK(OFF) and KCB (the AVX2 one-row loop's: a group's codes as
// int16, the even inputs in Y8, the odd ones in Y9), KW2SCALES (a
// super-block's d in X10's first lane, its sixteen half factors as the
// bytes of X6 in the halves' own order, and dmin·m of its groups in Y5
// (MIN1) or of its halves in Y5 and Y7 (MIN2)) and MIN1, MIN2 and SPLIT
// as the type needs.
//
// A row at a time, each super-block's half factors are widened to the
// words of a table in the frame (8(SP): word h the factor of half h), and
// each group's codes, times the factors of its halves (words 0..7 of Y8
// and Y9 are its first half's inputs, 8..15 its second's: one factor a
// 128-bit lane), go to row j of the pair's two 16×16 blocks of dwords (the
// even inputs' block, then the odd ones'). Registers: R8 and R9 a row's
// codes and scale words, R10 the row, R11 its row of dst, R12 its row of
// dsc (0(SP) the row's first), R13 (SPLIT) its factors, R14 the codes'
// next super-block, CX the super-blocks left; KW2SCALES may use AX, BX
// and DX.

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

// func KW2NAME(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)
TEXT KW2NAME(SB), NOSPLIT, $40-72
	KCONSTS2
	MOVQ codes+0(FP), R8
	MOVQ scales+8(FP), R9
	ADDQ at+16(FP), R9
	MOVQ dst+56(FP), R11
	MOVQ dsc+64(FP), R12
	XORQ R10, R10

kw2row:
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

kw2super:
	KW2SCALES
	VPMOVSXBW X6, Y6
	VMOVDQU Y6, 8(SP)
#ifdef MIN2
	VMOVUPS Y5, (R12)
	VMOVUPS Y7, 32(R12)
	VMOVSS X10, 1024(R12)
	ADDQ $2048, R12
#else
#ifdef MIN1
	VMOVUPS Y5, (R12)
#endif
	VMOVSS X10, 32(R12)
	ADDQ $1024, R12
#endif
	KW2GROUP(0)
	KW2GROUP(1)
	KW2GROUP(2)
	KW2GROUP(3)
	KW2GROUP(4)
	KW2GROUP(5)
	KW2GROUP(6)
	KW2GROUP(7)
	ADDQ $(8*KCB), SI
	ADDQ $8192, R14
	DECQ CX
	JNZ  kw2super

	ADDQ cstride+32(FP), R8
	ADDQ sstride+40(FP), R9
	ADDQ $64, R11
	MOVQ 0(SP), R12
	ADDQ $64, R12
	INCQ R10
	CMPQ R10, $16
	JLT  kw2row
	VZEROUPPER
	RET

#undef KW2GROUP
