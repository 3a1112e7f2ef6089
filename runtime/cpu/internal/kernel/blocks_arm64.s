//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// The NEON products of the block types with one scale a group and no
// mins (Q4_0, Q5_0, Q8_0, IQ4_NL: f16; MXFP4: E8M0): dotBlocksGo, bit for bit, with int4's
// group product (GROUP, as dotQ4NEON): a group's codes as int16, its even
// inputs' and odd ones' apart, meet the activations' codes in SMULL/SMLAL,
// ADDP leaves the twin's eight lanes (lane k: inputs 4k..4k+3), and each
// is scaled by f32(S·d) (S the group's f16 scale, d its activations') and
// added to the accumulators of the even groups (V0, V1) or of the odd
// ones (V2, V3). The mins' register (V4) stays 0, whose fold the twin adds.
//
// Registers: R0 codes, R1 the next row's scale words, R2 sstride, R3 xq,
// R4 ds, R6 groups, R7 rows, R8 out; per row R9 its scale words, R11 the
// activations' codes, R12 their ds, R13 pairs left. V8..V11 a group's
// codes (GROUP's W0..W3), V12..V15 and V24..V27 a pair's activations,
// V16, V17 code bytes, V20 the pair's f32(S·d) in lanes 0 and 2, V31 the
// nibble mask; V6, V7, V22, V23, V30 per type.

// LWIDEN: a group's even inputs' codes in E and odd ones' in O (signed
// bytes) to V8..V11 as int16.
#define LWIDEN(E, O) \
	SXTL8H(E, 8) \
	SXTL28H(E, 9) \
	SXTL8H(O, 10) \
	SXTL28H(O, 11)

// NIBBLES: a group's 16 code bytes (R0), low nibble an even input, to
// V17 (even) and V16 (odd).
#define NIBBLES \
	VLD1.P 16(R0), [V16.B16] \
	VAND V31.B16, V16.B16, V17.B16 \
	VUSHR $4, V16.B16, V16.B16

// Q4_0: the nibbles less 8 (V30).
#define UNPACK_Q4_0 \
	NIBBLES \
	VSUB V30.B16, V17.B16, V17.B16 \
	VSUB V30.B16, V16.B16, V16.B16 \
	LWIDEN(17, 16)

// Q5_0: the nibbles and the fifth bits (FIFTHBITS: V22, V23, V6 its
// constants), less 16 (V30).
#define UNPACK_Q5_0 \
	NIBBLES \
	FIFTHBITS(V17, V16, V18, V19, V22, V23, V6, V30) \
	VSUB V30.B16, V17.B16, V17.B16 \
	VSUB V30.B16, V16.B16, V16.B16 \
	LWIDEN(17, 16)

// Q8_0: 16 int8 codes of the even inputs, then 16 of the odd ones.
#define UNPACK_Q8_0 \
	VLD1.P 32(R0), [V16.B16, V17.B16] \
	LWIDEN(16, 17)

// IQ4_NL and MXFP4: the nibbles index the codebook's 16 int8 levels
// (V30).
#define UNPACK_IQ4_NL \
	NIBBLES \
	VTBL V17.B16, [V30.B16], V17.B16 \
	VTBL V16.B16, [V30.B16], V16.B16 \
	LWIDEN(17, 16)

// SCALES_F16: a pair's f16 scales (a word, R9) times their activations'
// d (R12: d, sum, d, sum) to lanes 0 and 2 of V20; SCALE_F16 a lone
// group's to lane 0.
#define SCALES_F16 \
	FMOVS.P 4(R9), F20 \
	FCVTL4S(20, 20) \
	VZIP1 V20.S4, V20.S4, V20.S4 \
	VLD1.P 16(R12), [V21.S4] \
	FMUL4S(21, 20, 20)
#define SCALE_F16 \
	FMOVS (R9), F20 \
	FCVTL4S(20, 20) \
	FMOVD (R12), F21 \
	FMUL4S(21, 20, 20)

// E8M0(R): MXFP4's scale byte in R to its f32 bits (dtype's e8m0Half:
// 2^(e-128), (e-1)<<23, and below e = 2 the subnormals 0x00200000<<e).
#define E8M0(R) \
	SUBW $1, R, R21 \
	LSLW $23, R21, R21 \
	MOVW $0x00200000, R22 \
	LSLW R, R22, R22 \
	CMPW $2, R \
	CSELW LO, R22, R21, R

