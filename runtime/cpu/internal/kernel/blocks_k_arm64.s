//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// The NEON products of the K quants (Q2_K to Q6_K, and IQ4_XS, built as
// they are): dotBlocksKGo, bit
// for bit. Per super-block (eight groups of 32, 256 inputs), a group's
// codes are unpacked to int16, its even inputs' codes (low nibbles, the
// twin's c[0], c[2], ...) and its odd ones', and SMULL/SMLAL multiply them
// with the activations' int16 codes (QRow.KCodes, laid out by CodeIndex:
// per pair of groups, the even inputs of both, then the odd ones), four
// exact int32 lanes for each half group (16 inputs). ADDP twice leaves a
// pair of groups' four halves in one register, in order (halves 4p..4p+3
// of pair p), and each register meets its halves' integer factors (MUL),
// becomes f32 (SCVTF), is scaled by f32(d·D) and added to its own
// accumulator, A_p. Accumulating in half order instead of the twin's
// lanes (kLane) changes nothing, each lane being summed alone; the fold
// at the end reads A_p's lane c as the twin's lane 4c+p. Q4_K's and
// Q5_K's mins meet the groups' sums (KSums) in M0, M1 (macc), Q2_K's the
// half groups' (QRow.Halves).
//
// Registers: R0 codes, R1 the next row's scale words, R2 sstride, R3 xq,
// R4 kd, R5 sums, R6 super-blocks a row, R7 rows left, R8 out; per row R9
// its scale words (Q6_K: its d's), R10 Q6_K's factors, R11 the
// activations' codes, R12 KD, R13 KSums, R14 super-blocks left. V0..V3
// the accumulators A_p, V4, V5 the mins' (Q2_K, Q4_K, Q5_K), V6..V9 the factors
// of pair p's halves as int32, V11 f32(d·D) in lane 0, V12..V15 a group's
// codes (even inputs 0..14, 16..30, odd ones 1..15, 17..31), V16..V23 a
// pair's activations, V24..V27 products, V31 the nibble mask; V4, V5, V10,
// V28..V30 per type.

// Q6_K's 2-bit fields: a group's eight bytes of them in both halves of a
// register, byte k%8 holds even input 2k's field at bit 4·(k/8) and odd
// input 2k+1's at 2 + 4·(k/8); shifting byte k by k6shift's (left 4, 0)
// for the even inputs and (left 2, right 2) for the odd ones brings each
// field to bits 4..5.
DATA k6shift<>+0(SB)/8, $0x0404040404040404
DATA k6shift<>+8(SB)/8, $0x0000000000000000
DATA k6shift<>+16(SB)/8, $0x0202020202020202
DATA k6shift<>+24(SB)/8, $0xfefefefefefefefe
GLOBL k6shift<>(SB), RODATA|NOPTR, $32

// WIDEN: the even codes in V27 and the odd ones in V26 (bytes, unsigned)
// to V12..V15 as int16.
#define WIDEN \
	VUXTL V27.B8, V12.H8 \
	VUXTL2 V27.B16, V13.H8 \
	VUXTL V26.B8, V14.H8 \
	VUXTL2 V26.B16, V15.H8

// SWIDEN: WIDEN of signed codes.
#define SWIDEN \
	SXTL8H(27, 12) \
	SXTL28H(27, 13) \
	SXTL8H(26, 14) \
	SXTL28H(26, 15)

// FACTORS16: the 16 signed factor bytes in V24 (one a half group, in
// order) to V6..V9 as int32; V25 scratch.
#define FACTORS16 \
	SXTL28H(24, 25) \
	SXTL8H(24, 24) \
	SXTL4S(24, 6) \
	SXTL24S(24, 7) \
	SXTL4S(25, 8) \
	SXTL24S(25, 9)

// UWIDEN16S(S, D0, D1, D2, D3): the 16 unsigned bytes of S to D0..D3 as
// int32; V12, V13 scratch.
#define UWIDEN16S(S, D0, D1, D2, D3) \
	VUXTL S.B8, V12.H8 \
	VUXTL2 S.B16, V13.H8 \
	VUXTL V12.H4, D0.S4 \
	VUXTL2 V12.H8, D1.S4 \
	VUXTL V13.H4, D2.S4 \
	VUXTL2 V13.H8, D3.S4

