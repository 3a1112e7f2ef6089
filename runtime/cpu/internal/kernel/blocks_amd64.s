//go:build !purego

#include "textflag.h"

// The AVX2 products of weights at their file's bits (dotBlocksGo): one
// loop (blocks_amd64.h), and per type what it fills in: how a group's
// code planes unpack to int16 codes (UNPACK: Y8 the even inputs, Y9 the
// odd ones, as the activations lie), how a chunk of eight groups' scales
// decode (SCALES) and which constants they keep in registers (CONSTS).

// lohi: VPERMPS indices that put a table pair (S_lo, S_hi) in lanes 0..3
// and 4..7.
DATA lohi<>+0(SB)/4, $0
DATA lohi<>+4(SB)/4, $0
DATA lohi<>+8(SB)/4, $0
DATA lohi<>+12(SB)/4, $0
DATA lohi<>+16(SB)/4, $1
DATA lohi<>+20(SB)/4, $1
DATA lohi<>+24(SB)/4, $1
DATA lohi<>+28(SB)/4, $1
GLOBL lohi<>(SB), RODATA|NOPTR, $32

// lanes: 0..7, to compare a chunk's group count with.
DATA lanes<>+0(SB)/4, $0
DATA lanes<>+4(SB)/4, $1
DATA lanes<>+8(SB)/4, $2
DATA lanes<>+12(SB)/4, $3
DATA lanes<>+16(SB)/4, $4
DATA lanes<>+20(SB)/4, $5
DATA lanes<>+24(SB)/4, $6
DATA lanes<>+28(SB)/4, $7
GLOBL lanes<>(SB), RODATA|NOPTR, $32

// bitsel: byte k selects bit k % 8; spread: byte k takes byte k / 8 (a
// plane of one bit an input, 16 of them, to 16 bytes).
DATA bitsel<>+0(SB)/8, $0x8040201008040201
DATA bitsel<>+8(SB)/8, $0x8040201008040201
GLOBL bitsel<>(SB), RODATA|NOPTR, $16
DATA spread<>+0(SB)/8, $0x0000000000000000
DATA spread<>+8(SB)/8, $0x0101010101010101
GLOBL spread<>(SB), RODATA|NOPTR, $16

// evenodd: the even bytes of 16, then the odd ones (scales of first and
// second halves).
DATA evenodd<>+0(SB)/8, $0x0e0c0a0806040200
DATA evenodd<>+8(SB)/8, $0x0f0d0b0907050301
GLOBL evenodd<>(SB), RODATA|NOPTR, $16

// Byte constants, 16 each.
#define BYTES16(name, v) \
	DATA name<>+0(SB)/8, $v \
	DATA name<>+8(SB)/8, $v \
	GLOBL name<>(SB), RODATA|NOPTR, $16

BYTES16(b0f, 0x0f0f0f0f0f0f0f0f)
BYTES16(b03, 0x0303030303030303)
BYTES16(b30, 0x3030303030303030)
BYTES16(b10, 0x1010101010101010)
BYTES16(b04, 0x0404040404040404)
BYTES16(b08, 0x0808080808080808)
BYTES16(b20, 0x2020202020202020)

// The codebooks: IQ4_NL's levels and E2M1's values times two.
DATA iq4nl<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA iq4nl<>+8(SB)/8, $0x7159453526190d01
GLOBL iq4nl<>(SB), RODATA|NOPTR, $16
DATA mxfp4<>+0(SB)/8, $0x0c08060403020100
DATA mxfp4<>+8(SB)/8, $0xf4f8fafcfdfeff00
GLOBL mxfp4<>(SB), RODATA|NOPTR, $16

