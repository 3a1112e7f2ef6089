// The AVX-512 form of the block products' loop (blocks_avx2_amd64.h, whose
// macros and registers it shares): a 512-bit register takes a pair of
// groups, as the activations lie (an even group's inputs, then the odd
// one's: CodeIndex), so that the integer products cost one instruction a
// pair. The type defines UNPACK2 besides UNPACK: a pair's codes as int16
// in Z8 (even inputs of both groups) and Z9 (odd ones). Each pair's lanes
// become its four half sums (QSUM512), which Z19 gathers for a chunk of
// eight groups (a quarter a half: the even groups' first halves, their
// second, the odd groups' first, their second; pair p in dword p of
// each, under the mask K4); then the chunk's terms are one conversion,
// product and sum into Z0, group g's term in the lane gsumg512 names (K5:
// the chunk's groups). The single last group of an odd count is AVX2's
// unpacking, its odd group's lanes (the upper half) zero.
//
// The frame holds the next row's scale words (128), the rows left (136)
// and the next output (144).

// QSUM512(Z): each 128-bit quarter of Z (four lanes: a half group's
// integer sums) summed into all its four dwords.
#define QSUM512(Z) \
	VPSHUFD $0x4E, Z, Z10 \
	VPADDD Z10, Z, Z \
	VPSHUFD $0xB1, Z, Z10 \
	VPADDD Z10, Z, Z

// GROUP512(X) adds the pair whose activations are at X(R8): its integer
// lanes (even group in 0..7, odd one in 8..15) become its four half sums,
// which go to the dwords of Z19's quarters that K4 names (pair p of the
// chunk: dword p of each), and K4 moves on to the next pair's.
#define GROUP512(X) \
	UNPACK2 \
	VPMADDWD X(R8), Z8, Z8 \
	VPMADDWD X+64(R8), Z9, Z9 \
	VPADDD Z9, Z8, Z8 \
	QSUM512(Z8) \
	VMOVDQA32 Z8, K4, Z19 \
	KSHIFTLW $1, K4, K4

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
	VMOVDQU32 gsumg512<>(SB), Z21
#ifdef HALVES
	VMOVDQU32 gsumsd512<>(SB), Z20
#else
	VMOVDQA32 Z21, Z20
#endif

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
	VPXORD Z19, Z19, Z19
	MOVL $0x1111, AX
	KMOVW AX, K4
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
#ifdef FULL
	// A super-block: four pairs.
	GROUP512(0)
	GROUP512(128)
	GROUP512(256)
	GROUP512(384)
	ADDQ $512, R8
	JMP  terms
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
	// An even group alone: the odd one's lanes (a VEX write's upper half)
	// are zero.
	TESTQ $1, DX
	JZ    terms
	UNPACK
	VPMADDWD (R8), Y8, Y8
	VPMADDWD 32(R8), Y9, Y9
	VPADDD Y9, Y8, Y8
	QSUM512(Z8)
	VMOVDQA32 Z8, K4, Z19
	ADDQ $64, R8

terms:
	// The chunk's terms f32(f32(S)·f32(s·d)) added to Z0 (group g's in
	// the lanes gsumg512 names: the fold reads lanes 0..3 and 8..11), of
	// the chunk's groups only (K5).
	VPERMPS Z3, Z20, Z11
	VPBROADCASTD DX, Z9
	VPCMPGTD Z21, Z9, K5
#ifdef HALVES
	VCVTDQ2PS Z19, Z19
	VMULPS Z11, Z19, Z19
	VADDPS Z19, Z0, K5, Z0
	VSHUFF32X4 $0xB1, Z19, Z19, Z19
	VADDPS Z19, Z0, K5, Z0
#else
	VSHUFI32X4 $0xB1, Z19, Z19, Z9
	VPADDD Z9, Z19, Z19
	VCVTDQ2PS Z19, Z19
	VMULPS Z11, Z19, Z19
	VADDPS Z19, Z0, K5, Z0
#endif

next:
	ADDQ $64, R12
	SUBQ DX, CX
	JNZ  chunk

	// fold8 of the lanes: groups 0, 2, 4, 6 in lanes 0..3, 1, 3, 5, 7
	// in 8..11: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
	VEXTRACTF32X4 $2, Z0, X9
	VMOVHLPS X0, X0, X10
	VADDPS X10, X0, X0
	VMOVSHDUP X0, X10
	VADDSS X10, X0, X0
	VMOVHLPS X9, X9, X10
	VADDPS X10, X9, X9
	VMOVSHDUP X9, X10
	VADDSS X10, X9, X9
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
#undef QSUM512
