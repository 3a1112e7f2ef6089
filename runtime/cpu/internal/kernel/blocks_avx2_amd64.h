// The one loop of the AVX2 block products (blocks_amd64.s), included once
// per type with the type's NAME, CONSTS (the registers of its constants),
// SCALES (a chunk's scales), UNPACK (a group's codes) and MIN1 (a min per
// group) where the type has mins defined: the AVX2 form of dotBlocksGo for
// rows of weights one after the other, each over whole chunks of eight
// groups and a last one of fewer, whose scale words and ds the caller
// guarantees to be readable (dotBlocksRowsAsm).
//
// Registers: SI codes (rows follow each other), DI a row's scale words,
// R8 the activations' codes (pairs of groups, CodeIndex), R12 their ds,
// CX the groups left, DX the groups of this chunk; Y0 the accumulator (a
// lane a group's place in its chunk: 1, 0, 3, 2, 5, 4, 7, 6), Y2 the
// eight min lanes, Y1 and Y7 a chunk's half sums (groups 1, 0, 3, 2 and
// 5, 4, 7, 6, first halves in the low 128 bits). Per chunk SCALES leaves
// the eight groups' scales in Y3 and mins in Y5, and the scales become
// f32(S·d); per group
// UNPACK leaves its codes as int16 in Y8 (even inputs) and Y9 (odd ones),
// and GPAIR sums a pair's halves into Y9 for Y1 or Y7; then the chunk's
// terms, one conversion, product and sum. The frame holds a pair's even
// group's lanes (0), the next row's scale words (96), the rows left (104)
// and the next output (112).

// GLANES(EOFF, OOFF): the integer lanes of the group whose activations
// are at EOFF(R8) (even inputs) and OOFF(R8) (odd ones) to Y8.
#define GLANES(EOFF, OOFF) \
	UNPACK \
	VPMADDWD EOFF(R8), Y8, Y8 \
	VPMADDWD OOFF(R8), Y9, Y9 \
	VPADDD Y9, Y8, Y8

// GPAIR(EOFF, OOFF, EOFF2, OOFF2): a pair's lanes summed by halves: the
// even group's (EOFF, OOFF) held at 0(SP), the odd one's (EOFF2, OOFF2)
// in Y8; two horizontal adds leave in Y9 each 128-bit half's sums of
// the odd group, the even one, the odd, the even.
#define GPAIR(EOFF, OOFF, EOFF2, OOFF2) \
	GLANES(EOFF, OOFF) \
	VMOVDQU Y8, (SP) \
	GLANES(EOFF2, OOFF2) \
	VPHADDD (SP), Y8, Y9 \
	VPHADDD Y9, Y9, Y9

// GSINGLE: a lone even group, its odd partner's sums zero.
#define GSINGLE \
	GLANES(0, 32) \
	VMOVDQU Y8, (SP) \
	VPXOR Y8, Y8, Y8 \
	VPHADDD (SP), Y8, Y9 \
	VPHADDD Y9, Y9, Y9 \
	ADDQ $64, R8

// func NAME(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)
TEXT NAME(SB), NOSPLIT, $120-64
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), AX
	MOVQ AX, 96(SP)
	MOVQ rows+48(FP), AX
	MOVQ AX, 104(SP)
	MOVQ out+56(FP), AX
	MOVQ AX, 112(SP)
	CONSTS