// Dword constants for the scales.
DATA negzero<>+0(SB)/4, $0x80000000
GLOBL negzero<>(SB), RODATA|NOPTR, $4
DATA one32<>+0(SB)/4, $1
GLOBL one32<>(SB), RODATA|NOPTR, $4
DATA two32<>+0(SB)/4, $2
GLOBL two32<>(SB), RODATA|NOPTR, $4
DATA sub128<>+0(SB)/4, $0x00200000
GLOBL sub128<>(SB), RODATA|NOPTR, $4
DATA d15<>+0(SB)/4, $15
GLOBL d15<>(SB), RODATA|NOPTR, $4
DATA d3<>+0(SB)/4, $3
GLOBL d3<>(SB), RODATA|NOPTR, $4
DATA d32<>+0(SB)/4, $32
GLOBL d32<>(SB), RODATA|NOPTR, $4
DATA shift4<>+0(SB)/4, $0
DATA shift4<>+4(SB)/4, $4
DATA shift4<>+8(SB)/4, $8
DATA shift4<>+12(SB)/4, $12
DATA shift4<>+16(SB)/4, $16
DATA shift4<>+20(SB)/4, $20
DATA shift4<>+24(SB)/4, $24
DATA shift4<>+28(SB)/4, $28
GLOBL shift4<>(SB), RODATA|NOPTR, $32
DATA shift2<>+0(SB)/4, $0
DATA shift2<>+4(SB)/4, $2
DATA shift2<>+8(SB)/4, $4
DATA shift2<>+12(SB)/4, $6
DATA shift2<>+16(SB)/4, $8
DATA shift2<>+20(SB)/4, $10
DATA shift2<>+24(SB)/4, $12
DATA shift2<>+28(SB)/4, $14
GLOBL shift2<>(SB), RODATA|NOPTR, $32

// ---- Unpacking a group's codes (SI), into bytes X8 (even inputs) and X9
// (odd ones), then int16 Y8, Y9.

// NIBBLES: the low 4 bits, Int4's order (a byte: an even input, then the
// odd one after it). Needs X15 = 0x0f bytes.
#define NIBBLES \
	VMOVDQU (SI), X8 \
	VPSRLW $4, X8, X9 \
	VPAND X15, X8, X8 \
	VPAND X15, X9, X9

// HIGH1(OFF, BIT): the word at OFF(SI) of one bit an input (bits 0..15
// the even inputs, 16..31 the odd ones), each set bit ORed in as the byte
// BIT. Needs X12 = bitsel, X13 = spread.
#define HIGH1HALF(OFF, BIT, X) \
	VPBROADCASTW OFF(SI), X10 \
	VPSHUFB X13, X10, X10 \
	VPAND X12, X10, X10 \
	VPCMPEQB X12, X10, X10 \
	VPAND BIT, X10, X10 \
	VPOR X10, X, X
#define HIGH1(OFF, BIT) \
	HIGH1HALF(OFF, BIT, X8) \
	HIGH1HALF(OFF+2, BIT, X9)

// HIGH2(OFF): the two words at OFF(SI) of 2-bit fields (byte j: inputs
// 2j, 2j+1, 2j+16, 2j+17 at bits 0, 2, 4, 6), ORed in as bits 4..5.
// Needs X14 = 0x30 bytes.
#define HIGH2(OFF) \
	VPBROADCASTQ OFF(SI), X10 \
	VPSLLW $4, X10, X11 \
	VPBLENDD $0x0C, X10, X11, X11 \
	VPAND X14, X11, X11 \
	VPOR X11, X8, X8 \
	VPSLLW $2, X10, X11 \
	VPSRLW $2, X10, X10 \
	VPBLENDD $0x0C, X10, X11, X11 \
	VPAND X14, X11, X11 \
	VPOR X11, X9, X9

// LOW2: the two words at (SI) of 2-bit fields as HIGH2's, as the codes.
// Needs X14 = 0x03 bytes.
#define LOW2 \
	VPBROADCASTQ (SI), X10 \
	VPSRLW $4, X10, X11 \
	VPBLENDD $0x0C, X11, X10, X8 \
	VPAND X14, X8, X8 \
	VPSRLW $2, X10, X11 \
	VPSRLW $6, X10, X10 \
	VPBLENDD $0x0C, X10, X11, X9 \
	VPAND X14, X9, X9

#define OFFSET(C) \
	VPSUBB C, X8, X8 \
	VPSUBB C, X9, X9

#define CODEBOOK \
	VPSHUFB X8, X14, X8 \
	VPSHUFB X9, X14, X9

#define WIDEN \
	VPMOVSXBW X8, Y8 \
	VPMOVSXBW X9, Y9

