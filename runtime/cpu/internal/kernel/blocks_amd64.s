//go:build !purego

#include "textflag.h"

// The AVX2 and AVX-512 products of weights at their file's bits
// (dotBlocksGo): one loop for each (blocks_avx2_amd64.h,
// blocks_avx512_amd64.h), and per type what it fills in: how a group's
// code planes unpack to int16 codes (UNPACK: Y8 the even inputs, Y9 the
// odd ones, as the activations lie; UNPACK2 a pair of groups, Z8 and Z9),
// how a chunk of eight groups' scales decode (SCALES) and which constants
// they keep in registers (CONSTS).

// FOLD8X leaves in lane 0 of X0 the one-row loops' fold8 of a row's
// lanes, groups 0, 2, 4, 6 in X0 and 1, 3, 5, 7 in X9:
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)). X10 is scratch.
#define FOLD8X \
	VMOVHLPS X0, X0, X10 \
	VADDPS X10, X0, X0 \
	VMOVSHDUP X0, X10 \
	VADDSS X10, X0, X0 \
	VMOVHLPS X9, X9, X10 \
	VADDPS X10, X9, X9 \
	VMOVSHDUP X9, X10 \
	VADDSS X10, X9, X9 \
	VADDSS X9, X0, X0

// pair512 spreads the scales of the first pair of a chunk over its lanes
// from a register of its scales (lanes 0..7). Adding 2 to every lane
// names the next pair's.
#define DW(name, i, v) DATA name<>+(4*i)(SB)/4, $v
DW(pair512, 0, 0); DW(pair512, 1, 0); DW(pair512, 2, 0); DW(pair512, 3, 0)
DW(pair512, 4, 0); DW(pair512, 5, 0); DW(pair512, 6, 0); DW(pair512, 7, 0)
DW(pair512, 8, 1); DW(pair512, 9, 1); DW(pair512, 10, 1); DW(pair512, 11, 1)
DW(pair512, 12, 1); DW(pair512, 13, 1); DW(pair512, 14, 1); DW(pair512, 15, 1)
GLOBL pair512<>(SB), RODATA|NOPTR, $64

// The group-sum kernels gather a chunk's half sums in one register, a
// 128-bit quarter each: the even groups' first halves (groups 0, 2, 4, 6
// of the chunk), their second halves, the odd groups' first, their
// second. gsumg512 is each lane's group.
DW(gsumg512, 0, 0); DW(gsumg512, 1, 2); DW(gsumg512, 2, 4); DW(gsumg512, 3, 6)
DW(gsumg512, 4, 0); DW(gsumg512, 5, 2); DW(gsumg512, 6, 4); DW(gsumg512, 7, 6)
DW(gsumg512, 8, 1); DW(gsumg512, 9, 3); DW(gsumg512, 10, 5); DW(gsumg512, 11, 7)
DW(gsumg512, 12, 1); DW(gsumg512, 13, 3); DW(gsumg512, 14, 5); DW(gsumg512, 15, 7)
GLOBL gsumg512<>(SB), RODATA|NOPTR, $64

// gsumg8: each lane's group in the AVX2 loop's terms (each pair's odd
// group, then its even one).
DATA gsumg8<>+0(SB)/8, $0x0000000000000001
DATA gsumg8<>+8(SB)/8, $0x0000000200000003
DATA gsumg8<>+16(SB)/8, $0x0000000400000005
DATA gsumg8<>+24(SB)/8, $0x0000000600000007
GLOBL gsumg8<>(SB), RODATA|NOPTR, $32

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

// The word permutes of the nibble types' wide expansion
// (blocks_wide_avx512_amd64.h): sixteen rows' 16-byte groups, four rows a
// register, become a register a pair of words k, k+1 (bytes 2k..2k+3) of
// all sixteen rows: widew1 and widew1h take words 0..3 and 4..7 of rows
// 0..7 (or 8..15) from two registers, k·8 + row; widew2 and widew2h take
// words k, k+1 (and k+2, k+3) of those for rows 0..7 then 8..15.
DATA widew1<>+0(SB)/8, $0x0018001000080000
DATA widew1<>+8(SB)/8, $0x0038003000280020
DATA widew1<>+16(SB)/8, $0x0019001100090001
DATA widew1<>+24(SB)/8, $0x0039003100290021
DATA widew1<>+32(SB)/8, $0x001a0012000a0002
DATA widew1<>+40(SB)/8, $0x003a0032002a0022
DATA widew1<>+48(SB)/8, $0x001b0013000b0003
DATA widew1<>+56(SB)/8, $0x003b0033002b0023
GLOBL widew1<>(SB), RODATA|NOPTR, $64
DATA widew1h<>+0(SB)/8, $0x001c0014000c0004
DATA widew1h<>+8(SB)/8, $0x003c0034002c0024
DATA widew1h<>+16(SB)/8, $0x001d0015000d0005
DATA widew1h<>+24(SB)/8, $0x003d0035002d0025
DATA widew1h<>+32(SB)/8, $0x001e0016000e0006
DATA widew1h<>+40(SB)/8, $0x003e0036002e0026
DATA widew1h<>+48(SB)/8, $0x001f0017000f0007
DATA widew1h<>+56(SB)/8, $0x003f0037002f0027
GLOBL widew1h<>(SB), RODATA|NOPTR, $64
DATA widew2<>+0(SB)/8, $0x0003000200010000
DATA widew2<>+8(SB)/8, $0x0007000600050004
DATA widew2<>+16(SB)/8, $0x0023002200210020
DATA widew2<>+24(SB)/8, $0x0027002600250024
DATA widew2<>+32(SB)/8, $0x000b000a00090008
DATA widew2<>+40(SB)/8, $0x000f000e000d000c
DATA widew2<>+48(SB)/8, $0x002b002a00290028
DATA widew2<>+56(SB)/8, $0x002f002e002d002c
GLOBL widew2<>(SB), RODATA|NOPTR, $64
DATA widew2h<>+0(SB)/8, $0x0013001200110010
DATA widew2h<>+8(SB)/8, $0x0017001600150014
DATA widew2h<>+16(SB)/8, $0x0033003200310030
DATA widew2h<>+24(SB)/8, $0x0037003600350034
DATA widew2h<>+32(SB)/8, $0x001b001a00190018
DATA widew2h<>+40(SB)/8, $0x001f001e001d001c
DATA widew2h<>+48(SB)/8, $0x003b003a00390038
DATA widew2h<>+56(SB)/8, $0x003f003e003d003c
GLOBL widew2h<>(SB), RODATA|NOPTR, $64