// UNPACK_Q4K: a group's 16 code bytes, low nibble an even input, high an
// odd one.
#define UNPACK_Q4K \
	VLD1.P 16(R0), [V26.B16] \
	VAND V31.B16, V26.B16, V27.B16 \
	VUSHR $4, V26.B16, V26.B16 \
	WIDEN

// UNPACK_Q5K: Q4_K's nibbles, then the word of fifth bits (FIFTHBITS:
// V10, V28 and V29 its constants, V30 the bytes 16).
#define UNPACK_Q5K \
	VLD1.P 16(R0), [V26.B16] \
	VAND V31.B16, V26.B16, V27.B16 \
	VUSHR $4, V26.B16, V26.B16 \
	FIFTHBITS(V27, V26, V12, V13, V10, V28, V29, V30) \
	WIDEN

// UNPACK_Q6K: the nibbles, then the eight bytes of 2-bit fields (V4, V5
// k6shift's halves, V30 the mask 0x30), less 32 (V10), signed.
#define UNPACK_Q6K \
	VLD1.P 16(R0), [V26.B16] \
	FMOVD.P 8(R0), F28 \
	VDUP V28.D[0], V28.D2 \
	VAND V31.B16, V26.B16, V27.B16 \
	VUSHR $4, V26.B16, V26.B16 \
	USHL16B(4, 28, 29) \
	VAND V30.B16, V29.B16, V29.B16 \
	VORR V29.B16, V27.B16, V27.B16 \
	USHL16B(5, 28, 29) \
	VAND V30.B16, V29.B16, V29.B16 \
	VORR V29.B16, V26.B16, V26.B16 \
	VSUB V10.B16, V27.B16, V27.B16 \
	VSUB V10.B16, V26.B16, V26.B16 \
	SWIDEN

// GROUPK: a group's halves' products, four lanes each: its codes in
// V12..V15 with its even inputs' activations in E0 (half 0), E1 (half 1)
// and odd ones' in O0, O1, to PA (half 0) and PB (half 1), then pairwise
// to PA: [PA0+PA1, PA2+PA3, PB0+PB1, PB2+PB3].
#define GROUPK(E0, E1, O0, O1, PA, PB) \
	SMULL4S(E0, 12, PA) \
	SMLAL24S(E0, 12, PA) \
	SMLAL4S(O0, 14, PA) \
	SMLAL24S(O0, 14, PA) \
	SMULL4S(E1, 13, PB) \
	SMLAL24S(E1, 13, PB) \
	SMLAL4S(O1, 15, PB) \
	SMLAL24S(O1, 15, PB) \
	ADDP4S(PB, PA, PA)

// PAIRK: pair p of the super-block (groups 2p, 2p+1) into accumulator A,
// its halves' factors in F.
#define PAIRK(UNPACK, F, A) \
	VLD1.P 64(R11), [V16.H8, V17.H8, V18.H8, V19.H8] \
	VLD1.P 64(R11), [V20.H8, V21.H8, V22.H8, V23.H8] \
	UNPACK \
	GROUPK(16, 17, 20, 21, 24, 25) \
	UNPACK \
	GROUPK(18, 19, 22, 23, 26, 27) \
	ADDP4S(26, 24, 24) \
	MUL4S(F, 24, 24) \
	SCVTF4S(24, 24) \
	FMULE4S(11, 0, 24, 24) \
	FADD4S(24, A, A)

