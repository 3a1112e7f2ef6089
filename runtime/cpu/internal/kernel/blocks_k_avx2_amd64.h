// The AVX2 loop of the K quants' products (dotBlocksKGo), included by
// blocks_k_amd64.s once per type with KNAME2, KCONSTS2, KSCALES2 (a
// super-block's factors: the 16 half factors as int32 in Y6 (0..7) and
// Y7 (8..15), f32(d·D) stored at 24(SP), and with MIN1 the mins' terms
// added to Y2 at once) and KUNPACK (a group's codes as int16: the even
// inputs in Y8, the odd ones in Y9) defined. Rows of whole super-blocks
// only (dotBlocksKRowsOn).
//
// Per group, multiply-adds of the codes with the activations' codes sum
// four inputs a lane (dotBlocksKGo's lane[g%2][i/4]), VPERMD takes the
// group's two half factors to lanes 0..3 and 4..7 (Y12..Y15: the indices
// of group j%4; its factors are in Y6 for j < 4, Y7 after) and VPMULLD
// applies them before Y3 (even groups) and Y4 (odd ones) gather the exact
// sums; per super-block they become f32 once, are scaled and added to Y0
// and Y1. Registers as the AVX-512 loop's; Y5, Y10 and Y11 temporaries.
// The frame holds the next row's scale words (0), the rows left (8), the
// next output (16) and the super-block's f32(d·D) (24).

// KPF2: how far ahead of the codes being read the loop prefetches (the
// hardware prefetchers alone leave a core waiting on memory).
#define KPF2 2048

// KGROUP2(EOFF, OOFF, TAB, IDX, ACC): the group whose activations are at
// EOFF(R8) (even inputs) and OOFF(R8) (odd ones).
#define KGROUP2(EOFF, OOFF, TAB, IDX, ACC) \
	KUNPACK \
	VPERMD TAB, IDX, Y10 \
	VPMADDWD EOFF(R8), Y8, Y8 \
	VPMADDWD OOFF(R8), Y9, Y9 \
	VPADDD Y9, Y8, Y8 \
	VPMULLD Y10, Y8, Y8 \
	VPADDD Y8, ACC, ACC

// func KNAME2(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)
TEXT KNAME2(SB), NOSPLIT, $32-72
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), AX
	MOVQ AX, 0(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 8(SP)
	MOVQ out+64(FP), AX
	MOVQ AX, 16(SP)
	VMOVDQU kidx2<>+0(SB), Y12
	VMOVDQU kidx2<>+32(SB), Y13
	VMOVDQU kidx2<>+64(SB), Y14
	VMOVDQU kidx2<>+96(SB), Y15

krow2:
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
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2

ksuper2:
	PREFETCHT0 KPF2(SI)
	PREFETCHT0 KPF2+64(SI)
	PREFETCHT0 KPF2+128(SI)
	PREFETCHT0 512(DI)
	KSCALES2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	KGROUP2(0, 64, Y6, Y12, Y3)
	KGROUP2(32, 96, Y6, Y13, Y4)
	KGROUP2(128, 192, Y6, Y14, Y3)
	KGROUP2(160, 224, Y6, Y15, Y4)
	KGROUP2(256, 320, Y7, Y12, Y3)
	KGROUP2(288, 352, Y7, Y13, Y4)
	KGROUP2(384, 448, Y7, Y14, Y3)
	KGROUP2(416, 480, Y7, Y15, Y4)
	VBROADCASTSS 24(SP), Y10
	VCVTDQ2PS Y3, Y3
	VMULPS Y10, Y3, Y3
	VADDPS Y3, Y0, Y0
	VCVTDQ2PS Y4, Y4
	VMULPS Y10, Y4, Y4
	VADDPS Y4, Y1, Y1
	ADDQ $512, R8
	ADDQ $4, R11
	ADDQ $32, R12
	DECQ CX
	JNZ  ksuper2

	VADDPS Y1, Y0, Y0
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
	JNZ  krow2
	VZEROUPPER
	RET

#undef KGROUP2
#undef KPF2
