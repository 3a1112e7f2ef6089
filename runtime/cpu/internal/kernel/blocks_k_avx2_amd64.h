// The AVX2 loop of the K quants' products (dotBlocksKGo), included by
// blocks_amd64.s once per type with KNAME2, KCONSTS2 (constants the
// type's unpacking keeps in Y14, Y15), KSCALES2 (a super-block's
// factors: the 16 half factors as int32 in kLane's order, lanes 0..7 in
// Y6 and 8..15 in Y7, f32(d·D) stored at 24(SP), and for the types with
// mins their terms taken from Y2 at once), KUNPACK(OFF) (the codes of the
// group at OFF(SI) as int16: the even inputs in Y8, the odd ones in Y9)
// and KCB (a group's code bytes) defined, and MIN2 for Q2_K (whose mins
// meet the half groups' sums, 64 bytes a super-block at R12). Rows of
// whole super-blocks only (dotBlocksKRowsOn).
//
// Per group, multiply-adds of the codes with the activations' codes sum
// four inputs a lane (lanes 0..3 its first half, 4..7 its second);
// VPHADDD of the even groups' registers, then of the odd ones', leaves
// each half's exact sum in one lane, in the AVX-512 loop's order (kLane):
// Y3 lanes 0..7, Y4 8..15. Two VPMULLD apply the factors, and the
// super-block becomes f32 once, is scaled and added to Y0 and Y1.
// Registers as the AVX-512 loop's; Y5, Y10, Y11 temporaries. The frame
// holds the next row's scale words (0), the rows left (8), the next
// output (16) and the super-block's f32(d·D) (24).

// KPF2: how far ahead of the codes being read the loop prefetches (the
// hardware prefetchers alone leave a core waiting on memory).
#define KPF2 2048

// KGROUP2(J, G): group J of the super-block (codes at J·KCB(SI),
// activations as the pairs lie), its sums to G.
#define KGROUP2(J, G) \
	KUNPACK(J*KCB) \
	VPMADDWD (J/2*128+J%2*32)(R8), Y8, Y8 \
	VPMADDWD (J/2*128+J%2*32+64)(R8), Y9, Y9 \
	VPADDD Y9, Y8, G

// func KNAME2(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)
TEXT KNAME2(SB), NOSPLIT, $32-72
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), AX
	MOVQ AX, 0(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 8(SP)
	MOVQ out+64(FP), AX
	MOVQ AX, 16(SP)
	KCONSTS2

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
	// VPHADDD of the even groups' sums, then of the odd ones', leaves
	// half h in lane kLane(h): Y3 lanes 0..7, Y4 lanes 8..15.
	KGROUP2(0, Y3)
	KGROUP2(2, Y4)
	VPHADDD Y4, Y3, Y3
	KGROUP2(4, Y4)
	KGROUP2(6, Y12)
	VPHADDD Y12, Y4, Y4
	VPHADDD Y4, Y3, Y3
	KGROUP2(1, Y4)
	KGROUP2(3, Y12)
	VPHADDD Y12, Y4, Y4
	KGROUP2(5, Y12)
	KGROUP2(7, Y13)
	VPHADDD Y13, Y12, Y12
	VPHADDD Y12, Y4, Y4
	VPMULLD Y6, Y3, Y3
	VPMULLD Y7, Y4, Y4
	VBROADCASTSS 24(SP), Y10
	VCVTDQ2PS Y3, Y3
	VMULPS Y10, Y3, Y3
	VADDPS Y3, Y0, Y0
	VCVTDQ2PS Y4, Y4
	VMULPS Y10, Y4, Y4
	VADDPS Y4, Y1, Y1
	ADDQ $(8*KCB), SI
	ADDQ $512, R8
	ADDQ $4, R11
#ifdef MIN2
	ADDQ $64, R12
#else
	ADDQ $32, R12
#endif
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
