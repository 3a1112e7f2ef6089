// The AVX-512 form of the block products' loop (blocks_avx2_amd64.h, whose
// macros and registers it shares): a 512-bit register takes a pair of
// groups, as the activations lie (an even group's inputs, then the odd
// one's: CodeIndex), so that the integer products cost one instruction a
// pair. The type defines UNPACK2 besides UNPACK: a pair's codes as int16
// in Z8 (even inputs of both groups) and Z9 (odd ones). A chunk's four
// pairs' lanes (Z16, Z17, Z18, Z22, a register a place) are summed in one
// transpose to Z19, a quarter each half group of the chunk (the even
// groups' first halves, their second, the odd groups' first, their
// second; pair p in dword p); then the chunk's terms are one conversion,
// product and sum into Z0, group g's term in the lane gsumg512 names (K5:
// the chunk's groups). The single last group of an odd count is AVX2's
// unpacking, its odd group's lanes (the upper half) zero.
//
// The frame holds the next row's scale words (128), the rows left (136)
// and the next output (144).

// GROUP512(X, V): the integer lanes of the pair whose activations are at
// X(R8) to V (even group in 0..7, odd one in 8..15).
#define GROUP512(X, V) \
	UNPACK2 \
	VPMADDWD X(R8), Z8, Z8 \
	VPMADDWD X+64(R8), Z9, Z9 \
	VPADDD Z9, Z8, V

// SINGLE512(V): an even group alone (AVX2's unpacking): its lanes to V,
// the odd group's (the upper half) zero.
#define SINGLE512(V) \
	UNPACK \
	VPMADDWD (R8), Y8, Y8 \
	VPMADDWD 32(R8), Y9, Y9 \
	VPADDD Y9, Y8, V \
	ADDQ $64, R8

// func NAME512(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)
TEXT NAME512(SB), NOSPLIT, $152-64
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), AX
	MOVQ AX, 128(SP)
	MOVQ rows+48(FP), AX
	MOVQ AX, 136(SP)
	MOVQ out+56(FP), AX
	MOVQ AX, 144(SP)
	CONSTS
	VMOVDQU32 gsumg512<>(SB), Z21
	VMOVDQA32 Z21, Z20

row:
	MOVQ 128(SP), DI
	MOVQ sstride+16(FP), AX
	ADDQ DI, AX
	MOVQ AX, 128(SP)
	MOVQ xq+24(FP), R8
	MOVQ ds+32(FP), R12
	MOVQ groups+40(FP), CX
	VPXORD Z0, Z0, Z0
	VXORPS Y2, Y2, Y2

chunk:
	MOVQ $8, DX
	CMPQ CX, DX
	CMOVQLT CX, DX
	SCALES
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
	VPCMPGTD lanes<>(SB), Y8, Y8
	VANDPS Y8, Y5, Y5
	VADDPS Y5, Y2, Y2
#endif
	VMULPS Y10, Y3, Y3
	// Up to four pairs, each in the register of its place, then an even
	// group alone where the count is odd; the places after them zero.
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z22, Z22, Z22
	MOVQ DX, R9
	SHRQ $1, R9
	JZ   single0
	GROUP512(0, Z16)
	ADDQ $128, R8
	DECQ R9
	JZ   single1
	GROUP512(0, Z17)
	ADDQ $128, R8
	DECQ R9
	JZ   single2
	GROUP512(0, Z18)
	ADDQ $128, R8
	DECQ R9
	JZ   single3
	GROUP512(0, Z22)
	ADDQ $128, R8
	JMP  terms

single0:
	TESTQ $1, DX
	JZ    terms
	SINGLE512(Y16)
	JMP   terms

single1:
	TESTQ $1, DX
	JZ    terms
	SINGLE512(Y17)
	JMP   terms

single2:
	TESTQ $1, DX
	JZ    terms
	SINGLE512(Y18)
	JMP   terms

single3:
	TESTQ $1, DX
	JZ    terms
	SINGLE512(Y22)

terms:
	// The pairs' lanes summed in one transpose (dword and qword unpacks):
	// Z19's quarter q holds each pair's half sums of quarter q, pair p
	// in dword p (the even groups' first halves, their second, the odd
	// groups' first, their second).
	VPUNPCKLDQ Z17, Z16, Z10
	VPUNPCKHDQ Z17, Z16, Z11
	VPADDD Z11, Z10, Z10
	VPUNPCKLDQ Z22, Z18, Z11
	VPUNPCKHDQ Z22, Z18, Z24
	VPADDD Z24, Z11, Z11
	VPUNPCKLQDQ Z11, Z10, Z19
	VPUNPCKHQDQ Z11, Z10, Z24
	VPADDD Z24, Z19, Z19
	// The chunk's terms f32(f32(S)·f32(s·d)) added to Z0 (group g's in
	// the lanes gsumg512 names: the fold reads lanes 0..3 and 8..11), of
	// the chunk's groups only (K5).
	VPERMPS Z3, Z20, Z11
	VPBROADCASTD DX, Z9
	VPCMPGTD Z21, Z9, K5
	VSHUFI32X4 $0xB1, Z19, Z19, Z9
	VPADDD Z9, Z19, Z19
	VCVTDQ2PS Z19, Z19
	VMULPS Z11, Z19, Z19
	VADDPS Z19, Z0, K5, Z0

next:
	ADDQ $64, R12
	SUBQ DX, CX
	JNZ  chunk

	// fold8 of the lanes: groups 0, 2, 4, 6 in lanes 0..3, 1, 3, 5, 7
	// in 8..11: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)).
	VEXTRACTF32X4 $2, Z0, X9
	FOLD8X
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
#undef SINGLE512
