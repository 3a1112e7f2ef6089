// The expansion of sixteen rows of a K quant's weights for the wide
// kernel (dotWideKVNNI, blocks_wide_amd64.s), included by blocks_amd64.s
// once per K type with KWNAME, KCONSTS, KTSCALES (the four-row loop's
// super-block decoding: the half factors in Z6 in kLane's order, d in
// X10's first lane, for Q4_K and Q5_K dmin·m in Y5) and KUNPACK2 (a pair
// of groups' codes as int16: the even inputs of both in Z8, the odd ones
// in Z9, dword 8h+k holding lane k of group h's) defined, MIN1 for the
// types with mins and SPLIT for Q6_K (its d's before its factors).
//
// Each row's pairs of codes go to row j of the pair's two 16×16 blocks of
// dwords (dst, 2 KiB a pair: the even inputs' block, then the odd ones'),
// and each super-block's factors to row j of a 16×16 block and its mins
// (dwords 0..7) and d (dword 8) to row j of a second (dsc, 2 KiB a
// super-block): transposeWide then turns every block, so that a vector
// holds one lane of all sixteen rows (the codes as the other types'
// expansions leave them; a super-block's factor of lane L for the
// sixteen rows at 64·L, their mins of group j at 1024 + 64·j, their d at
// 1536). Registers: R8 and R9 a row's codes and scale words, R10 the row,
// R11 and R12 its rows of the destinations, R13 (SPLIT) its factors, R14
// the codes' next pair, CX the super-blocks left; KTSCALES may use AX,
// BX and DX.

// func KWNAME(codes, scales *uint32, at, split, cstride, sstride, groups int, dst *int32, dsc *float32)
//
// at: the byte of a row's scale words where the first super-block's
// decoding starts; split: how far its factors lie after that (SPLIT).
TEXT KWNAME(SB), NOSPLIT, $8-72
	VPBROADCASTW w0f<>(SB), Z28
	KCONSTS
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
	VMOVDQU32 Z6, (R12)
#ifdef MIN1
	VMOVUPS Y5, 1024(R12)
#endif
	VMOVSS X10, 1056(R12)
	ADDQ $2048, R12
	KUNPACK2
	VMOVDQU32 Z8, (R14)
	VMOVDQU32 Z9, 1024(R14)
	KUNPACK2
	VMOVDQU32 Z8, 2048(R14)
	VMOVDQU32 Z9, 3072(R14)
	KUNPACK2
	VMOVDQU32 Z8, 4096(R14)
	VMOVDQU32 Z9, 5120(R14)
	KUNPACK2
	VMOVDQU32 Z8, 6144(R14)
	VMOVDQU32 Z9, 7168(R14)
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
