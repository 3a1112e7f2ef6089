// The AVX-512 loop of the K quants' products (dotBlocksKGo), included by
// blocks_amd64.s once per type and form with KNAME, KCONSTS, KSCALES (a
// super-block's factors: the 16 half factors as int32 in Z6, in kLane's
// order, f32(d·D) in X12, and for Q4_K and Q5_K the min terms taken from
// Y2 at once) and KUNPACK2 (a pair of groups' codes as int16, the even
// inputs of both in Z8 and the odd ones in Z9) defined, and VNNI for the
// form with VPDPWSSD. Rows of whole super-blocks only (dotBlocksKRowsOn).
//
// Per pair p of groups, multiply-adds of the codes with the activations'
// codes sum four inputs a lane into Z20+p: its 128-bit chunk c holds half
// 4p+c of the super-block. Interleaving and adding the four registers'
// dwords, then qwords, leaves each half's exact sum in one lane (half
// 4p+c in lane 4c+p, kLane), one VPMULLD applies the factors, and the
// super-block becomes f32 once, is scaled by f32(d·D) and added to Z0
// (acc); the mins meet the groups' sums in Y2 (macc). Registers: SI
// codes, DI scale words (with SPLIT the super-blocks' d), R13 with SPLIT
// their factors, R8 the activations' codes, R11 their scale a
// super-block (KD), R12 their group sums (KSums; with MIN2, Q2_K's, the
// half groups' sums, QRow.Halves), CX the super-blocks
// left. The frame holds the next row's scale words (0), the rows left (8)
// and the next output (16).

// KPF: how far ahead of the codes being read the loop prefetches (the
// hardware prefetchers alone leave a core waiting on memory).
#define KPF 2048
// KPAIR(X, ZP): the pair whose activations are at X(R8), its sums to ZP.
#ifdef VNNI
#define KPAIR(X, ZP) \
	KUNPACK2 \
	VPMADDWD X(R8), Z8, ZP \
	VPDPWSSD X+64(R8), Z9, ZP
#else
#define KPAIR(X, ZP) \
	KUNPACK2 \
	VPMADDWD X(R8), Z8, ZP \
	VPMADDWD X+64(R8), Z9, Z9 \
	VPADDD Z9, ZP, ZP
#endif

// func KNAME(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)
TEXT KNAME(SB), NOSPLIT, $24-72
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), AX
	MOVQ AX, 0(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 8(SP)
	MOVQ out+64(FP), AX
	MOVQ AX, 16(SP)
	VPBROADCASTW w0f<>(SB), Z28
	KCONSTS

krow:
	MOVQ 0(SP), DI
	MOVQ sstride+16(FP), AX
	ADDQ DI, AX
	MOVQ AX, 0(SP)
	MOVQ xq+24(FP), R8
	MOVQ kd+32(FP), R11
	MOVQ sums+40(FP), R12
	MOVQ groups+48(FP), CX
	SHRQ $3, CX
#ifdef SPLIT
	LEAQ (DI)(CX*2), R13
#endif
	VPXORD Z0, Z0, Z0
	VXORPS Y2, Y2, Y2

ksuper:
	PREFETCHT0 KPF(SI)
	PREFETCHT0 KPF+64(SI)
	PREFETCHT0 KPF+128(SI)
	PREFETCHT0 512(DI)
	KSCALES
	KPAIR(0, Z20)
	KPAIR(128, Z21)
	KPAIR(256, Z22)
	KPAIR(384, Z23)
	// Half h = 4p + c (pair p, 128-bit chunk c) to lane 4c + p (kLane).
	VPUNPCKLDQ Z21, Z20, Z8
	VPUNPCKHDQ Z21, Z20, Z9
	VPADDD Z9, Z8, Z8
	VPUNPCKLDQ Z23, Z22, Z9
	VPUNPCKHDQ Z23, Z22, Z10
	VPADDD Z10, Z9, Z9
	VPUNPCKLQDQ Z9, Z8, Z10
	VPUNPCKHQDQ Z9, Z8, Z11
	VPADDD Z11, Z10, Z10
	VPMULLD Z6, Z10, Z10
	VBROADCASTSS X12, Z12
	VCVTDQ2PS Z10, Z10
	VMULPS Z12, Z10, Z10
	VADDPS Z10, Z0, Z0
	ADDQ $512, R8
	ADDQ $4, R11
#ifdef MIN2
	ADDQ $64, R12
#else
	ADDQ $32, R12
#endif
	DECQ CX
	JNZ  ksuper

	VEXTRACTF64X4 $1, Z0, Y9
	VADDPS Y9, Y0, Y0
	VEXTRACTF128 $1, Y0, X9
	VADDPS X9, X0, X0
	VMOVHLPS X0, X0, X9
	VADDPS X9, X0, X0
	VMOVSHDUP X0, X9
	VADDSS X9, X0, X0
	VEXTRACTF128 $1, Y2, X9
	VADDPS X9, X2, X2
	VMOVHLPS X2, X2, X9
	VADDPS X9, X2, X2
	VMOVSHDUP X2, X9
	VADDSS X9, X2, X2
	VADDSS X2, X0, X0
	MOVQ 16(SP), AX
	VMOVSS X0, (AX)
	ADDQ $4, AX
	MOVQ AX, 16(SP)
	DECQ 8(SP)
	JNZ  krow
	VZEROUPPER
	RET

#undef KPAIR
#undef KPF
