// The expansion of sixteen rows of weights for the wide kernel
// (blocks_wide_amd64.s; blocks_types_amd64.h includes it once for each
// type with an eight-row tile kernel, as WIDENAME with the type's CONSTS,
// SCALES, UNPACK and UNPACK2): each row's codes unpack as the one-row
// loop unpacks them (a pair of groups: the even inputs' int16 pairs in Z8,
// the odd ones' in Z9, dword 8h+k holding lane k of group h's), and are
// stored as row j of the pair's two 16×16 blocks of dwords (dst, 2 KiB a
// pair), which transposeWide then turns so that each dword of the pair is
// one vector of the sixteen rows; each row's scales, eight groups a
// chunk, go to row j of a 16×16 block of them (dsc, two chunks a block:
// the even one's in dwords 0..7, the odd one's in 8..15), which
// transposeWide turns into one vector of the sixteen rows' scales a
// group, 64 bytes each in the groups' order. A lone last group is stored as a pair whose second group is
// zero (VEX writes clear the upper halves).

// func WIDENAME(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)
TEXT WIDENAME(SB), NOSPLIT, $0-56
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
	UNPACK2
	VMOVDQU32 Z8, (AX)
	VMOVDQU32 Z9, 1024(AX)
	ADDQ $2048, AX
	SUBQ $2, R10
	JMP  wpair

wsingle:
	TESTQ R10, R10
	JZ    wnext
	UNPACK
	VMOVDQU32 Z8, (AX)
	VMOVDQU32 Z9, 1024(AX)
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