// SCALES_K4: a Q4_K or Q5_K super-block's 16 bytes of scales (R9): f16 d
// and dmin, then 12 bytes of 6-bit scales and mins, unpacked as ggml's
// get_scale_min_k4 (scaleMinK4) four at a time in 32-bit words. The
// scales, each twice (both halves of its group), to V6..V9; f32(d·D) to
// V11; the mins' terms −f32(f32(dmin·m)·sum) added to V4, V5.
#define SCALES_K4 \
	FMOVS (R9), F24 \
	FCVTL4S(24, 24) \
	FMOVS.P 4(R12), F25 \
	FMULS F25, F24, F11 \
	MOVWU 4(R9), R19 \
	MOVWU 8(R9), R20 \
	MOVWU 12(R9), R21 \
	ADD $16, R9 \
	ANDW $0x3f3f3f3f, R19, R22 \
	ANDW $0x0f0f0f0f, R21, R23 \
	LSRW $2, R19, R24 \
	ANDW $0x30303030, R24, R24 \
	ORRW R24, R23, R23 \
	ORR R23<<32, R22, R22 \
	ANDW $0x3f3f3f3f, R20, R23 \
	LSRW $4, R21, R24 \
	ANDW $0x0f0f0f0f, R24, R24 \
	LSRW $2, R20, R25 \
	ANDW $0x30303030, R25, R25 \
	ORRW R25, R24, R24 \
	ORR R24<<32, R23, R23 \
	VMOV R22, V6.D[0] \
	VZIP1 V6.B16, V6.B16, V6.B16 \
	VUXTL2 V6.B16, V8.H8 \
	VUXTL V6.B8, V6.H8 \
	VUXTL2 V6.H8, V7.S4 \
	VUXTL V6.H4, V6.S4 \
	VUXTL2 V8.H8, V9.S4 \
	VUXTL V8.H4, V8.S4 \
	VMOV R23, V25.D[0] \
	VUXTL V25.B8, V25.H8 \
	VUXTL2 V25.H8, V27.S4 \
	VUXTL V25.H4, V26.S4 \
	UCVTF4S(26, 26) \
	UCVTF4S(27, 27) \
	FMULE4S(24, 1, 26, 26) \
	FMULE4S(24, 1, 27, 27) \
	VLD1.P 32(R13), [V16.S4, V17.S4] \
	FMUL4S(16, 26, 26) \
	FMUL4S(17, 27, 27) \
	FSUB4S(26, 4, 4) \
	FSUB4S(27, 5, 5)

// SCALES_Q6K: a Q6_K super-block's f16 d (R9) and 16 int8 factors (R10),
// one a half group, to V6..V9 as int32; f32(d·D) to V11.
#define SCALES_Q6K \
	MOVHU.P 2(R9), R19 \
	FMOVS R19, F24 \
	FCVTL4S(24, 24) \
	FMOVS.P 4(R12), F25 \
	FMULS F25, F24, F11 \
	VLD1.P 16(R10), [V24.B16] \
	FACTORS16

// FOLDK: the row's result to lane 0 of V0 (foldLanes): the twin's lane
// 4c+p is A_p's lane c, so its a[k] = lane k + lane k+8 is A_{k%4}'s
// lanes k/4 and k/4+2, and a's fold ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))
// is (b0+b2) + (b1+b3) with b_p = A_p's (lane 0 + lane 2) + (lane 1 +
// lane 3); then KMINS adds the mins' fold.
#define FOLDK \
	DUPD1(0, 24) \
	FADD2S(24, 0, 0) \
	FADDP2S(0, 0) \
	DUPD1(1, 24) \
	FADD2S(24, 1, 1) \
	FADDP2S(1, 1) \
	DUPD1(2, 24) \
	FADD2S(24, 2, 2) \
	FADDP2S(2, 2) \
	DUPD1(3, 24) \
	FADD2S(24, 3, 3) \
	FADDP2S(3, 3) \
	FADDS(2, 0, 0) \
	FADDS(3, 1, 1) \
	FADDS(1, 0, 0)

// The mins' fold (V4, V5: HSUM8) added to the result; Q6_K has none, and
// adds the fold of zeros (+0), as the twin does.
#define MINS_K4 \
	HSUM8(4, 5, 24) \
	FADDS(4, 0, 0)
#define MINS_NONE \
	VEOR V24.B16, V24.B16, V24.B16 \
	FADDS(24, 0, 0)

