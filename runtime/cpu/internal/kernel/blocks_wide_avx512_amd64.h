// The expansion of sixteen rows of weights for the wide kernel
// (blocks_wide_amd64.s; blocks_types_amd64.h includes it once for each
// type with an eight-row tile kernel, as WIDENAME with the type's CONSTS,
// SCALES, UNPACK and UNPACK2, and WIDEMAP for the nibble types). Every
// form leaves a pair of groups as 2 KiB (dst): for each lane k of each
// group h, the sixteen rows' int16 pairs of its even inputs (4k, 4k+2) at
// (8h+k)·64 and of its odd ones at 1024 + (8h+k)·64; and each group's
// sixteen scales as one vector (dsc, 64 bytes a group): each row's scales,
// eight groups a chunk, go to row j of a 16×16 block of them (two chunks
// a block: the even one's in dwords 0..7, the odd one's in 8..15), which
// transposeWide turns.

#ifdef WIDEMAP
// The nibble types (Q4_0, IQ4_NL, MXFP4: a group's 16 bytes, input 2m in
// byte m's low nibble, 2m+1 in its high one) expand a group of the
// sixteen rows at once, in their final layout: four rows' groups a
// register, then word permutes (widew1, widew2) to a register a pair of
// words k, k+1 of every row, whose nibbles, mapped to codes (WIDEMAP:
// less 8, or a codebook), widen to the int16 pairs of the even inputs
// (lane k of the group: inputs 4k, 4k+2, the low nibbles of bytes 2k and
// 2k+1) and of the odd ones (their high nibbles). No transposeWide of the
// codes: about 80 vector instructions a group of the sixteen rows, where
// unpacking a row at a time and transposing take about 130 (counted).
#define NIBOUT(ZO, K) \
	VPANDD Z15, ZO, Z12 \
	VPSRLW $4, ZO, Z13 \
	VPANDD Z15, Z13, Z13 \
	WIDEMAP(Z12) \
	WIDEMAP(Z13) \
	VPMOVSXBW Y12, Z20 \
	VMOVDQU32 Z20, K*64(AX) \
	VEXTRACTI64X4 $1, Z12, Y21 \
	VPMOVSXBW Y21, Z21 \
	VMOVDQU32 Z21, (K+1)*64(AX) \
	VPMOVSXBW Y13, Z22 \
	VMOVDQU32 Z22, 1024+K*64(AX) \
	VEXTRACTI64X4 $1, Z13, Y23 \
	VPMOVSXBW Y23, Z23 \
	VMOVDQU32 Z23, 1024+(K+1)*64(AX)

// NIBROWS(Z): four rows' groups at SI, SI+R9, SI+2·R9, SI+R10, one a
// 128-bit lane of Z; SI goes on four rows.
#define NIBROWS(Z, X) \
	VMOVDQU (SI), X \
	VINSERTI32X4 $1, (SI)(R9*1), Z, Z \
	VINSERTI32X4 $2, (SI)(R9*2), Z, Z \
	VINSERTI32X4 $3, (SI)(R10*1), Z, Z \
	ADDQ R12, SI

// func WIDENAME(codes, scales *uint32, cstride, sstride, groups int, dst *int32, dsc *float32)
TEXT WIDENAME(SB), NOSPLIT, $0-56
	MOVQ scales+8(FP), R9
	MOVQ dsc+48(FP), R14
	XORQ BX, BX

nsrow:
	MOVQ R9, DI
	MOVQ BX, DX
	SHLQ $6, DX
	ADDQ R14, DX
	MOVQ $32, R11
	MOVQ groups+32(FP), CX

nschunk:
	SCALES
	VMOVUPS Y3, (DX)
	ADDQ R11, DX
	NEGQ R11
	ADDQ $1024, R11
	SUBQ $8, CX
	JG   nschunk
	ADDQ sstride+24(FP), R9
	INCQ BX
	CMPQ BX, $16
	JLT  nsrow

	VPBROADCASTD b0f<>(SB), Z15
	WIDECONST
	VMOVDQU64 widew1<>(SB), Z16
	VMOVDQU64 widew1h<>(SB), Z17
	VMOVDQU64 widew2<>(SB), Z18
	VMOVDQU64 widew2h<>(SB), Z19
	MOVQ codes+0(FP), R8
	MOVQ cstride+16(FP), R9
	LEAQ (R9)(R9*2), R10
	LEAQ (R9*4), R12
	MOVQ dst+40(FP), AX
	MOVQ groups+32(FP), CX
	XORQ BX, BX

ngroup:
	MOVQ R8, SI
	NIBROWS(Z0, X0)
	NIBROWS(Z1, X1)
	NIBROWS(Z2, X2)
	NIBROWS(Z3, X3)
	VMOVDQA64 Z16, Z4
	VPERMI2W Z1, Z0, Z4
	VMOVDQA64 Z17, Z5
	VPERMI2W Z1, Z0, Z5
	VMOVDQA64 Z16, Z6
	VPERMI2W Z3, Z2, Z6
	VMOVDQA64 Z17, Z7
	VPERMI2W Z3, Z2, Z7
	VMOVDQA64 Z18, Z8
	VPERMI2W Z6, Z4, Z8
	VMOVDQA64 Z19, Z9
	VPERMI2W Z6, Z4, Z9
	VMOVDQA64 Z18, Z10
	VPERMI2W Z7, Z5, Z10
	VMOVDQA64 Z19, Z11
	VPERMI2W Z7, Z5, Z11
	NIBOUT(Z8, 0)
	NIBOUT(Z9, 2)
	NIBOUT(Z10, 4)
	NIBOUT(Z11, 6)
	ADDQ $16, R8
	// The odd group of a pair goes 512 bytes on (lanes 8..15 of its
	// blocks), the next pair 2 KiB on from the even one.
	ADDQ $512, AX
	XORQ $1, BX
	JNZ  nnext
	ADDQ $1024, AX

nnext:
	DECQ CX
	JNZ  ngroup
	VZEROUPPER
	RET

#undef NIBOUT
#undef NIBROWS
#else
// The other types (Q5_0, Q8_0) go a row at a time (blocks_wide_rows_amd64.h):
// a pair of groups as the one-row loop unpacks them (the even inputs'
// int16 pairs in Z8, the odd ones' in Z9, dword 8h+k holding lane k of
// group h's), a lone last group as a pair whose second group is zero (VEX
// writes clear the upper halves).
#define WROWNAME WIDENAME
#define WROWPAIR UNPACK2; VMOVDQU32 Z8, (AX); VMOVDQU32 Z9, 1024(AX)
#define WROWSINGLE UNPACK; VMOVDQU32 Z8, (AX); VMOVDQU32 Z9, 1024(AX)
#include "blocks_wide_rows_amd64.h"
#undef WROWNAME
#undef WROWPAIR
#undef WROWSINGLE
#endif