// ---- A chunk's scales (DI), into Y3 (Y4), mins into Y5 (Y6).

// The f16 d of each group, two a word.
#define SCALES_D \
	VCVTPH2PS (DI), Y3 \
	ADDQ $16, DI

// Q5_1's words: d and m of each group.
#define SCALES_DM \
	VCVTPH2PS (DI), Y8 \
	VCVTPH2PS 16(DI), Y9 \
	VSHUFPS $0x88, Y9, Y8, Y3 \
	VPERMPD $0xD8, Y3, Y3 \
	VSHUFPS $0xDD, Y9, Y8, Y5 \
	VPERMPD $0xD8, Y5, Y5 \
	ADDQ $32, DI

// MXFP4's E8M0 bytes, as 2^(e−128): (e−1) << 23, or for e < 2 the
// subnormal 0x00200000 << e.
#define SCALES_E8M0 \
	VPMOVZXBD (DI), Y8 \
	VPBROADCASTD one32<>(SB), Y9 \
	VPSUBD Y9, Y8, Y3 \
	VPSLLD $23, Y3, Y3 \
	VPBROADCASTD sub128<>(SB), Y9 \
	VPSLLVD Y8, Y9, Y9 \
	VPBROADCASTD two32<>(SB), Y10 \
	VPCMPGTD Y8, Y10, Y10 \
	VBLENDVPS Y10, Y9, Y3, Y3 \
	ADDQ $8, DI

// DMIN: the super-block's f16 d to Y11, its dmin negated to Y10.
#define DMIN \
	VMOVD (DI), X10 \
	VCVTPH2PS X10, X10 \
	VBROADCASTSS X10, Y11 \
	VMOVSHDUP X10, X10 \
	VBROADCASTSS X10, Y10 \
	VBROADCASTSS negzero<>(SB), Y9 \
	VXORPS Y9, Y10, Y10

// Q4_K's and Q5_K's 6-bit scales and mins (scaleMinK4), as llama.cpp
// unpacks them: bytes 0..3 of each low 6 bits, 4..7 the nibbles of bytes
// 8..11 with the top bits of bytes 0..7.
#define SCALES_K4 \
	DMIN \
	MOVL 4(DI), AX \
	MOVL 8(DI), BX \
	MOVL 12(DI), R9 \
	MOVL AX, R10 \
	ANDL $0x3f3f3f3f, R10 \
	MOVL R9, R11 \
	ANDL $0x0f0f0f0f, R11 \
	SHRL $6, AX \
	ANDL $0x03030303, AX \
	SHLL $4, AX \
	ORL AX, R11 \
	SHLQ $32, R11 \
	ORQ R11, R10 \
	VMOVQ R10, X8 \
	MOVL BX, R10 \
	ANDL $0x3f3f3f3f, R10 \
	SHRL $4, R9 \
	ANDL $0x0f0f0f0f, R9 \
	SHRL $6, BX \
	ANDL $0x03030303, BX \
	SHLL $4, BX \
	ORL BX, R9 \
	SHLQ $32, R9 \
	ORQ R9, R10 \
	VMOVQ R10, X9 \
	VPMOVZXBD X8, Y8 \
	VCVTDQ2PS Y8, Y8 \
	VPMOVZXBD X9, Y9 \
	VCVTDQ2PS Y9, Y9 \
	VMULPS Y11, Y8, Y3 \
	VMULPS Y10, Y9, Y5 \
	ADDQ $16, DI

// HALVES8(X): the 16 factor bytes in X (one per 16 inputs, in order),
// split into the groups' first halves (Y3) and second ones (Y4), signed,
// times d (Y11).
#define HALVES8(X) \
	VPSHUFB evenodd<>(SB), X, X \
	VPMOVSXBD X, Y3 \
	VCVTDQ2PS Y3, Y3 \
	VMULPS Y11, Y3, Y3 \
	VPSRLDQ $8, X, X \
	VPMOVSXBD X, Y4 \
	VCVTDQ2PS Y4, Y4 \
	VMULPS Y11, Y4, Y4

// DHALF: a split super-block's f16 d (DI) to Y11.
#define DHALF \
	MOVWLZX (DI), AX \
	VMOVD AX, X10 \
	VCVTPH2PS X10, X10 \
	VBROADCASTSS X10, Y11 \
	ADDQ $2, DI