// KROWS: the row loop of one type: KSETUP per row (after R9 is set),
// KSCALES per super-block, KUNPACK per group, KMINS at the fold.
#define KROWS(KSETUP, KSCALES, KUNPACK, KMINS) \
	MOVD codes+0(FP), R0 \
	MOVD scales+8(FP), R1 \
	MOVD sstride+16(FP), R2 \
	MOVD xq+24(FP), R3 \
	MOVD kd+32(FP), R4 \
	MOVD sums+40(FP), R5 \
	MOVD groups+48(FP), R6 \
	MOVD rows+56(FP), R7 \
	MOVD out+64(FP), R8 \
	LSR $3, R6, R6 \
	VMOVI $15, V31.B16 \
krow: \
	MOVD R1, R9 \
	ADD R2, R1, R1 \
	KSETUP \
	MOVD R3, R11 \
	MOVD R4, R12 \
	MOVD R5, R13 \
	MOVD R6, R14 \
	VEOR V0.B16, V0.B16, V0.B16 \
	VEOR V1.B16, V1.B16, V1.B16 \
	VEOR V2.B16, V2.B16, V2.B16 \
	VEOR V3.B16, V3.B16, V3.B16 \
ksuper: \
	KSCALES \
	PAIRK(KUNPACK, 6, 0) \
	PAIRK(KUNPACK, 7, 1) \
	PAIRK(KUNPACK, 8, 2) \
	PAIRK(KUNPACK, 9, 3) \
	SUBS $1, R14, R14 \
	BNE ksuper \
	FOLDK \
	KMINS \
	FMOVS.P F0, 4(R8) \
	SUBS $1, R7, R7 \
	BNE krow \
	RET

// Per row: Q4_K's and Q5_K's mins start at 0; Q6_K's factors follow the
// row's super-blocks' d's (two bytes each).
#define SETUP_K4 \
	VEOR V4.B16, V4.B16, V4.B16 \
	VEOR V5.B16, V5.B16, V5.B16
#define SETUP_Q6K ADD R6<<1, R9, R10

// func dotBlocksQ4_KNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ4_KNEON(SB), NOSPLIT, $0-72
	KROWS(SETUP_K4, SCALES_K4, UNPACK_Q4K, MINS_K4)

// func dotBlocksQ5_KNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ5_KNEON(SB), NOSPLIT, $0-72
	FIFTH_CONSTS(V10, V28, V29)
	VMOVI $16, V30.B16
	KROWS(SETUP_K4, SCALES_K4, UNPACK_Q5K, MINS_K4)

// func dotBlocksQ6_KNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ6_KNEON(SB), NOSPLIT, $0-72
	MOVD $k6shift<>(SB), R15
	VLD1 (R15), [V4.B16, V5.B16]
	VMOVI $48, V30.B16
	VMOVI $32, V10.B16
	KROWS(SETUP_Q6K, SCALES_Q6K, UNPACK_Q6K, MINS_NONE)

// UNPACK_IQ4XS: IQ4_NL's nibbles through the codebook's levels (V30),
// signed.
#define UNPACK_IQ4XS \
	VLD1.P 16(R0), [V26.B16] \
	VAND V31.B16, V26.B16, V27.B16 \
	VUSHR $4, V26.B16, V26.B16 \
	VTBL V27.B16, [V30.B16], V27.B16 \
	VTBL V26.B16, [V30.B16], V26.B16 \
	SWIDEN

