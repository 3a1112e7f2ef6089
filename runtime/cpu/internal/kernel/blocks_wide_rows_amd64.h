// The wide kernel's expansion of sixteen rows of a type of a scale a group
// a row at a time (blocks_wide_avx512_amd64.h's Q5_0 and Q8_0, and the
// AVX2 form's every type), included as WROWNAME with the type's CONSTS
// and SCALES (a chunk's scales in Y3), WROWPAIR (a pair of groups'
// codes unpacked from SI and stored as row j of the pair's two 16×16
// blocks of dwords at AX and 1024 bytes on: the even inputs' int16 pairs,
// then the odd ones', dword 8h+k holding lane k of group h's) and
// WROWSINGLE (a lone last group's, the product reading none of its
// partner's lanes) defined. Each chunk's scales go to row j of a 16×16
// block of them (two chunks a block: the even one's in dwords 0..7, the
// odd one's in 8..15). transposeWide (or transposeWideAVX2) then turns
// every block into the layout blocks_wide_avx512_amd64.h describes.

// func WROWNAME(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)
TEXT WROWNAME(SB), NOSPLIT, $0-56
	MOVQ codes+0(FP), R8
	MOVQ scales+8(FP), R9
	MOVQ dst+40(FP), R13
	MOVQ dsc+48(FP), R14
	CONSTS
	XORQ BX, BX

wrow:
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

wchunk:
	SCALES
	VMOVUPS Y3, (DX)
	ADDQ R11, DX
	NEGQ R11
	ADDQ $1024, R11
	MOVQ $8, R10
	CMPQ CX, R10
	CMOVQLT CX, R10
	SUBQ R10, CX

wpair:
	CMPQ R10, $2
	JLT  wsingle
	WROWPAIR
	ADDQ $2048, AX
	SUBQ $2, R10
	JMP  wpair

wsingle:
	TESTQ R10, R10
	JZ    wnext
	WROWSINGLE
	ADDQ $2048, AX

wnext:
	TESTQ CX, CX
	JNZ   wchunk
	ADDQ cstride+16(FP), R8
	ADDQ sstride+24(FP), R9
	INCQ BX
	CMPQ BX, $16
	JLT  wrow
	VZEROUPPER
	RET