// Q6_K's int8 factors (R13).
#define SCALES_Q6K \
	DHALF \
	VMOVDQU (R13), X8 \
	HALVES8(X8) \
	ADDQ $16, R13

// Q3_K's 6-bit factors less 32 (q3Scales, R13): the low nibbles of bytes 0..7
// (factors 0..7), their high nibbles (8..15), and the 2-bit tops in bytes
// 8..11, as llama.cpp unpacks them.
#define SCALES_Q3K \
	MOVL (R13), AX \
	MOVL 4(R13), BX \
	MOVL 8(R13), R9 \
	MOVL AX, R10 \
	ANDL $0x0f0f0f0f, R10 \
	MOVL R9, R11 \
	ANDL $0x03030303, R11 \
	SHLL $4, R11 \
	ORL R11, R10 \
	VMOVD R10, X8 \
	MOVL BX, R10 \
	ANDL $0x0f0f0f0f, R10 \
	MOVL R9, R11 \
	SHRL $2, R11 \
	ANDL $0x03030303, R11 \
	SHLL $4, R11 \
	ORL R11, R10 \
	VPINSRD $1, R10, X8, X8 \
	MOVL AX, R10 \
	SHRL $4, R10 \
	ANDL $0x0f0f0f0f, R10 \
	MOVL R9, R11 \
	SHRL $4, R11 \
	ANDL $0x03030303, R11 \
	SHLL $4, R11 \
	ORL R11, R10 \
	VPINSRD $2, R10, X8, X8 \
	MOVL BX, R10 \
	SHRL $4, R10 \
	ANDL $0x0f0f0f0f, R10 \
	SHRL $6, R9 \
	ANDL $0x03030303, R9 \
	SHLL $4, R9 \
	ORL R9, R10 \
	VPINSRD $3, R10, X8, X8 \
	VPSUBB b20<>(SB), X8, X8 \
	DHALF \
	HALVES8(X8) \
	ADDQ $12, R13

// Q2_K's factor bytes, a scale (low nibble) and min (high) per 16 inputs.
#define SCALES_Q2K \
	DMIN \
	VMOVDQU 4(DI), X8 \
	VPSHUFB evenodd<>(SB), X8, X8 \
	VPSRLW $4, X8, X9 \
	VPAND X15, X9, X9 \
	VPAND X15, X8, X8 \
	VPMOVZXBD X9, Y5 \
	VCVTDQ2PS Y5, Y5 \
	VMULPS Y10, Y5, Y5 \
	VPSRLDQ $8, X9, X9 \
	VPMOVZXBD X9, Y6 \
	VCVTDQ2PS Y6, Y6 \
	VMULPS Y10, Y6, Y6 \
	VPMOVZXBD X8, Y3 \
	VCVTDQ2PS Y3, Y3 \
	VMULPS Y11, Y3, Y3 \
	VPSRLDQ $8, X8, X8 \
	VPMOVZXBD X8, Y4 \
	VCVTDQ2PS Y4, Y4 \
	VMULPS Y11, Y4, Y4 \
	ADDQ $20, DI

// IQ4_XS's 6-bit factors less 32: the nibbles of scales_l (word 1) and the
// 2-bit fields of scales_h (word 0's high half).
#define SCALES_IQ4XS \
	VPBROADCASTD 4(DI), Y8 \
	VPSRLVD shift4<>(SB), Y8, Y8 \
	VPBROADCASTD d15<>(SB), Y9 \
	VPAND Y9, Y8, Y8 \
	MOVWLZX 2(DI), AX \
	VMOVD AX, X9 \
	VPBROADCASTD X9, Y9 \
	VPSRLVD shift2<>(SB), Y9, Y9 \
	VPBROADCASTD d3<>(SB), Y10 \
	VPAND Y10, Y9, Y9 \
	VPSLLD $4, Y9, Y9 \
	VPOR Y9, Y8, Y8 \
	VPBROADCASTD d32<>(SB), Y9 \
	VPSUBD Y9, Y8, Y8 \
	VCVTDQ2PS Y8, Y8 \
	VMOVD (DI), X10 \
	VCVTPH2PS X10, X10 \
	VBROADCASTSS X10, Y11 \
	VMULPS Y11, Y8, Y3 \
	ADDQ $8, DI