// SCALES_E8M0: a pair's two E8M0 bytes (R9, four groups a word) as
// SCALES_F16 leaves f16 ones; SCALE_E8M0 a lone group's.
#define SCALES_E8M0 \
	MOVBU.P 1(R9), R19 \
	MOVBU.P 1(R9), R20 \
	E8M0(R19) \
	E8M0(R20) \
	VMOV R19, V20.S[0] \
	VMOV R19, V20.S[1] \
	VMOV R20, V20.S[2] \
	VMOV R20, V20.S[3] \
	VLD1.P 16(R12), [V21.S4] \
	FMUL4S(21, 20, 20)
#define SCALE_E8M0 \
	MOVBU (R9), R19 \
	E8M0(R19) \
	VMOV R19, V20.S[0] \
	FMOVD (R12), F21 \
	FMUL4S(21, 20, 20)

// LROWS: the row loop of one type, UNPACK a group's codes, SCALES a
// pair's scales and SCALE a lone group's.
#define LROWS(UNPACK, SCALES, SCALE) \
	MOVD codes+0(FP), R0 \
	MOVD scales+8(FP), R1 \
	MOVD sstride+16(FP), R2 \
	MOVD xq+24(FP), R3 \
	MOVD ds+32(FP), R4 \
	MOVD groups+48(FP), R6 \
	MOVD rows+56(FP), R7 \
	MOVD out+64(FP), R8 \
	VMOVI $15, V31.B16 \
lrow: \
	MOVD R1, R9 \
	ADD R2, R1, R1 \
	MOVD R3, R11 \
	MOVD R4, R12 \
	LSR $1, R6, R13 \
	VEOR V0.B16, V0.B16, V0.B16 \
	VEOR V1.B16, V1.B16, V1.B16 \
	VEOR V2.B16, V2.B16, V2.B16 \
	VEOR V3.B16, V3.B16, V3.B16 \
	VEOR V4.B16, V4.B16, V4.B16 \
	CBZ R13, lsingle \
lpair: \
	SCALES \
	VLD1.P 64(R11), [V12.H8, V13.H8, V14.H8, V15.H8] \
	VLD1.P 64(R11), [V24.H8, V25.H8, V26.H8, V27.H8] \
	UNPACK \
	GROUP(8, 9, 10, 11, 12, 13, 24, 25, 20, 0, 0, 1) \
	UNPACK \
	GROUP(8, 9, 10, 11, 14, 15, 26, 27, 20, 2, 2, 3) \
	SUBS $1, R13, R13 \
	BNE lpair \
lsingle: \
	TBZ $0, R6, ldone \
	SCALE \
	VLD1 (R11), [V12.H8, V13.H8, V14.H8, V15.H8] \
	UNPACK \
	GROUP(8, 9, 10, 11, 12, 13, 14, 15, 20, 0, 0, 1) \
ldone: \
	FINISH(0, 1, 2, 3, 4, 5) \
	FMOVS.P F0, 4(R8) \
	SUBS $1, R7, R7 \
	BNE lrow \
	RET

// func dotBlocksQ4_0NEON(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ4_0NEON(SB), NOSPLIT, $0-72
	VMOVI $8, V30.B16
	LROWS(UNPACK_Q4_0, SCALES_F16, SCALE_F16)

// func dotBlocksQ5_0NEON(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ5_0NEON(SB), NOSPLIT, $0-72
	FIFTH_CONSTS(V22, V23, V6)
	VMOVI $16, V30.B16
	LROWS(UNPACK_Q5_0, SCALES_F16, SCALE_F16)

// func dotBlocksQ8_0NEON(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ8_0NEON(SB), NOSPLIT, $0-72
	LROWS(UNPACK_Q8_0, SCALES_F16, SCALE_F16)

// func dotBlocksIQ4_NLNEON(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, book *[16]int8)
TEXT ·dotBlocksIQ4_NLNEON(SB), NOSPLIT, $0-80
	MOVD book+72(FP), R15
	VLD1 (R15), [V30.B16]
	LROWS(UNPACK_IQ4_NL, SCALES_F16, SCALE_F16)

// func dotBlocksMXFP4NEON(codes, scales *uint32, sstride int, xq *int16, ds, hs *float32, groups, rows int, out *float32, book *[16]int8)
TEXT ·dotBlocksMXFP4NEON(SB), NOSPLIT, $0-80
	MOVD book+72(FP), R15
	VLD1 (R15), [V30.B16]
	LROWS(UNPACK_IQ4_NL, SCALES_E8M0, SCALE_E8M0)
