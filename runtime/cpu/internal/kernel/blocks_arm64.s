//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// The NEON products of the block types with one scale a group and no
// mins (Q4_0, Q5_0, Q8_0, IQ4_NL: f16; MXFP4: E8M0): dotBlocksGo, bit for
// bit: a group's codes as int16, its even inputs' and odd ones' apart,
// meet the activations' codes in SMULL/SMLAL, whose lanes pairwise adds
// (ADDP) bring to one integer sum a group, four groups a vector; each is
// scaled by f32(S·d) (S the group's scale, d its activations') and added
// to the accumulator of its group's place in its chunk of eight (V0 for
// 0..3, V1 for 4..7). The twin adds the fold of the mins' lanes, zeros
// here: +0, which leaves the fold's bits.
//
// Registers: R0 codes, R1 the next row's scale words, R2 sstride, R3 xq,
// R4 ds, R6 groups, R7 rows, R8 out; per row R9 its scale words, R11 the
// activations' codes, R12 their ds, R13 groups left, R14 which
// accumulator a last chunk's last groups go to. V8..V11 a group's codes
// (GSG's W0..W3), V12..V15 and V24..V27 a pair's activations, V16, V17
// code bytes, V20 a pair's f32(S·d) in lanes 0 and 2 (V4 the first pair's
// of four groups), V2, V3, V5 sums, V31 the nibble mask; V6, V7, V22,
// V23, V30 per type.

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

// GSG(W0, W1, W2, W3, E0, E1, O0, O1, S): a group's integer products
// (its codes widened in W0..W3, the activations' even inputs in E0, E1
// and odd ones in O0, O1) to S's four lanes, whose sum is the group's.
#define GSG(W0, W1, W2, W3, E0, E1, O0, O1, S) \
	SMULL4S(E0, W0, P0) \
	SMLAL4S(O0, W2, P0) \
	SMULL24S(E0, W0, P1) \
	SMLAL24S(O0, W2, P1) \
	ADD4S(P1, P0, P0) \
	SMULL4S(E1, W1, P2) \
	SMLAL4S(O1, W3, P2) \
	SMULL24S(E1, W1, P3) \
	SMLAL24S(O1, W3, P3) \
	ADD4S(P3, P2, P2) \
	ADD4S(P2, P0, S)

// UZP14S: d.4S = lanes 0 and 2 of n, then of m.
#define UZP14S(m, n, d) WORD $(0x4E801800 | (m)<<16 | (n)<<5 | (d))

// GPAIR(SCALES, UNPACK, T): a pair's sums, each group's four lanes added
// pairwise, to T (the even group's in lanes 0, 1, the odd one's in 2,
// 3), its f32(S·d) to lanes 0 and 2 of V20 (which the caller keeps in V4
// for the first pair of four groups).
#define GPAIR(SCALES, UNPACK, T) \
	SCALES \
	VLD1.P 64(R11), [V12.H8, V13.H8, V14.H8, V15.H8] \
	VLD1.P 64(R11), [V24.H8, V25.H8, V26.H8, V27.H8] \
	UNPACK \
	GSG(8, 9, 10, 11, 12, 13, 24, 25, 2) \
	UNPACK \
	GSG(8, 9, 10, 11, 14, 15, 26, 27, 3) \
	ADDP4S(3, 2, T)

// GLONE(SCALE, UNPACK, T): a lone last group's lane sums added pairwise
// to T (lanes 0, 1; 2, 3 zero), its f32(S·d) to lane 0 of V20.
#define GLONE(SCALE, UNPACK, T) \
	VEOR V20.B16, V20.B16, V20.B16 \
	SCALE \
	VLD1 (R11), [V12.H8, V13.H8, V14.H8, V15.H8] \
	UNPACK \
	GSG(8, 9, 10, 11, 12, 13, 14, 15, 2) \
	VEOR V3.B16, V3.B16, V3.B16 \
	ADDP4S(3, 2, T)

// GTERMS: four groups' sums (V5: the first pair's, V2: the second's) and
// their f32(S·d) (V4, V20) to the four terms f32(f32(S)·f32(s·d)) in V2.
#define GTERMS \
	ADDP4S(2, 5, 2) \
	SCVTF4S(2, 2) \
	UZP14S(20, 4, 3) \
	FMUL4S(3, 2, 2)

