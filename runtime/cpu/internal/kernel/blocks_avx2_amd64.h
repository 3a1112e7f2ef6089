// The one loop of the AVX2 block products (blocks_amd64.s), included once
// per type with the type's NAME, CONSTS (the registers of its constants),
// SCALES (a chunk's scales), UNPACK (a group's codes) and flags HALVES
// (a scale per 16 inputs), MIN1 (a min per group), MIN2 (a min per 16),
// SPLIT (a row's super-blocks' d before their factors) defined: the AVX2
// twin of dotBlocksGo for rows of weights one after the other, each over
// whole chunks of eight groups and a last one of fewer, whose scale words
// and ds the caller guarantees to be readable (dotBlocksRowsAsm).
//
// Registers: SI codes (rows follow each other), DI a row's scale words
// (with SPLIT the super-blocks' d), R8 the activations' codes (pairs of
// groups, CodeIndex), R12 their ds, R13 their half sums (MIN2) or with
// SPLIT the factors, CX the groups left, DX the groups of this chunk; Y0
// and Y1 the even and odd groups' accumulators, Y2 the eight min lanes.
// Per chunk SCALES leaves the eight groups' scales in Y3 (and Y4: second
// halves) and mins in Y5 (and Y6), and the scales become f32(S·d); per
// group UNPACK leaves its codes as int16 in Y8 (even inputs) and Y9 (odd
// ones), and GROUP adds f32(f32(lane)·f32(S·d)) to the accumulator of the
// group's parity. The frame holds the next row's scale words (96), the
// rows left (104) and the next output (112).

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

// SCALEV: the group's f32(S·d) in Y10 (S_lo in lanes 0..3, S_hi in 4..7),
// from Y3 (and Y4) by the group's index in every lane of Y7, which then
// moves to the next group. (Registers, not a table on the stack: a wide
// load of a table just stored waits for the store to retire.)
#ifdef HALVES
#define SCALEV \
	VPERMPS Y3, Y7, Y10 \
	VPERMPS Y4, Y7, Y11 \
	VBLENDPS $0xF0, Y11, Y10, Y10 \
	VPADDD one8<>(SB), Y7, Y7
#else
#define SCALEV \
	VPERMPS Y3, Y7, Y10 \
	VPADDD one8<>(SB), Y7, Y7
#endif

// func NAME(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32)
TEXT NAME(SB), NOSPLIT, $120-72
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), AX
	MOVQ AX, 96(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 104(SP)
	MOVQ out+64(FP), AX
	MOVQ AX, 112(SP)
	CONSTS

row:
	MOVQ 96(SP), DI
	MOVQ sstride+16(FP), AX
	ADDQ DI, AX
	MOVQ AX, 96(SP)
	MOVQ xq+24(FP), R8
	MOVQ ds+32(FP), R12
	MOVQ hs+40(FP), R13
	MOVQ groups+48(FP), CX
#ifdef SPLIT
	// The row's factors follow its super-blocks' f16 d, 2 bytes each.
	MOVQ CX, R13
	SHRQ $2, R13
	ADDQ DI, R13
#endif
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2

chunk:
	MOVQ $8, DX
#ifndef FULL
	CMPQ CX, DX
	CMOVQLT CX, DX
#endif
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
#ifndef FULL
	VMOVQ DX, X8
	VPBROADCASTD X8, Y8
	VPCMPGTD lanes<>(SB), Y8, Y8 // the chunk's groups: a last chunk may hold fewer
	VANDPS Y8, Y5, Y5
#endif
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
#endif
	VPXOR Y7, Y7, Y7
#ifdef FULL
	// A super-block: eight groups.
	GROUP(0, 64, Y0)
	GROUP(32, 96, Y1)
	GROUP(128, 192, Y0)
	GROUP(160, 224, Y1)
	GROUP(256, 320, Y0)
	GROUP(288, 352, Y1)
	GROUP(384, 448, Y0)
	GROUP(416, 480, Y1)
	ADDQ $512, R8
	JMP  next
#endif
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

	// fold(acc0 + acc1) + fold(macc), fold as a register folds in halves.
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
	MOVQ 112(SP), AX
	VMOVSS X0, (AX)
	ADDQ $4, AX
	MOVQ AX, 112(SP)
	DECQ 104(SP)
	JNZ  row
	VZEROUPPER
	RET

#undef SCALEV
#undef GROUP