// bitsel: byte k selects bit k % 8; spread: byte k takes byte k / 8 (a
// plane of one bit an input, 16 of them, to 16 bytes).
DATA bitsel<>+0(SB)/8, $0x8040201008040201
DATA bitsel<>+8(SB)/8, $0x8040201008040201
GLOBL bitsel<>(SB), RODATA|NOPTR, $16
DATA spread<>+0(SB)/8, $0x0000000000000000
DATA spread<>+8(SB)/8, $0x0101010101010101
GLOBL spread<>(SB), RODATA|NOPTR, $16

// k4lo, k4hi, k4mask: SCALES_K4's shuffles (0x80: a zero byte) and the
// mask of the low bits each lane keeps.
DATA k4lo<>+0(SB)/8, $0x0b0a090803020100
DATA k4lo<>+8(SB)/8, $0x0b0a090807060504
GLOBL k4lo<>(SB), RODATA|NOPTR, $16
DATA k4hi<>+0(SB)/8, $0x0302010080808080
DATA k4hi<>+8(SB)/8, $0x0706050480808080
GLOBL k4hi<>(SB), RODATA|NOPTR, $16
DATA k4mask<>+0(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA k4mask<>+8(SB)/8, $0x000000003f3f3f3f
GLOBL k4mask<>(SB), RODATA|NOPTR, $16

// Constants of 32 bytes, one 8-byte pattern repeated (for xmm and ymm).
#define BYTES32(name, v) \
	DATA name<>+0(SB)/8, $v \
	DATA name<>+8(SB)/8, $v \
	DATA name<>+16(SB)/8, $v \
	DATA name<>+24(SB)/8, $v \
	GLOBL name<>(SB), RODATA|NOPTR, $32

BYTES32(b0f, 0x0f0f0f0f0f0f0f0f)
BYTES32(b03, 0x0303030303030303)
BYTES32(b30, 0x3030303030303030)
BYTES32(b10, 0x1010101010101010)
BYTES32(b08, 0x0808080808080808)
BYTES32(b20, 0x2020202020202020)

// The codebooks: IQ4_NL's levels and E2M1's values times two.
DATA iq4nl<>+0(SB)/8, $0xf6eaddcfbfad9881
DATA iq4nl<>+8(SB)/8, $0x7159453526190d01
GLOBL iq4nl<>(SB), RODATA|NOPTR, $16
DATA mxfp4<>+0(SB)/8, $0x0c08060403020100
DATA mxfp4<>+8(SB)/8, $0xf4f8fafcfdfeff00
GLOBL mxfp4<>(SB), RODATA|NOPTR, $16

// Dword constants for the scales.
DATA one32<>+0(SB)/4, $1
GLOBL one32<>(SB), RODATA|NOPTR, $4
DATA two32<>+0(SB)/4, $2
GLOBL two32<>(SB), RODATA|NOPTR, $4
DATA sub128<>+0(SB)/4, $0x00200000
GLOBL sub128<>(SB), RODATA|NOPTR, $4

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

// LOW2(OFF): the two words at OFF(SI) of 2-bit fields (byte j: inputs 2j,
// 2j+1, 2j+16, 2j+17 at bits 0, 2, 4, 6), as the codes. Needs X14 = 0x03
// bytes.
#define LOW2(OFF) \
	VPBROADCASTQ OFF(SI), X10 \
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

// ---- Unpacking a pair of groups (their codes CB bytes apart), into bytes
// Y8 (even inputs: the first group's 16, then the second's) and Y9, then
// int16 Z8, Z9. The constants are the single group's in ymm.

#define NIBBLES2(CB) \
	VMOVDQU (SI), X8 \
	VINSERTI128 $1, CB(SI), Y8, Y8 \
	VPSRLW $4, Y8, Y9 \
	VPAND Y15, Y8, Y8 \
	VPAND Y15, Y9, Y9

// HIGH1x2: a pair's planes of one bit an input as mask registers, each
// half word (16 inputs) of the two groups one 32-bit mask.
#define HIGH1HALF2(OFF, CB, BIT, Y) \
	KMOVW OFF(SI), K1 \
	KMOVW OFF+CB(SI), K2 \
	KUNPCKWD K1, K2, K3 \
	VPMOVM2B K3, Y10 \
	VPAND BIT, Y10, Y10 \
	VPOR Y10, Y, Y
#define HIGH1x2(OFF, CB, BIT) \
	HIGH1HALF2(OFF, CB, BIT, Y8) \
	HIGH1HALF2(OFF+2, CB, BIT, Y9)

// BCAST2(OFF, CB): a pair's two 2-bit-field words to Y10, each group's
// 8 bytes twice in its 128-bit lane.
#define BCAST2(OFF, CB) \
	VPBROADCASTQ OFF(SI), X10 \
	VPBROADCASTQ OFF+CB(SI), X11 \
	VINSERTI128 $1, X11, Y10, Y10

#define OFFSET2(C) \
	VPSUBB C, Y8, Y8 \
	VPSUBB C, Y9, Y9

#define CODEBOOK2 \
	VPSHUFB Y8, Y14, Y8 \
	VPSHUFB Y9, Y14, Y9

#define WIDEN2 \
	VPMOVSXBW Y8, Z8 \
	VPMOVSXBW Y9, Z9

// ---- A chunk's scales (DI), into Y3, mins into Y5.

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

// ---- The types.

#define CONSTS_NIB \
	VMOVDQU b0f<>(SB), Y15
#define CONSTS_H1 \
	VMOVDQU b0f<>(SB), Y15 \
	VMOVDQU bitsel<>(SB), X12 \
	VMOVDQU spread<>(SB), X13

#define NAME ·dotBlocksQ4_0AVX2
#define NAME512 ·dotBlocksQ4_0AVX512
#define NAME512X4 ·dotBlocksQ4_0TileAVX512
#define NAME512X4V ·dotBlocksQ4_0TileVNNI
#define NAME512X8 ·dotBlocksQ4_0Tile8AVX512
#define NAME512X8V ·dotBlocksQ4_0Tile8VNNI
#define WIDENAME ·expandQ4_0Wide
#define WIDE2NAME ·expandQ4_0WideAVX2
#define WIDEMAP(Z) VPSUBB Z14, Z, Z
#define WIDECONST VPBROADCASTD b08<>(SB), Z14
#define CONSTS CONSTS_NIB
#define SCALES SCALES_D
#define UNPACK NIBBLES; OFFSET(b08<>(SB)); WIDEN; ADDQ $16, SI
#define UNPACK2 VMOVDQU (SI), Y8; VPSRLW $4, Y8, Y9; VPAND Y15, Y8, Y8; VPAND Y15, Y9, Y9; OFFSET2(b08<>(SB)); WIDEN2; ADDQ $32, SI
#include "blocks_types_amd64.h"

#define NAME ·dotBlocksQ5_0AVX2
#define NAME512 ·dotBlocksQ5_0AVX512
#define NAME512X4 ·dotBlocksQ5_0TileAVX512
#define NAME512X4V ·dotBlocksQ5_0TileVNNI
#define NAME512X8 ·dotBlocksQ5_0Tile8AVX512
#define NAME512X8V ·dotBlocksQ5_0Tile8VNNI
#define WIDENAME ·expandQ5_0Wide
#define WIDE2NAME ·expandQ5_0WideAVX2
#define CONSTS CONSTS_H1
#define SCALES SCALES_D
#define UNPACK NIBBLES; HIGH1(16, b10<>(SB)); OFFSET(b10<>(SB)); WIDEN; ADDQ $20, SI
#define UNPACK2 NIBBLES2(20); HIGH1x2(16, 20, b10<>(SB)); OFFSET2(b10<>(SB)); WIDEN2; ADDQ $40, SI
#include "blocks_types_amd64.h"

#define MIN1
#define NAME ·dotBlocksQ5_1AVX2
#define NAME512 ·dotBlocksQ5_1AVX512
#define NAME512X4 ·dotBlocksQ5_1TileAVX512
#define NAME512X4V ·dotBlocksQ5_1TileVNNI
#define CONSTS CONSTS_H1
#define SCALES SCALES_DM
#define UNPACK NIBBLES; HIGH1(16, b10<>(SB)); WIDEN; ADDQ $20, SI
#define UNPACK2 NIBBLES2(20); HIGH1x2(16, 20, b10<>(SB)); WIDEN2; ADDQ $40, SI
#include "blocks_types_amd64.h"
#undef MIN1

#define NAME ·dotBlocksQ8_0AVX2
#define NAME512 ·dotBlocksQ8_0AVX512
#define NAME512X4 ·dotBlocksQ8_0TileAVX512
#define NAME512X4V ·dotBlocksQ8_0TileVNNI
#define NAME512X8 ·dotBlocksQ8_0Tile8AVX512
#define NAME512X8V ·dotBlocksQ8_0Tile8VNNI
#define WIDENAME ·expandQ8_0Wide
#define WIDE2NAME ·expandQ8_0WideAVX2
#define CONSTS
#define SCALES SCALES_D
#define UNPACK VPMOVSXBW (SI), Y8; VPMOVSXBW 16(SI), Y9; ADDQ $32, SI
#define UNPACK2 VMOVDQU (SI), X8; VINSERTI128 $1, 32(SI), Y8, Y8; VMOVDQU 16(SI), X9; VINSERTI128 $1, 48(SI), Y9, Y9; WIDEN2; ADDQ $64, SI
#include "blocks_types_amd64.h"

#define NAME ·dotBlocksIQ4_NLAVX2
#define NAME512 ·dotBlocksIQ4_NLAVX512
#define NAME512X4 ·dotBlocksIQ4_NLTileAVX512
#define NAME512X4V ·dotBlocksIQ4_NLTileVNNI
#define NAME512X8 ·dotBlocksIQ4_NLTile8AVX512
#define NAME512X8V ·dotBlocksIQ4_NLTile8VNNI
#define WIDENAME ·expandIQ4_NLWide
#define WIDE2NAME ·expandIQ4_NLWideAVX2
#define WIDEMAP(Z) VPSHUFB Z, Z14, Z
#define WIDECONST VBROADCASTI32X4 iq4nl<>(SB), Z14
#define CONSTS CONSTS_NIB; VBROADCASTI128 iq4nl<>(SB), Y14
#define SCALES SCALES_D
#define UNPACK NIBBLES; CODEBOOK; WIDEN; ADDQ $16, SI
#define UNPACK2 VMOVDQU (SI), Y8; VPSRLW $4, Y8, Y9; VPAND Y15, Y8, Y8; VPAND Y15, Y9, Y9; CODEBOOK2; WIDEN2; ADDQ $32, SI
#include "blocks_types_amd64.h"

#define NAME ·dotBlocksMXFP4AVX2
#define NAME512 ·dotBlocksMXFP4AVX512
#define NAME512X4 ·dotBlocksMXFP4TileAVX512
#define NAME512X4V ·dotBlocksMXFP4TileVNNI
#define NAME512X8 ·dotBlocksMXFP4Tile8AVX512
#define NAME512X8V ·dotBlocksMXFP4Tile8VNNI
#define WIDENAME ·expandMXFP4Wide
#define WIDE2NAME ·expandMXFP4WideAVX2
#define WIDEMAP(Z) VPSHUFB Z, Z14, Z
#define WIDECONST VBROADCASTI32X4 mxfp4<>(SB), Z14
#define CONSTS CONSTS_NIB; VBROADCASTI128 mxfp4<>(SB), Y14
#define SCALES SCALES_E8M0
#define UNPACK NIBBLES; CODEBOOK; WIDEN; ADDQ $16, SI
#define UNPACK2 VMOVDQU (SI), Y8; VPSRLW $4, Y8, Y9; VPAND Y15, Y8, Y8; VPAND Y15, Y9, Y9; CODEBOOK2; WIDEN2; ADDQ $32, SI
#include "blocks_types_amd64.h"

// ---- The K quants' integer products (dotBlocksKGo): blocks_k_avx512_amd64.h.

// ktr: the half factors in the lanes the reductions leave the halves in
// (kLane): lane L takes half 4·(L%4) + L/4.
DATA ktr<>+0(SB)/8, $0x0d0905010c080400
DATA ktr<>+8(SB)/8, $0x0f0b07030e0a0602
GLOBL ktr<>(SB), RODATA|NOPTR, $16
DATA w0f<>+0(SB)/2, $0x000f
GLOBL w0f<>(SB), RODATA|NOPTR, $2
DATA w10<>+0(SB)/2, $0x0010
GLOBL w10<>(SB), RODATA|NOPTR, $2
DATA w04<>+0(SB)/2, $0x0004
GLOBL w04<>(SB), RODATA|NOPTR, $2
DATA w30<>+0(SB)/2, $0x0030
GLOBL w30<>(SB), RODATA|NOPTR, $2

// kwfac: the lanes of Z6 (a super-block's half factors in kLane's order)
// that dwords 0..15 of a pair's unpacked codes take in its first pair
// (lane k of group h holds half 2h + k/4); pair p's are these plus p.
// kwone: 1. kwdup: a dword's low word in both of its words.
DATA kwfac<>+0(SB)/8, $0x0000000000000000
DATA kwfac<>+8(SB)/8, $0x0000000000000000
DATA kwfac<>+16(SB)/8, $0x0000000400000004
DATA kwfac<>+24(SB)/8, $0x0000000400000004
DATA kwfac<>+32(SB)/8, $0x0000000800000008
DATA kwfac<>+40(SB)/8, $0x0000000800000008
DATA kwfac<>+48(SB)/8, $0x0000000c0000000c
DATA kwfac<>+56(SB)/8, $0x0000000c0000000c
GLOBL kwfac<>(SB), RODATA|NOPTR, $64
DATA kwone<>+0(SB)/4, $1
GLOBL kwone<>(SB), RODATA|NOPTR, $4
DATA kwdup<>+0(SB)/8, $0x0504050401000100
DATA kwdup<>+8(SB)/8, $0x0d0c0d0c09080908
GLOBL kwdup<>(SB), RODATA|NOPTR, $16

// KDECODE_K4: a Q4_K or Q5_K super-block's 12 factor bytes at 4(DI)
// (SCALES_K4's unpacking) to X6: bytes 0..7 the scales, 8..15 the mins.
#define KDECODE_K4 \
	VMOVDQU 4(DI), X8 \
	VPSHUFB k4lo<>(SB), X8, X9 \
	VPSHUFB k4hi<>(SB), X8, X8 \
	VPAND k4mask<>(SB), X9, X6 \
	VPSRLW $4, X9, X9 \
	VPAND b0f<>(SB), X9, X9 \
	VPBLENDD $0x08, X9, X6, X6 \
	VPSRLW $2, X8, X8 \
	VPAND b30<>(SB), X8, X8 \
	VPOR X8, X6, X6

// KDMIN_K4: dmin·m of the super-block's groups in Y5 (f16 d and dmin in
// X10, the mins in X6's high 8 bytes).
#define KDMIN_K4 \
	VMOVSHDUP X10, X11 \
	VBROADCASTSS X11, Y11 \
	VPSRLDQ $8, X6, X9 \
	VPMOVZXBD X9, Y9 \
	VCVTDQ2PS Y9, Y9 \
	VMULPS Y11, Y9, Y5

// KMINS_K4: the super-block's min terms taken from Y2 (macc):
// f32(f32(dmin·m)·sum), the twin's f32(−(dmin·m)·sum) added, bit for bit;
// the group sums at (R12).
#define KMINS_K4 \
	KDMIN_K4 \
	VMULPS (R12), Y5, Y5 \
	VSUBPS Y5, Y2, Y2

// KSCALES_K4: Q4_K's and Q5_K's super-block: the scales, each twice, as
// the half factors in Z6 (in kLane's order), f32(d·D) in X12, the min
// terms taken from Y2.
#define KSCALES_K4 \
	VCVTPH2PS (DI), X10 \
	VMULSS (R11), X10, X12 \
	KDECODE_K4 \
	KMINS_K4 \
	VPUNPCKLBW X6, X6, X6 \
	VPSHUFB ktr<>(SB), X6, X6 \
	VPMOVZXBD X6, Z6 \
	ADDQ $16, DI

// KTSCALES_K4: KSCALES_K4 for the four-row loop: d and dmin in X10,
// dmin·m in Y5 (each row's sums then meet it).
#define KTSCALES_K4 \
	VCVTPH2PS (DI), X10 \
	KDECODE_K4 \
	KDMIN_K4 \
	VPUNPCKLBW X6, X6, X6 \
	VPSHUFB ktr<>(SB), X6, X6 \
	VPMOVZXBD X6, Z6 \
	ADDQ $16, DI

// The split super-blocks (Q6_K, Q3_K: a row's f16 d's at DI, then their
// factors at R13). KD_SPLIT(X): a super-block's d to X's first lane.
#define KD_SPLIT(X) \
	MOVWLZX (DI), AX \
	VMOVD AX, X \
	VCVTPH2PS X, X \
	ADDQ $2, DI

// KFACTORS_Q6K: Q6_K's 16 int8 factors as the signed bytes of X6 in
// kLane's order.
#define KFACTORS_Q6K \
	VMOVDQU (R13), X6 \
	VPSHUFB ktr<>(SB), X6, X6 \
	ADDQ $16, R13

// KFACTORS_Q3K: Q3_K's 16 factors (dtype.Q3KScales: 6 bits less 32) from
// its 12 bytes, as KFACTORS_Q6K leaves them. Factor j's low four bits are
// the low (j < 8) or high nibble of byte j%8; its top two are bits
// 2·(j/4)..+1 of byte 8 + j%4, which shifting dword j/4 of bytes 8..11
// right by 2·(j/4) brings to bits 0..1 of its byte j%4. Uses X8, X9, X11.
#define KFACTORS_Q3K \
	VMOVQ (R13), X8 \
	VPINSRD $2, 8(R13), X8, X8 \
	VPSRLW $4, X8, X9 \
	VPUNPCKLQDQ X9, X8, X9 \
	VPAND b0f<>(SB), X9, X9 \
	VPSHUFD $0xAA, X8, X11 \
	VPSRLVD q3shift<>(SB), X11, X11 \
	VPAND b03<>(SB), X11, X11 \
	VPSLLW $4, X11, X11 \
	VPOR X11, X9, X6 \
	VPSUBB b20<>(SB), X6, X6 \
	VPSHUFB ktr<>(SB), X6, X6 \
	ADDQ $12, R13

DATA q3shift<>+0(SB)/8, $0x0000000200000000
DATA q3shift<>+8(SB)/8, $0x0000000600000004
GLOBL q3shift<>(SB), RODATA|NOPTR, $16

// KSCALES_SPLIT(F): a split super-block's f32(d·D) in X12 and its factors
// (F's) as int32 in Z6. KTSCALES_SPLIT(F): the four-row loop's, d in X10.
#define KSCALES_SPLIT(F) \
	KD_SPLIT(X11) \
	VMULSS (R11), X11, X12 \
	F \
	VPMOVSXBD X6, Z6
#define KTSCALES_SPLIT(F) \
	KD_SPLIT(X10) \
	F \
	VPMOVSXBD X6, Z6

// KNIB2(CB): a pair's nibbles (its groups CB bytes apart) as int16: the
// low ones (even inputs) in Z8, the high ones in Z9. Needs Z28 = 0x000f
// words.
#define KNIB2(CB) \
	VMOVDQU (SI), X8 \
	VINSERTI128 $1, CB(SI), Y8, Y8 \
	VPMOVZXBW Y8, Z8 \
	VPSRLW $4, Z8, Z9 \
	VPANDD Z28, Z8, Z8

// KHIGH1x2(OFF, CB): a pair's plane of one bit an input (the word at
// OFF of each group, CB bytes apart: the even inputs, then the odd ones;
// Q5_K's fifth bits, Q3_K's third), Z29's words added (a masked VPADDW:
// word lanes) where set.
#define KHIGH1x2(OFF, CB) \
	KMOVW OFF(SI), K1 \
	KMOVW OFF+CB(SI), K2 \
	KUNPCKWD K1, K2, K3 \
	VPADDW Z29, Z8, K3, Z8 \
	KMOVW OFF+2(SI), K1 \
	KMOVW OFF+CB+2(SI), K2 \
	KUNPCKWD K1, K2, K3 \
	VPADDW Z29, Z9, K3, Z9

// KSPREAD2(OFF, CB): a pair's words of 2-bit fields at OFF (its groups
// CB bytes apart; byte j: inputs 2j, 2j+1, 2j+16, 2j+17 at bits 0, 2, 4,
// 6) spread to the words of Z10: each group's 8 bytes twice (BCAST2),
// widened, the second copy shifted right by 4 (K4: words 8..15 and
// 24..31), so that a word's bits 0..1 are an even input's (as Z8 takes
// them) and bits 2..3 the odd one after it; bits 4 and up are junk.
#define KSPREAD2(OFF, CB) \
	BCAST2(OFF, CB) \
	VPMOVZXBW Y10, Z10 \
	VPSRLW $4, Z10, Z11 \
	VMOVDQU16 Z11, K4, Z10

DATA klow2sel<>+0(SB)/4, $0xff00ff00
GLOBL klow2sel<>(SB), RODATA|NOPTR, $4

#define KNAME ·dotBlocksQ4_KIntAVX512
#define KCONSTS
#define KSCALES KSCALES_K4
#define KUNPACK2 VPMOVZXBW (SI), Z8; VPSRLW $4, Z8, Z9; VPANDD Z28, Z8, Z8; ADDQ $32, SI
#define MIN1
#include "blocks_k_avx512_amd64.h"
#undef KNAME
#define KNAME ·dotBlocksQ4_KIntVNNI
#define VNNI
#include "blocks_k_avx512_amd64.h"
#undef VNNI
#undef KNAME
#define KTSCALES KTSCALES_K4
#define KTNAME ·dotBlocksQ4_KTileIntAVX512
#include "blocks_k_tile_avx512_amd64.h"
#undef KTNAME
#define KTNAME ·dotBlocksQ4_KTileIntVNNI
#define VNNI
#include "blocks_k_tile_avx512_amd64.h"
#undef VNNI
#undef KTNAME
#define KWNAME ·expandQ4_KWide
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KCONSTS
#undef KUNPACK2

#define KNAME ·dotBlocksQ5_KIntAVX512
#define KCONSTS VPBROADCASTW w10<>(SB), Z29
#define KUNPACK2 KNIB2(20); KHIGH1x2(16, 20); ADDQ $40, SI
#include "blocks_k_avx512_amd64.h"
#undef KNAME
#define KNAME ·dotBlocksQ5_KIntVNNI
#define VNNI
#include "blocks_k_avx512_amd64.h"
#undef VNNI
#undef KNAME
#define KTNAME ·dotBlocksQ5_KTileIntAVX512
#include "blocks_k_tile_avx512_amd64.h"
#undef KTNAME
#define KTNAME ·dotBlocksQ5_KTileIntVNNI
#define VNNI
#include "blocks_k_tile_avx512_amd64.h"
#undef VNNI
#undef KTNAME
#define KWNAME ·expandQ5_KWide
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KTSCALES
#undef KCONSTS
#undef KUNPACK2
#undef KSCALES
#undef MIN1

#define SPLIT
#define KNAME ·dotBlocksQ6_KIntAVX512
#define KCONSTS VPBROADCASTW w30<>(SB), Z14; VPBROADCASTW w20y<>(SB), Z15; KMOVD klow2sel<>(SB), K4
#define KSCALES KSCALES_SPLIT(KFACTORS_Q6K)
// Q6_K's pair unpacks in words, as Q5_K's: the nibbles widened once
// (KNIB2), the 2-bit plane spread (KSPREAD2), shifted to bits 4..5 and
// merged in one VPTERNLOGD each (dst | (src & 0x30)), less 32.
#define KUNPACK2 \
	KNIB2(24) \
	KSPREAD2(16, 24) \
	VPSLLW $4, Z10, Z11 \
	VPTERNLOGD $0xF8, Z14, Z11, Z8 \
	VPSLLW $2, Z10, Z11 \
	VPTERNLOGD $0xF8, Z14, Z11, Z9 \
	VPSUBW Z15, Z8, Z8 \
	VPSUBW Z15, Z9, Z9 \
	ADDQ $48, SI
#include "blocks_k_avx512_amd64.h"
#undef KNAME
#define KNAME ·dotBlocksQ6_KIntVNNI
#define VNNI
#include "blocks_k_avx512_amd64.h"
#undef VNNI
#undef KNAME
#define KTSCALES KTSCALES_SPLIT(KFACTORS_Q6K)
#define KTNAME ·dotBlocksQ6_KTileIntAVX512
#include "blocks_k_tile_avx512_amd64.h"
#undef KTNAME
#define KTNAME ·dotBlocksQ6_KTileIntVNNI
#define VNNI
#include "blocks_k_tile_avx512_amd64.h"
#undef VNNI
#undef KTNAME
#define KWNAME ·expandQ6_KWide
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KTSCALES
#undef KCONSTS
#undef KUNPACK2
#undef KSCALES

// KLOW2x2(CB): a pair's 2-bit planes (Q2_K's codes, Q3_K's low bits;
// its groups CB bytes apart) as int16 (KSPREAD2). Needs Z14 = 0x03 bytes.
#define KLOW2x2(CB) \
	KSPREAD2(0, CB) \
	VPSRLW $2, Z10, Z9 \
	VPANDD Z14, Z10, Z8 \
	VPANDD Z14, Z9, Z9

#define KLOW2CONSTS VPBROADCASTD b03<>(SB), Z14; KMOVD klow2sel<>(SB), K4

// Q3_K's pair: its 2-bit planes (KLOW2x2), 4 added where the third bit is
// set (KHIGH1x2, as Q5_K's fifth bits), less 4.
#define KNAME ·dotBlocksQ3_KIntAVX512
#define KCONSTS KLOW2CONSTS; VPBROADCASTW w04<>(SB), Z29
#define KSCALES KSCALES_SPLIT(KFACTORS_Q3K)
#define KUNPACK2 KLOW2x2(12); KHIGH1x2(8, 12); VPSUBW Z29, Z8, Z8; VPSUBW Z29, Z9, Z9; ADDQ $24, SI
#include "blocks_k_avx512_amd64.h"
#undef KNAME
#define KNAME ·dotBlocksQ3_KIntVNNI
#define VNNI
#include "blocks_k_avx512_amd64.h"
#undef VNNI
#undef KNAME
#define KTSCALES KTSCALES_SPLIT(KFACTORS_Q3K)
#define KTNAME ·dotBlocksQ3_KTileIntAVX512
#include "blocks_k_tile_avx512_amd64.h"
#undef KTNAME
#define KTNAME ·dotBlocksQ3_KTileIntVNNI
#define VNNI
#include "blocks_k_tile_avx512_amd64.h"
#undef VNNI
#undef KTNAME
#define KWNAME ·expandQ3_KWide
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KTSCALES
#undef KCONSTS
#undef KUNPACK2
#undef KSCALES
#undef SPLIT

// IQ4_XS's super-blocks are built as the K quants' (an f16 d, a 6-bit
// factor a group, no mins), so they take the same loops; a pair unpacks
// as IQ4_NL's (nibbles through the codebook's levels).

DATA kxs<>+0(SB)/8, $0x0302010003020100
DATA kxs<>+8(SB)/8, $0x0706050407060504
GLOBL kxs<>(SB), RODATA|NOPTR, $16

// IQ4XS_FACTORS: an IQ4_XS super-block's eight factors less 32
// (dtype.IQ4XSScale; DI: f16 d, scales_h, scales_l) as the signed bytes of
// X6 in kLane's order, byte L holding factor 2·(L%4) + L/8 (kxs). Each
// factor's low four bits are a nibble of scales_l (the even factors' the
// low ones); scales_h's nibble k, spread to byte k, holds factor 2k's top
// two bits (bits 0..1) and factor 2k+1's (bits 2..3). Uses AX, BX, DX.
#define IQ4XS_FACTORS \
	MOVWLZX 2(DI), BX \
	MOVL BX, DX \
	SHLL $8, DX \
	ORL DX, BX \
	ANDL $0x00ff00ff, BX \
	MOVL BX, DX \
	SHLL $4, DX \
	ORL DX, BX \
	ANDL $0x0f0f0f0f, BX \
	MOVL BX, DX \
	ANDL $0x03030303, DX \
	SHLL $4, DX \
	SHLL $2, BX \
	ANDL $0x30303030, BX \
	MOVL 4(DI), AX \
	ANDL $0x0f0f0f0f, AX \
	ORL AX, DX \
	MOVL 4(DI), AX \
	SHRL $4, AX \
	ANDL $0x0f0f0f0f, AX \
	ORL AX, BX \
	VMOVD DX, X6 \
	VPINSRD $1, BX, X6, X6 \
	VPSUBB b20<>(SB), X6, X6 \
	VPSHUFB kxs<>(SB), X6, X6

// KSCALES_IQ4XS: f32(d·D) in X12, the factors as int32 in Z6.
#define KSCALES_IQ4XS \
	VCVTPH2PS (DI), X11 \
	VMULSS (R11), X11, X12 \
	IQ4XS_FACTORS \
	VPMOVSXBD X6, Z6 \
	ADDQ $8, DI

// KTSCALES_IQ4XS: KSCALES_IQ4XS for the four-row loop: d in X10.
#define KTSCALES_IQ4XS \
	VCVTPH2PS (DI), X10 \
	IQ4XS_FACTORS \
	VPMOVSXBD X6, Z6 \
	ADDQ $8, DI

#define KNAME ·dotBlocksIQ4_XSIntAVX512
#define KCONSTS VMOVDQU b0f<>(SB), Y15; VBROADCASTI128 iq4nl<>(SB), Y14
#define KSCALES KSCALES_IQ4XS
#define KUNPACK2 VMOVDQU (SI), Y8; VPSRLW $4, Y8, Y9; VPAND Y15, Y8, Y8; VPAND Y15, Y9, Y9; CODEBOOK2; WIDEN2; ADDQ $32, SI
#include "blocks_k_avx512_amd64.h"
#undef KNAME
#define KNAME ·dotBlocksIQ4_XSIntVNNI
#define VNNI
#include "blocks_k_avx512_amd64.h"
#undef VNNI
#undef KNAME
#define KTSCALES KTSCALES_IQ4XS
#define KTNAME ·dotBlocksIQ4_XSTileIntAVX512
#include "blocks_k_tile_avx512_amd64.h"
#undef KTNAME
#define KTNAME ·dotBlocksIQ4_XSTileIntVNNI
#define VNNI
#include "blocks_k_tile_avx512_amd64.h"
#undef VNNI
#undef KTNAME
#define KWNAME ·expandIQ4_XSWide
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KTSCALES
#undef KCONSTS
#undef KUNPACK2
#undef KSCALES

// Q2_K: a super-block's d and dmin (DI), then a byte a half group, its
// factor (low nibble) and min (high). Q2K_FIELDS: the sixteen factors as
// X8's bytes, the mins as X9's, in the halves' order.
#define Q2K_FIELDS \
	VMOVDQU 4(DI), X8 \
	VPSRLW $4, X8, X9 \
	VPAND b0f<>(SB), X9, X9 \
	VPAND b0f<>(SB), X8, X8

// KDECODE_Q2K (d and dmin in X10):
// the factors as int32 in Z6 in kLane's order, dmin·m of the halves in
// their order in Z5.
#define KDECODE_Q2K \
	Q2K_FIELDS \
	VPSHUFB ktr<>(SB), X8, X8 \
	VPMOVZXBD X8, Z6 \
	VMOVSHDUP X10, X11 \
	VBROADCASTSS X11, Z11 \
	VPMOVZXBD X9, Z9 \
	VCVTDQ2PS Z9, Z9 \
	VMULPS Z11, Z9, Z5 \
	ADDQ $20, DI

// KSCALES_Q2K: f32(d·D) in X12, the factors in Z6, and the min terms of
// the halves' sums (R12) taken from Y2, halves 0..7's, then 8..15's
// (dotBlocksKGo's order).
#define KSCALES_Q2K \
	VCVTPH2PS (DI), X10 \
	VMULSS (R11), X10, X12 \
	KDECODE_Q2K \
	VMULPS (R12), Z5, Z9 \
	VSUBPS Y9, Y2, Y2 \
	VEXTRACTF64X4 $1, Z9, Y9 \
	VSUBPS Y9, Y2, Y2

#define MIN2
#define KNAME ·dotBlocksQ2_KIntAVX512
#define KCONSTS KLOW2CONSTS
#define KSCALES KSCALES_Q2K
#define KUNPACK2 KLOW2x2(8); ADDQ $16, SI
#include "blocks_k_avx512_amd64.h"
#undef KNAME
#define KNAME ·dotBlocksQ2_KIntVNNI
#define VNNI
#include "blocks_k_avx512_amd64.h"
#undef VNNI
#undef KNAME
#define KTSCALES VCVTPH2PS (DI), X10; KDECODE_Q2K
#define KTNAME ·dotBlocksQ2_KTileIntAVX512
#include "blocks_k_tile_avx512_amd64.h"
#undef KTNAME
#define KTNAME ·dotBlocksQ2_KTileIntVNNI
#define VNNI
#include "blocks_k_tile_avx512_amd64.h"
#undef VNNI
#undef KTNAME
#define KWNAME ·expandQ2_KWide
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KTSCALES
#undef KCONSTS
#undef KUNPACK2
#undef KSCALES
#undef MIN2

// ---- The AVX2 form (blocks_k_avx2_amd64.h).

#define KWAVX2

// wbits: word k's bit; wq6mul: Q6_K's factors that move its 2-bit fields
// into place (16 for a group's first halves, 1 for its second); then word
// constants, 16 each.
DATA wbits<>+0(SB)/8, $0x0008000400020001
DATA wbits<>+8(SB)/8, $0x0080004000200010
DATA wbits<>+16(SB)/8, $0x0800040002000100
DATA wbits<>+24(SB)/8, $0x8000400020001000
GLOBL wbits<>(SB), RODATA|NOPTR, $32
DATA wq6mul<>+0(SB)/8, $0x0010001000100010
DATA wq6mul<>+8(SB)/8, $0x0010001000100010
DATA wq6mul<>+16(SB)/8, $0x0001000100010001
DATA wq6mul<>+24(SB)/8, $0x0001000100010001
GLOBL wq6mul<>(SB), RODATA|NOPTR, $32

BYTES32(w0fy, 0x000f000f000f000f)
BYTES32(w10y, 0x0010001000100010)
BYTES32(w30y, 0x0030003000300030)
BYTES32(w20y, 0x0020002000200020)
BYTES32(w04y, 0x0004000400040004)

// KSCALES2_K4: KSCALES_K4 for the AVX2 loop: f32(d·D) to 24(SP), the
// half factors of lanes 0..7 in Y6, of 8..15 in Y7.
#define KSCALES2_K4 \
	VCVTPH2PS (DI), X10 \
	VMULSS (R11), X10, X5 \
	VMOVSS X5, 24(SP) \
	KDECODE_K4 \
	KMINS_K4 \
	VPUNPCKLBW X6, X6, X6 \
	VPSHUFB ktr<>(SB), X6, X6 \
	VPSRLDQ $8, X6, X7 \
	VPMOVZXBD X7, Y7 \
	VPMOVZXBD X6, Y6 \
	ADDQ $16, DI

// KSCALES2_SPLIT(F): KSCALES_SPLIT(F) for the AVX2 loop.
#define KSCALES2_SPLIT(F) \
	KD_SPLIT(X11) \
	VMULSS (R11), X11, X5 \
	VMOVSS X5, 24(SP) \
	F \
	VPSRLDQ $8, X6, X7 \
	VPMOVSXBD X7, Y7 \
	VPMOVSXBD X6, Y6

// KNIB(OFF): the nibbles of the group at OFF(SI) as int16 words, the low ones (even inputs) in
// Y8, the high ones in Y9.
#define KNIB(OFF) \
	VPMOVZXBW OFF(SI), Y8 \
	VPSRLW $4, Y8, Y9 \
	VPAND w0fy<>(SB), Y8, Y8

// KHIGH1HALF(OFF, Y, C): a plane of one bit an input of 16 inputs (the
// word at OFF(SI): Q5_K's fifth bits, Q3_K's third), the words C ORed
// into their words.
#define KHIGH1HALF(OFF, Y, C) \
	VPBROADCASTW OFF(SI), Y10 \
	VPAND wbits<>(SB), Y10, Y10 \
	VPCMPEQW wbits<>(SB), Y10, Y10 \
	VPAND C, Y10, Y10 \
	VPOR Y10, Y, Y

// KHIGH2(OFF): Q6_K's 2-bit fields of the group at OFF(SI) (8 bytes at
// OFF+16) as bits
// 4..5 of its codes: byte j spread to words j and 8 + j, times 16 in the
// first (inputs 2j at bits 0..1, 2j+1 at 2..3) and 1 in the second (2j+16
// at 4..5, 2j+17 at 6..7), so that bits 4..5 are the even inputs' and,
// shifted right by 2, the odd ones'.
#define KHIGH2(OFF) \
	VPBROADCASTQ OFF+16(SI), X10 \
	VPMOVZXBW X10, Y10 \
	VPMULLW wq6mul<>(SB), Y10, Y10 \
	VPAND w30y<>(SB), Y10, Y5 \
	VPOR Y5, Y8, Y8 \
	VPSRLW $2, Y10, Y10 \
	VPAND w30y<>(SB), Y10, Y10 \
	VPOR Y10, Y9, Y9

// The wide kernel's AVX2 expansions (blocks_k_wide_amd64.h with KWAVX2): a
// super-block's d in X10, its half factors as X6's bytes in the halves'
// order (VPSHUFB ktr puts kLane's order back: the permutation is its own
// inverse), dmin·m in Y5 (Q2_K: of halves 0..7, and 8..15 in Y7).
#define KW2SCALES_K4 \
	VCVTPH2PS (DI), X10 \
	KDECODE_K4 \
	KDMIN_K4 \
	VPUNPCKLBW X6, X6, X6 \
	ADDQ $16, DI
#define KW2SCALES_SPLIT(F) \
	KD_SPLIT(X10) \
	F \
	VPSHUFB ktr<>(SB), X6, X6
#define KW2SCALES_IQ4XS \
	VCVTPH2PS (DI), X10 \
	IQ4XS_FACTORS \
	VPSHUFB ktr<>(SB), X6, X6 \
	ADDQ $8, DI
#define KW2SCALES_Q2K \
	VCVTPH2PS (DI), X10 \
	Q2K_FIELDS \
	VMOVDQA X8, X6 \
	VMOVSHDUP X10, X11 \
	VBROADCASTSS X11, Y11 \
	VPMOVZXBD X9, Y5 \
	VCVTDQ2PS Y5, Y5 \
	VMULPS Y11, Y5, Y5 \
	VPSRLDQ $8, X9, X9 \
	VPMOVZXBD X9, Y7 \
	VCVTDQ2PS Y7, Y7 \
	VMULPS Y11, Y7, Y7 \
	ADDQ $20, DI

#define KCONSTS2
#define KNAME2 ·dotBlocksQ4_KIntAVX2
#define KSCALES2 KSCALES2_K4
#define KCB 16
#define KUNPACK(OFF) KNIB(OFF)
#include "blocks_k_avx2_amd64.h"
#define MIN1
#define KTSCALES KW2SCALES_K4
#define KWNAME ·expandQ4_KWideAVX2
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KNAME2
#undef KUNPACK
#undef KCB

#define KNAME2 ·dotBlocksQ5_KIntAVX2
#define KCB 20
#define KUNPACK(OFF) KNIB(OFF); KHIGH1HALF(OFF+16, Y8, w10y<>(SB)); KHIGH1HALF(OFF+18, Y9, w10y<>(SB))
#include "blocks_k_avx2_amd64.h"
#define KWNAME ·expandQ5_KWideAVX2
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KTSCALES
#undef MIN1
#undef KNAME2
#undef KUNPACK
#undef KCB
#undef KSCALES2

#define SPLIT
#define KNAME2 ·dotBlocksQ6_KIntAVX2
#define KSCALES2 KSCALES2_SPLIT(KFACTORS_Q6K)
#define KCB 24
#define KUNPACK(OFF) KNIB(OFF); KHIGH2(OFF); VPSUBW w20y<>(SB), Y8, Y8; VPSUBW w20y<>(SB), Y9, Y9
#include "blocks_k_avx2_amd64.h"
#define KTSCALES KW2SCALES_SPLIT(KFACTORS_Q6K)
#define KWNAME ·expandQ6_KWideAVX2
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KTSCALES
#undef KNAME2
#undef KUNPACK
#undef KCB
#undef KSCALES2
#undef SPLIT

// KSCALES2_IQ4XS: KSCALES_IQ4XS for the AVX2 loop (KSCALES2_Q6K's lanes).
#define KSCALES2_IQ4XS \
	VCVTPH2PS (DI), X10 \
	VMULSS (R11), X10, X5 \
	VMOVSS X5, 24(SP) \
	IQ4XS_FACTORS \
	VPSRLDQ $8, X6, X7 \
	VPMOVSXBD X7, Y7 \
	VPMOVSXBD X6, Y6 \
	ADDQ $8, DI

#undef KCONSTS2
#define KCONSTS2 VMOVDQU b0f<>(SB), X15; VMOVDQU iq4nl<>(SB), X14
#define KNAME2 ·dotBlocksIQ4_XSIntAVX2
#define KSCALES2 KSCALES2_IQ4XS
#define KCB 16
#define KUNPACK(OFF) VMOVDQU OFF(SI), X8; VPSRLW $4, X8, X9; VPAND X15, X8, X8; VPAND X15, X9, X9; VPSHUFB X8, X14, X8; VPSHUFB X9, X14, X9; VPMOVSXBW X8, Y8; VPMOVSXBW X9, Y9
#include "blocks_k_avx2_amd64.h"
#define KTSCALES KW2SCALES_IQ4XS
#define KWNAME ·expandIQ4_XSWideAVX2
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KTSCALES
#undef KNAME2
#undef KUNPACK
#undef KCB
#undef KSCALES2
#undef KCONSTS2

#define KCONSTS2 VMOVDQU b03<>(SB), X14
#define SPLIT
#define KNAME2 ·dotBlocksQ3_KIntAVX2
#define KSCALES2 KSCALES2_SPLIT(KFACTORS_Q3K)
#define KCB 12
#define KUNPACK(OFF) LOW2(OFF); VPMOVZXBW X8, Y8; VPMOVZXBW X9, Y9; KHIGH1HALF(OFF+8, Y8, w04y<>(SB)); KHIGH1HALF(OFF+10, Y9, w04y<>(SB)); VPSUBW w04y<>(SB), Y8, Y8; VPSUBW w04y<>(SB), Y9, Y9
#include "blocks_k_avx2_amd64.h"
#define KTSCALES KW2SCALES_SPLIT(KFACTORS_Q3K)
#define KWNAME ·expandQ3_KWideAVX2
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KTSCALES
#undef KNAME2
#undef KUNPACK
#undef KCB
#undef KSCALES2
#undef KCONSTS2
#undef SPLIT

// KSCALES2_Q2K: KSCALES_Q2K for the AVX2 loop.
#define KSCALES2_Q2K \
	VCVTPH2PS (DI), X10 \
	VMULSS (R11), X10, X5 \
	VMOVSS X5, 24(SP) \
	Q2K_FIELDS \
	VPSHUFB ktr<>(SB), X8, X8 \
	VPSRLDQ $8, X8, X7 \
	VPMOVZXBD X7, Y7 \
	VPMOVZXBD X8, Y6 \
	VMOVSHDUP X10, X11 \
	VBROADCASTSS X11, Y11 \
	VPMOVZXBD X9, Y5 \
	VCVTDQ2PS Y5, Y5 \
	VMULPS Y11, Y5, Y5 \
	VMULPS (R12), Y5, Y5 \
	VSUBPS Y5, Y2, Y2 \
	VPSRLDQ $8, X9, X9 \
	VPMOVZXBD X9, Y5 \
	VCVTDQ2PS Y5, Y5 \
	VMULPS Y11, Y5, Y5 \
	VMULPS 32(R12), Y5, Y5 \
	VSUBPS Y5, Y2, Y2 \
	ADDQ $20, DI

#define MIN2
#define KCONSTS2 VMOVDQU b03<>(SB), X14
#define KNAME2 ·dotBlocksQ2_KIntAVX2
#define KSCALES2 KSCALES2_Q2K
#define KCB 8
#define KUNPACK(OFF) LOW2(OFF); VPMOVZXBW X8, Y8; VPMOVZXBW X9, Y9
#include "blocks_k_avx2_amd64.h"
#define KTSCALES KW2SCALES_Q2K
#define KWNAME ·expandQ2_KWideAVX2
#include "blocks_k_wide_amd64.h"
#undef KWNAME
#undef KTSCALES
#undef KNAME2
#undef KUNPACK
#undef KCB
#undef KSCALES2
#undef KCONSTS2
#undef MIN2
#undef KWAVX2