// SCALES_IQ4XS: an IQ4_XS super-block's eight bytes (R9): f32(d·D) to
// V11, and its eight factors less 32 (dtype.IQ4XSScale), each twice (both
// halves of its group), to V6..V9 as int32. A factor's low four bits are a
// nibble of scales_l (R21; the even factors' the low ones, R23, the odd
// ones' the high, R24), and scales_h's nibble k, spread to byte k (R20),
// holds factor 2k's top two bits (bits 0..1) and factor 2k+1's (2..3);
// zipping the even and odd factors' bytes puts them in order, and zipping
// that with itself doubles each.
#define SCALES_IQ4XS \
	MOVHU (R9), R19 \
	FMOVS R19, F24 \
	FCVTL4S(24, 24) \
	FMOVS.P 4(R12), F25 \
	FMULS F25, F24, F11 \
	MOVHU 2(R9), R20 \
	MOVWU 4(R9), R21 \
	ADD $8, R9 \
	ORRW R20<<8, R20, R20 \
	ANDW $0x00ff00ff, R20, R20 \
	ORRW R20<<4, R20, R20 \
	ANDW $0x0f0f0f0f, R20, R20 \
	ANDW $0x0f0f0f0f, R21, R23 \
	ANDW $0x03030303, R20, R22 \
	ORRW R22<<4, R23, R23 \
	LSRW $4, R21, R24 \
	ANDW $0x0f0f0f0f, R24, R24 \
	LSLW $2, R20, R22 \
	ANDW $0x30303030, R22, R22 \
	ORRW R22, R24, R24 \
	VMOV R23, V24.S[0] \
	VMOV R24, V25.S[0] \
	VZIP1 V25.B16, V24.B16, V24.B16 \
	VZIP1 V24.B16, V24.B16, V24.B16 \
	VSUB V10.B16, V24.B16, V24.B16 \
	FACTORS16

#define SETUP_NONE

// func dotBlocksIQ4_XSKNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32, book *[16]int8)
TEXT ·dotBlocksIQ4_XSKNEON(SB), NOSPLIT, $0-80
	MOVD book+72(FP), R15
	VLD1 (R15), [V30.B16]
	VMOVI $32, V10.B16
	KROWS(SETUP_NONE, SCALES_IQ4XS, UNPACK_IQ4XS, MINS_NONE)

// The 2-bit planes (Q2_K's codes, Q3_K's low bits): kspread2's shifts
// (signed bytes: right where negative) bring a group's eight bytes of
// 2-bit fields, in both halves of a register, to bits 0..1 of the even
// inputs' bytes (right 0, then 4) and of the odd ones' (right 2, then 6).
DATA kspread2<>+0(SB)/8, $0x0000000000000000
DATA kspread2<>+8(SB)/8, $0xfcfcfcfcfcfcfcfc
DATA kspread2<>+16(SB)/8, $0xfefefefefefefefe
DATA kspread2<>+24(SB)/8, $0xfafafafafafafafa
GLOBL kspread2<>(SB), RODATA|NOPTR, $32

// LOW2K(SE, SO): a group's eight bytes of 2-bit fields (R0) as the even
// inputs' codes in V27 and the odd ones' in V26 (values 0..3), with
// kspread2's halves in SE and SO; V14, V15 scratch.
#define LOW2K(SE, SO) \
	FMOVD.P 8(R0), F14 \
	VDUP V14.D[0], V14.D2 \
	VMOVI $3, V15.B16 \
	USHL16B(SE, 14, 27) \
	VAND V15.B16, V27.B16, V27.B16 \
	USHL16B(SO, 14, 26) \
	VAND V15.B16, V26.B16, V26.B16

// UNPACK_Q3K: the 2-bit plane (kspread2 in V4, V5), then the word of third
// bits as 4 (FIFTHBITS, as Q5_K's fifth: V10, V28, V29 its
// constants, V30 the bytes 4), less 4, signed.
#define UNPACK_Q3K \
	LOW2K(4, 5) \
	FIFTHBITS(V27, V26, V12, V13, V10, V28, V29, V30) \
	VSUB V30.B16, V27.B16, V27.B16 \
	VSUB V30.B16, V26.B16, V26.B16 \
	SWIDEN

// UNPACK_Q2K: the 2-bit codes (kspread2 in V10, V28).
#define UNPACK_Q2K \
	LOW2K(10, 28) \
	WIDEN