row:
	MOVQ 96(SP), DI
	MOVQ sstride+16(FP), AX
	ADDQ DI, AX
	MOVQ AX, 96(SP)
	MOVQ xq+24(FP), R8
	MOVQ ds+32(FP), R12
	MOVQ groups+40(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y2, Y2, Y2

chunk:
	VPXOR Y1, Y1, Y1
	MOVQ $8, DX
	CMPQ CX, DX
	CMOVQLT CX, DX
	SCALES
	// The chunk's d (Y10) and sums (Y11): ds holds d0 s0 d1 s1 ...
	VMOVUPS (R12), Y8
	VMOVUPS 32(R12), Y9
	VSHUFPS $0x88, Y9, Y8, Y10
	VPERMPD $0xD8, Y10, Y10
#ifdef MIN1
	VSHUFPS $0xDD, Y9, Y8, Y11
	VPERMPD $0xD8, Y11, Y11
	VMULPS Y11, Y5, Y5
	VMOVQ DX, X8
	VPBROADCASTD X8, Y8
	VPCMPGTD lanes<>(SB), Y8, Y8 // the chunk's groups: a last chunk may hold fewer
	VANDPS Y8, Y5, Y5
	VADDPS Y5, Y2, Y2
#endif
	VMULPS Y10, Y3, Y3
	VPXOR Y7, Y7, Y7
	// A pair's sums (GPAIR) go to the chunk's registers whole (the first
	// of two) or to dwords 2 and 3 of each half (the second): Y1 holds
	// groups 1, 0, 3, 2 of the chunk, Y7 groups 5, 4, 7, 6.
	// Up to four pairs, then an even group alone where the count is odd.
	MOVQ DX, R9
	SHRQ $1, R9
	JZ   single0
	GPAIR(0, 64, 32, 96)
	VMOVDQA Y9, Y1
	ADDQ $128, R8
	DECQ R9
	JZ   single1
	GPAIR(0, 64, 32, 96)
	VPBLENDD $0xCC, Y9, Y1, Y1
	ADDQ $128, R8
	DECQ R9
	JZ   single2
	GPAIR(0, 64, 32, 96)
	VMOVDQA Y9, Y7
	ADDQ $128, R8
	DECQ R9
	JZ   single3
	GPAIR(0, 64, 32, 96)
	VPBLENDD $0xCC, Y9, Y7, Y7
	ADDQ $128, R8
	JMP  terms

single0:
	TESTQ $1, DX
	JZ    terms
	GSINGLE
	VMOVDQA Y9, Y1
	JMP  terms

single1:
	TESTQ $1, DX
	JZ    terms
	GSINGLE
	VPBLENDD $0xCC, Y9, Y1, Y1
	JMP  terms

single2:
	TESTQ $1, DX
	JZ    terms
	GSINGLE
	VMOVDQA Y9, Y7
	JMP  terms

single3:
	TESTQ $1, DX
	JZ    terms
	GSINGLE
	VPBLENDD $0xCC, Y9, Y7, Y7

terms:
	// The chunk's terms f32(f32(S)·f32(s·d)) added to Y0 (lanes: the
	// chunk's groups 1, 0, 3, 2, 5, 4, 7, 6), of its groups only.
	VMOVDQU gsumg8<>(SB), Y11
	VMOVQ DX, X8
	VPBROADCASTD X8, Y8
	VPCMPGTD Y11, Y8, Y8
	VPERMPS Y3, Y11, Y3
	VPERM2I128 $0x01, Y1, Y1, Y9
	VPADDD Y9, Y1, Y1
	VPERM2I128 $0x01, Y7, Y7, Y9
	VPADDD Y9, Y7, Y7
	VINSERTI128 $1, X7, Y1, Y9
	VCVTDQ2PS Y9, Y9
	VMULPS Y3, Y9, Y9
	VANDPS Y8, Y9, Y9
	VADDPS Y9, Y0, Y0

next:
	ADDQ $64, R12
	SUBQ DX, CX
	JNZ  chunk

	// fold8 of the lanes (groups 1, 0, 3, 2, 5, 4, 7, 6):
	// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)); then the mins'.
	VEXTRACTF128 $1, Y0, X9
	VADDPS X9, X0, X0
	VMOVHLPS X0, X0, X10
	VADDPS X10, X0, X0
	VMOVSHDUP X0, X10
	VADDSS X10, X0, X0
	VEXTRACTF128 $1, Y2, X9
	VADDPS X9, X2, X2
	VMOVHLPS X2, X2, X9
	VADDPS X9, X2, X2
	VMOVSHDUP X2, X9
	VADDSS X9, X2, X2
	VADDSS X2, X0, X0
	MOVQ 112(SP), AX
	VMOVSS X0, (AX)
	ADDQ $4, AX
	MOVQ AX, 112(SP)
	DECQ 104(SP)
	JNZ  row
	VZEROUPPER
	RET

#undef GLANES
#undef GPAIR
#undef GSINGLE
