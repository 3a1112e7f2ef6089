// The AVX2 expansion of sixteen rows of weights for the wide kernel
// (dotWideAVX2, blocks_wide_dot_avx2_amd64.h): blocks_wide_avx512_amd64.h's
// layout of the types of a scale a group, included by blocks_types_amd64.h
// as WIDE2NAME with the type's CONSTS, SCALES and UNPACK (the AVX2 one-row
// loop's: a chunk's scales in Y3; a group's codes as int16, the even
// inputs in Y8, the odd ones in Y9). Every type goes a row at a time: each
// group's codes to its half of row j of the pair's two 16×16 blocks of
// dwords (the even inputs' block, then the odd ones'; a lone last group
// has no partner, whose lanes the product does not read), each chunk's
// scales to row j of a block of them, for transposeWideAVX2 to turn.

// func WIDE2NAME(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)
TEXT WIDE2NAME(SB), NOSPLIT, $0-56
	MOVQ codes+0(FP), R8
	MOVQ scales+8(FP), R9
	MOVQ dst+40(FP), R13
	MOVQ dsc+48(FP), R14
	CONSTS
	XORQ BX, BX

w2row:
	MOVQ R8, SI
	MOVQ R9, DI
	MOVQ BX, AX
	SHLQ $6, AX
	ADDQ R13, AX
	MOVQ BX, DX
	SHLQ $6, DX
	ADDQ R14, DX
	MOVQ $32, R11
	MOVQ groups+32(FP), CX

w2chunk:
	SCALES
	VMOVUPS Y3, (DX)
	ADDQ R11, DX
	NEGQ R11
	ADDQ $1024, R11
	MOVQ $8, R10
	CMPQ CX, R10
	CMOVQLT CX, R10
	SUBQ R10, CX

w2pair:
	CMPQ R10, $2
	JLT  w2single
	UNPACK
	VMOVDQU Y8, (AX)
	VMOVDQU Y9, 1024(AX)
	UNPACK
	VMOVDQU Y8, 32(AX)
	VMOVDQU Y9, 1056(AX)
	ADDQ $2048, AX
	SUBQ $2, R10
	JMP  w2pair

w2single:
	TESTQ R10, R10
	JZ    w2next
	UNPACK
	VMOVDQU Y8, (AX)
	VMOVDQU Y9, 1024(AX)
	ADDQ $2048, AX

w2next:
	TESTQ CX, CX
	JNZ   w2chunk
	ADDQ cstride+16(FP), R8
	ADDQ sstride+24(FP), R9
	INCQ BX
	CMPQ BX, $16
	JLT  w2row
	VZEROUPPER
	RET