// GQUAD(SCALES, UNPACK): four whole groups (two pairs), their terms in V2.
#define GQUAD(SCALES, UNPACK) \
	GPAIR(SCALES, UNPACK, 5) \
	ORR16B(20, 20, 4) \
	GPAIR(SCALES, UNPACK, 2) \
	GTERMS

// LROWS: the row loop of one type, UNPACK a group's codes, SCALES a
// pair's scales and SCALE a lone group's: dotBlocksGo's group sums, four
// groups' terms a vector, a chunk's first four added to V0 (acc 0..3) and
// its last to V1 (acc 4..7), folded by HSUM8.
#define LROWS(UNPACK, SCALES, SCALE) \
	MOVD codes+0(FP), R0 \
	MOVD scales+8(FP), R1 \
	MOVD sstride+16(FP), R2 \
	MOVD xq+24(FP), R3 \
	MOVD ds+32(FP), R4 \
	MOVD groups+40(FP), R6 \
	MOVD rows+48(FP), R7 \
	MOVD out+56(FP), R8 \
	VMOVI $15, V31.B16 \
lrow: \
	MOVD R1, R9 \
	ADD R2, R1, R1 \
	MOVD R3, R11 \
	MOVD R4, R12 \
	MOVD R6, R13 \
	VEOR V0.B16, V0.B16, V0.B16 \
	VEOR V1.B16, V1.B16, V1.B16 \
lchunk: \
	CMP $8, R13 \
	BLT ltail \
	GQUAD(SCALES, UNPACK) \
	FADD4S(2, 0, 0) \
	GQUAD(SCALES, UNPACK) \
	FADD4S(2, 1, 1) \
	SUBS $8, R13, R13 \
	BNE lchunk \
	B ldone \
ltail: \
	MOVD $0, R14 \
	CMP $4, R13 \
	BLT lpart \
	GQUAD(SCALES, UNPACK) \
	FADD4S(2, 0, 0) \
	MOVD $1, R14 \
	SUBS $4, R13, R13 \
	BEQ ldone \
lpart: \
	CMP $2, R13 \
	BLT lpartlone \
	GPAIR(SCALES, UNPACK, 5) \
	ORR16B(20, 20, 4) \
	CMP $3, R13 \
	BLT lpartnone \
	GLONE(SCALE, UNPACK, 2) \
	B lpartterms \
lpartlone: \
	GLONE(SCALE, UNPACK, 5) \
	ORR16B(20, 20, 4) \
lpartnone: \
	VEOR V2.B16, V2.B16, V2.B16 \
	VEOR V20.B16, V20.B16, V20.B16 \
lpartterms: \
	GTERMS \
	CBNZ R14, lpartb \
	FADD4S(2, 0, 0) \
	B ldone \
lpartb: \
	FADD4S(2, 1, 1) \
ldone: \
	HSUM8(0, 1, 5) \
	FMOVS.P F0, 4(R8) \
	SUBS $1, R7, R7 \
	BNE lrow \
	RET

// func dotBlocksQ4_0NEON(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ4_0NEON(SB), NOSPLIT, $0-64
	VMOVI $8, V30.B16
	LROWS(UNPACK_Q4_0, SCALES_F16, SCALE_F16)

// func dotBlocksQ5_0NEON(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ5_0NEON(SB), NOSPLIT, $0-64
	FIFTH_CONSTS(V22, V23, V6)
	VMOVI $16, V30.B16
	LROWS(UNPACK_Q5_0, SCALES_F16, SCALE_F16)

// func dotBlocksQ8_0NEON(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32)
TEXT ·dotBlocksQ8_0NEON(SB), NOSPLIT, $0-64
	LROWS(UNPACK_Q8_0, SCALES_F16, SCALE_F16)

// func dotBlocksIQ4_NLNEON(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, book *[16]int8)
TEXT ·dotBlocksIQ4_NLNEON(SB), NOSPLIT, $0-72
	MOVD book+64(FP), R15
	VLD1 (R15), [V30.B16]
	LROWS(UNPACK_IQ4_NL, SCALES_F16, SCALE_F16)

// func dotBlocksMXFP4NEON(codes, scales *uint32, sstride int, xq *int16, ds *float32, groups, rows int, out *float32, book *[16]int8)
TEXT ·dotBlocksMXFP4NEON(SB), NOSPLIT, $0-72
	MOVD book+64(FP), R15
	VLD1 (R15), [V30.B16]
	LROWS(UNPACK_IQ4_NL, SCALES_E8M0, SCALE_E8M0)
