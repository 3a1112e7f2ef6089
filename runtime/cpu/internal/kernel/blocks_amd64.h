// The one loop of the AVX2 block products (blocks_amd64.s), included once
// per type with the type's NAME, CONSTS (the registers of its constants),
// SCALES (a chunk's scales), UNPACK (a group's codes) and flags HALVES
// (a scale per 16 inputs), MIN1 (a min per group), MIN2 (a min per 16)
// defined: the AVX2 twin of dotBlocksGroups over whole chunks of eight
// groups and a last one of fewer, whose scale words and ds the caller
// guarantees to be readable (dotBlocksAsm).
//
// Registers: SI codes, DI scale words (with SPLIT the super-blocks' d),
// R8 the activations' codes (pairs of groups, CodeIndex), R12 their ds,
// R13 their half sums (MIN2) or with SPLIT the factors, CX the
// groups left, DX the groups of this chunk, R11 the group's entry of the
// scale table on the stack; Y0 and Y1 the even and odd groups'
// accumulators, Y2 the eight min lanes. Per chunk SCALES leaves the eight
// groups' scales in Y3 (and Y4: second halves) and mins in Y5 (and Y6);
// their products with the ds, f32(S·d), go to the table, as pairs (S_lo,
// S_hi) with HALVES; per group UNPACK leaves its codes as int16 in Y8
// (even inputs) and Y9 (odd ones), and GROUP adds
// f32(f32(lane)·f32(S·d)) to the accumulator of the group's parity.

// GROUP adds the group whose activations are at EOFF(R8) (even inputs)
// and OOFF(R8) (odd ones) to ACC.
#define GROUP(EOFF, OOFF, ACC) \
	UNPACK \
	VPMADDWD EOFF(R8), Y8, Y8 \
	VPMADDWD OOFF(R8), Y9, Y9 \
	VPADDD Y9, Y8, Y8 \
	VCVTDQ2PS Y8, Y8 \
	SCALEV \
	VMULPS Y10, Y8, Y8 \
	VADDPS Y8, ACC, ACC

#ifdef HALVES
#define SCALEV \
	VPERMPS (R11), Y7, Y10 \
	ADDQ $8, R11
#else
#define SCALEV \
	VBROADCASTSS (R11), Y10 \
	ADDQ $4, R11
#endif

// func NAME(codes, scales *uint32, xq *int16, ds, hs *float32, groups int, acc *[2][8]float32, macc *[8]float32)
TEXT NAME(SB), NOSPLIT, $96-64
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), DI
	MOVQ xq+16(FP), R8
	MOVQ ds+24(FP), R12
	MOVQ hs+32(FP), R13
	MOVQ groups+40(FP), CX
	MOVQ acc+48(FP), R10
	VMOVUPS (R10), Y0
	VMOVUPS 32(R10), Y1
	MOVQ macc+56(FP), R10
	VMOVUPS (R10), Y2
	CONSTS
#ifdef SPLIT
	// The row's factors follow its super-blocks' f16 d, 2 bytes each.
	MOVQ CX, R13
	SHRQ $2, R13
	ADDQ DI, R13
#endif
#ifdef HALVES
	VMOVDQU lohi<>(SB), Y7
#endif

chunk:
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
#ifdef MIN2
	VMOVUPS (R13), Y8
	VMOVUPS 32(R13), Y9
	VSHUFPS $0x88, Y9, Y8, Y11
	VPERMPD $0xD8, Y11, Y11
	VMULPS Y11, Y5, Y5
	VADDPS Y5, Y2, Y2
	VSHUFPS $0xDD, Y9, Y8, Y11
	VPERMPD $0xD8, Y11, Y11
	VMULPS Y11, Y6, Y6
	VADDPS Y6, Y2, Y2
	ADDQ $64, R13
#endif
	VMULPS Y10, Y3, Y3
#ifdef HALVES
	VMULPS Y10, Y4, Y4
	VUNPCKLPS Y4, Y3, Y8
	VUNPCKHPS Y4, Y3, Y9
	VPERM2F128 $0x20, Y9, Y8, Y3
	VPERM2F128 $0x31, Y9, Y8, Y4
	VMOVUPS Y3, 0(SP)
	VMOVUPS Y4, 32(SP)
#else
	VMOVUPS Y3, 0(SP)
#endif
	LEAQ 0(SP), R11
	MOVQ DX, R9
	SHRQ $1, R9
	JZ   single

pair:
	GROUP(0, 64, Y0)
	GROUP(32, 96, Y1)
	ADDQ $128, R8
	DECQ R9
	JNZ  pair

single:
	TESTQ $1, DX
	JZ    next
	GROUP(0, 32, Y0)
	ADDQ $64, R8

next:
	ADDQ $64, R12
	SUBQ DX, CX
	JNZ  chunk

	MOVQ acc+48(FP), R10
	VMOVUPS Y0, (R10)
	VMOVUPS Y1, 32(R10)
	MOVQ macc+56(FP), R10
	VMOVUPS Y2, (R10)
	VZEROUPPER
	RET

#undef SCALEV
#undef GROUP