// SCALES_Q3K: a Q3_K super-block's f16 d (R9) and its 12 bytes of 6-bit
// factors (R10, dtype.Q3KScales), less 32, to V6..V9 as int32; f32(d·D)
// to V11. Factor j's low four bits are the low (j < 8) or high nibble of
// byte j%8; its top two are bits 2·(j/4)..+1 of byte 8 + j%4, so that
// shifting bytes 8..11 right by 0, 2, 4 and 6 gives factors 0..3, 4..7,
// 8..11 and 12..15's.
#define SCALES_Q3K \
	MOVHU.P 2(R9), R19 \
	FMOVS R19, F24 \
	FCVTL4S(24, 24) \
	FMOVS.P 4(R12), F25 \
	FMULS F25, F24, F11 \
	MOVD (R10), R19 \
	MOVWU 8(R10), R20 \
	ADD $12, R10 \
	AND $0x0f0f0f0f0f0f0f0f, R19, R21 \
	LSR $4, R19, R22 \
	AND $0x0f0f0f0f0f0f0f0f, R22, R22 \
	ANDW $0x03030303, R20, R23 \
	LSRW $2, R20, R24 \
	ANDW $0x03030303, R24, R24 \
	ORR R24<<32, R23, R23 \
	LSRW $4, R20, R24 \
	ANDW $0x03030303, R24, R24 \
	LSRW $6, R20, R25 \
	ANDW $0x03030303, R25, R25 \
	ORR R25<<32, R24, R24 \
	ORR R23<<4, R21, R21 \
	ORR R24<<4, R22, R22 \
	VMOV R21, V24.D[0] \
	VMOV R22, V24.D[1] \
	VMOVI $32, V25.B16 \
	VSUB V25.B16, V24.B16, V24.B16 \
	FACTORS16

// SCALES_Q2K: a Q2_K super-block (R9): f16 d and dmin, then a byte a half
// group, its factor (low nibble) and min (high). The factors to V6..V9 as
// int32 and f32(d·D) to V11, as the others'; the mins' terms
// −f32(f32(dmin·m)·hsum) of halves 0..7, then 8..15, added to V4, V5
// (macc's lanes h%8), the halves' sums at R13 (QRow.Halves).
#define SCALES_Q2K \
	FMOVS (R9), F24 \
	FCVTL4S(24, 24) \
	FMOVS.P 4(R12), F25 \
	FMULS F25, F24, F11 \
	ADD $4, R9, R19 \
	VLD1 (R19), [V26.B16] \
	ADD $20, R9 \
	VAND V31.B16, V26.B16, V27.B16 \
	VUSHR $4, V26.B16, V26.B16 \
	UWIDEN16S(V27, V6, V7, V8, V9) \
	UWIDEN16S(V26, V16, V17, V18, V19) \
	UCVTF4S(16, 16) \
	UCVTF4S(17, 17) \
	UCVTF4S(18, 18) \
	UCVTF4S(19, 19) \
	FMULE4S(24, 1, 16, 16) \
	FMULE4S(24, 1, 17, 17) \
	FMULE4S(24, 1, 18, 18) \
	FMULE4S(24, 1, 19, 19) \
	VLD1.P 64(R13), [V20.S4, V21.S4, V22.S4, V23.S4] \
	FMUL4S(20, 16, 16) \
	FMUL4S(21, 17, 17) \
	FMUL4S(22, 18, 18) \
	FMUL4S(23, 19, 19) \
	FSUB4S(16, 4, 4) \
	FSUB4S(17, 5, 5) \
	FSUB4S(18, 4, 4) \
	FSUB4S(19, 5, 5)

// func dotBlocksQ3_KNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ3_KNEON(SB), NOSPLIT, $0-72
	MOVD $kspread2<>(SB), R15
	VLD1 (R15), [V4.B16, V5.B16]
	FIFTH_CONSTS(V10, V28, V29)
	VMOVI $4, V30.B16
	KROWS(SETUP_Q6K, SCALES_Q3K, UNPACK_Q3K, MINS_NONE)

// func dotBlocksQ2_KNEON(codes, scales *uint32, sstride int, xq *int16, kd, sums *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ2_KNEON(SB), NOSPLIT, $0-72
	MOVD $kspread2<>(SB), R15
	VLD1.P 16(R15), [V10.B16]
	VLD1 (R15), [V28.B16]
	KROWS(SETUP_K4, SCALES_Q2K, UNPACK_Q2K, MINS_K4)
