// The AVX-512 form of the block products' loop (blocks_avx2_amd64.h, whose
// macros and registers it shares): a 512-bit register takes a pair of
// groups, as the activations lie (an even group's inputs, then the odd
// one's: CodeIndex), so that the integer products, their conversion and
// scaling and the accumulation cost one instruction a pair. The type
// defines UNPACK2 besides UNPACK: a pair's codes as int16 in Z8 (even
// inputs of both groups) and Z9 (odd ones). Z0 accumulates the even
// groups in lanes 0..7 and the odd ones in 8..15: dotBlocksGo's two sets
// of lanes. Only EVEX instructions write Z0 and Z7 (a VEX write would
// clear their upper halves); the single last group of an odd count is
// AVX2's, added to Z0 with its upper half zero.
//
// The frame holds the next row's scale words (128), the rows left (136)
// and the next output (144).

// GROUP512(X) adds the pair whose activations are at X(R8) to Z0: its
// scales are Z3's lanes that Z16 names (Z3 holds the chunk's f32(S·d),
// with HALVES the first halves' in lanes 0..7 and the second halves' in
// 8..15), and Z16 moves on to the next pair by Z17.
#define GROUP512(X) \
	UNPACK2 \
	VPMADDWD X(R8), Z8, Z8 \
	VPMADDWD X+64(R8), Z9, Z9 \
	VPADDD Z9, Z8, Z8 \
	VCVTDQ2PS Z8, Z8 \
	VPERMPS Z3, Z16, Z10 \
	VPADDD Z17, Z16, Z16 \
	VMULPS Z10, Z8, Z8 \
	VADDPS Z8, Z0, Z0

// func NAME512(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32)
TEXT NAME512(SB), NOSPLIT, $152-72
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), AX
	MOVQ AX, 128(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 136(SP)
	MOVQ out+64(FP), AX
	MOVQ AX, 144(SP)
	CONSTS
#ifdef HALVES
	VMOVDQU32 lohi512<>(SB), Z18
#else
	VMOVDQU32 pair512<>(SB), Z18
#endif
	VPBROADCASTD two32<>(SB), Z17

row:
	MOVQ 128(SP), DI
	MOVQ sstride+16(FP), AX
	ADDQ DI, AX
	MOVQ AX, 128(SP)
	MOVQ xq+24(FP), R8
	MOVQ ds+32(FP), R12
	MOVQ hs+40(FP), R13
	MOVQ groups+48(FP), CX
#ifdef SPLIT
	MOVQ CX, R13
	SHRQ $2, R13
	ADDQ DI, R13
#endif
	VPXORD Z0, Z0, Z0
	VXORPS Y2, Y2, Y2

chunk:
	MOVQ $8, DX
#ifndef FULL
	CMPQ CX, DX
	CMOVQLT CX, DX
#endif
	SCALES
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
	VPCMPGTD lanes<>(SB), Y8, Y8
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
	VINSERTF64X4 $1, Y4, Z3, Z3
#endif
	VMOVDQA32 Z18, Z16
#ifdef FULL
	// A super-block: four pairs.
	GROUP512(0)
	GROUP512(128)
	GROUP512(256)
	GROUP512(384)
	ADDQ $512, R8
	JMP  next
#endif
	MOVQ DX, R9
	SHRQ $1, R9
	JZ   single

pair:
	GROUP512(0)
	ADDQ $128, R8
	DECQ R9
	JNZ  pair

single:
	// An even group alone: its scales are the first 8 lanes of the next
	// pair's.
	TESTQ $1, DX
	JZ    next
	UNPACK
	VPMADDWD (R8), Y8, Y8
	VPMADDWD 32(R8), Y9, Y9
	VPADDD Y9, Y8, Y8
	VCVTDQ2PS Y8, Y8
	VPERMPS Z3, Z16, Z10
	VMULPS Y10, Y8, Y8
	VADDPS Z8, Z0, Z0
	ADDQ $64, R8

next:
	ADDQ $64, R12
	SUBQ DX, CX
	JNZ  chunk

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
	MOVQ 144(SP), AX
	VMOVSS X0, (AX)
	ADDQ $4, AX
	MOVQ AX, 144(SP)
	DECQ 136(SP)
	JNZ  row
	VZEROUPPER
	RET

#undef GROUP512
