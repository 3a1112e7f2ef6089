// The AVX-512 loop of the K quants' products (dotBlocksKGo), included by
// blocks_k_amd64.s once per type and form with KNAME, KSCALES (a
// super-block's factors: the 16 half factors as int32 in Z6, f32(d·D) in
// X12, and for Q4_K and Q5_K the min terms taken from Y2 at once) and KUNPACK2 (a pair of groups' codes as
// int16, the even inputs of both in Z8 and the odd ones in Z9) defined,
// and VNNI for the form with VPDPWSSD. Rows of whole super-blocks only
// (dotBlocksKRowsOn).
//
// Per pair of groups, multiply-adds of the codes (int16) with the
// activations' codes sum four inputs a lane: lanes 0..7 the even group's,
// 8..15 the odd one's, as dotBlocksKGo's lane[g%2][i/4]; VPERMD spreads
// the pair's four half factors over its lanes (Z24..Z27: pair p's
// indices), which VPMULLD applies before Z1's 16 int32 lanes gather the
// exact sums. Per super-block Z1 becomes f32 once,
// is scaled by f32(d·D) and added to Z0 (acc); the mins meet the groups'
// sums in Y2 (macc). Registers: SI codes, DI scale words (with SPLIT the
// super-blocks' d), R13 with SPLIT their factors, R8 the activations'
// codes, R11 their scale a super-block (KD), R12 their group sums (KSums), CX the
// super-blocks left. The frame holds the next row's scale words (0), the
// rows left (8) and the next output (16).

#define KPF 2048
#ifdef VNNI
#define KDOT(X) \
	VPMADDWD X(R8), Z8, Z8 \
	VPDPWSSD X+64(R8), Z9, Z8
#else
#define KDOT(X) \
	VPMADDWD X(R8), Z8, Z8 \
	VPMADDWD X+64(R8), Z9, Z9 \
	VPADDD Z9, Z8, Z8
#endif

// KPAIR(X, ZI): the pair whose activations are at X(R8), its factors'
// indices in ZI.
#define KPAIR(X, ZI) \
	KUNPACK2 \
	VPERMD Z6, ZI, Z10 \
	KDOT(X) \
	VPMULLD Z10, Z8, Z8 \
	VPADDD Z8, Z1, Z1

// func KNAME(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)
TEXT KNAME(SB), NOSPLIT, $24-72
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), AX
	MOVQ AX, 0(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 8(SP)
	MOVQ out+64(FP), AX
	MOVQ AX, 16(SP)
	VMOVDQU64 kpermd<>+0(SB), Z24
	VMOVDQU64 kpermd<>+64(SB), Z25
	VMOVDQU64 kpermd<>+128(SB), Z26
	VMOVDQU64 kpermd<>+192(SB), Z27
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
	VPXORD Z1, Z1, Z1
	KPAIR(0, Z24)
	KPAIR(128, Z25)
	KPAIR(256, Z26)
	KPAIR(384, Z27)
	VBROADCASTSS X12, Z12
	VCVTDQ2PS Z1, Z1
	VMULPS Z12, Z1, Z1
	VADDPS Z1, Z0, Z0
	ADDQ $512, R8
	ADDQ $4, R11
	ADDQ $32, R12
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

#undef KDOT
#undef KPAIR
#undef KPF