// ---- The types.

#define CONSTS_NIB \
	VMOVDQU b0f<>(SB), X15
#define CONSTS_H1 \
	VMOVDQU b0f<>(SB), X15 \
	VMOVDQU bitsel<>(SB), X12 \
	VMOVDQU spread<>(SB), X13

#define NAME ·dotBlocksQ4_0AVX2
#define CONSTS CONSTS_NIB
#define SCALES SCALES_D
#define UNPACK NIBBLES; OFFSET(b08<>(SB)); WIDEN; ADDQ $16, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK

#define NAME ·dotBlocksQ5_0AVX2
#define CONSTS CONSTS_H1
#define SCALES SCALES_D
#define UNPACK NIBBLES; HIGH1(16, b10<>(SB)); OFFSET(b10<>(SB)); WIDEN; ADDQ $20, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK

#define MIN1
#define NAME ·dotBlocksQ5_1AVX2
#define CONSTS CONSTS_H1
#define SCALES SCALES_DM
#define UNPACK NIBBLES; HIGH1(16, b10<>(SB)); WIDEN; ADDQ $20, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK
#undef MIN1

#define NAME ·dotBlocksQ8_0AVX2
#define CONSTS
#define SCALES SCALES_D
#define UNPACK VPMOVSXBW (SI), Y8; VPMOVSXBW 16(SI), Y9; ADDQ $32, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK

#define NAME ·dotBlocksIQ4_NLAVX2
#define CONSTS CONSTS_NIB; VMOVDQU iq4nl<>(SB), X14
#define SCALES SCALES_D
#define UNPACK NIBBLES; CODEBOOK; WIDEN; ADDQ $16, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK

#define NAME ·dotBlocksMXFP4AVX2
#define CONSTS CONSTS_NIB; VMOVDQU mxfp4<>(SB), X14
#define SCALES SCALES_E8M0
#define UNPACK NIBBLES; CODEBOOK; WIDEN; ADDQ $16, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK

#define NAME ·dotBlocksIQ4_XSAVX2
#define CONSTS CONSTS_NIB; VMOVDQU iq4nl<>(SB), X14
#define SCALES SCALES_IQ4XS
#define UNPACK NIBBLES; CODEBOOK; WIDEN; ADDQ $16, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK

#define MIN1
#define NAME ·dotBlocksQ4_KAVX2
#define CONSTS CONSTS_NIB
#define SCALES SCALES_K4
#define UNPACK NIBBLES; WIDEN; ADDQ $16, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK

#define NAME ·dotBlocksQ5_KAVX2
#define CONSTS CONSTS_H1
#define SCALES SCALES_K4
#define UNPACK NIBBLES; HIGH1(16, b10<>(SB)); WIDEN; ADDQ $20, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK
#undef MIN1

#define HALVES
#define SPLIT
#define NAME ·dotBlocksQ6_KAVX2
#define CONSTS CONSTS_NIB; VMOVDQU b30<>(SB), X14
#define SCALES SCALES_Q6K
#define UNPACK NIBBLES; HIGH2(16); OFFSET(b20<>(SB)); WIDEN; ADDQ $24, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK

#define NAME ·dotBlocksQ3_KAVX2
#define CONSTS VMOVDQU b03<>(SB), X14; VMOVDQU bitsel<>(SB), X12; VMOVDQU spread<>(SB), X13
#define SCALES SCALES_Q3K
#define UNPACK LOW2; HIGH1(8, b04<>(SB)); OFFSET(b04<>(SB)); WIDEN; ADDQ $12, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK

#undef SPLIT

#define MIN2
#define NAME ·dotBlocksQ2_KAVX2
#define CONSTS CONSTS_NIB; VMOVDQU b03<>(SB), X14
#define SCALES SCALES_Q2K
#define UNPACK LOW2; WIDEN; ADDQ $8, SI
#include "blocks_amd64.h"
#undef NAME
#undef CONSTS
#undef SCALES
#undef UNPACK
#undef MIN2
#undef HALVES
