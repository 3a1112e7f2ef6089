//go:build !purego

#include "textflag.h"
#include "neon_arm64.h"

// The NEON twins of dotQ4Go, for one row and for two rows that share each
// unpacked weight group. A group's 16 code bytes become 16 low nibbles (its
// even inputs) and 16 high ones (its odd inputs), each widened to int16;
// SMULL multiplies even nibbles with even inputs (laid out by CodeIndex)
// and SMLAL adds the odd ones, so that lane i holds the exact sum of inputs
// 2i and 2i+1, and ADDP pairs those into the twin's 8 int32 lanes (lane k:
// inputs 4k..4k+3). Each lane is converted, scaled by f32(s·d) and added
// to its accumulator; even and odd groups have their own accumulators, as
// in the twin. The min terms f32(m·sum) accumulate in lanes 1 (even
// groups) and 3 (odd groups) of one register, beside the products s·d in
// lanes 0 and 2.
//
// The dot-product extension (SDOT, UDOT) is not used, even where the CPU
// has it: it multiplies int8 by int8, and the activations are int16. A
// 16-bit code would have to be split into an unsigned low byte (UDOT) and
// a signed high byte (SDOT, then shifted by 8); splitting the codes in the
// loop costs more shuffles than SMLAL's widening saves, and storing them
// split would change QRow's layout, which the amd64 kernels share.

// UNPACK splits the 16 code bytes in B into the widened low nibbles W0
// (even inputs 0..14) and W1 (16..30), and the high nibbles W2 (odd inputs
// 1..15) and W3 (17..31). V31 holds the nibble mask.
#define UNPACK(B, W0, W1, W2, W3) \
	VAND V31.B16, B.B16, W0.B16 \
	VUSHR $4, B.B16, W2.B16 \
	VUXTL2 W0.B16, W1.H8 \
	VUXTL W0.B8, W0.H8 \
	VUXTL2 W2.B16, W3.H8 \
	VUXTL W2.B8, W2.H8

// func dotQ4NEON(codes, scales *uint32, xq *int16, ds *float32, groups int) float32
TEXT ·dotQ4NEON(SB), NOSPLIT, $0-44
	MOVD codes+0(FP), R0
	MOVD scales+8(FP), R1
	MOVD xq+16(FP), R2
	MOVD ds+24(FP), R3
	MOVD groups+32(FP), R4
	VMOVI $15, V31.B16
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	LSR $1, R4, R5
	CBZ R5, single

pair:
	// [s0, m0, s1, m1] · [d0, sum0, d1, sum1]: s·d in lanes 0 and 2.
	FMOVD.P 8(R1), F20
	FCVTL4S(20, 20)
	VLD1.P 16(R3), [V21.S4]
	FMUL4S(21, 20, 20)
	FADD4S(20, 4, 4)
	// A pair's codes: the even inputs of both groups, then the odd ones.
	VLD1.P 32(R0), [V16.B16, V17.B16]
	VLD1.P 64(R2), [V12.H8, V13.H8, V14.H8, V15.H8]
	VLD1.P 64(R2), [V24.H8, V25.H8, V26.H8, V27.H8]
	UNPACK(V16, V8, V9, V10, V11)
	GROUP(8, 9, 10, 11, 12, 13, 24, 25, 20, 0, 0, 1)
	UNPACK(V17, V8, V9, V10, V11)
	GROUP(8, 9, 10, 11, 14, 15, 26, 27, 20, 2, 2, 3)
	SUB $1, R5
	CBNZ R5, pair

single:
	// A last group without a partner: an even group, its even inputs,
	// then its odd ones.
	TBZ $0, R4, done
	FMOVS (R1), F20
	FCVTL4S(20, 20)
	FMOVD (R3), F21
	FMUL4S(21, 20, 20)
	FADD4S(20, 4, 4)
	VLD1 (R0), [V16.B16]
	VLD1 (R2), [V12.H8, V13.H8, V14.H8, V15.H8]
	UNPACK(V16, V8, V9, V10, V11)
	GROUP(8, 9, 10, 11, 12, 13, 14, 15, 20, 0, 0, 1)

done:
	FINISH(0, 1, 2, 3, 4, 5)
	FMOVS F0, ret+40(FP)
	RET

// func dotQ4x2NEON(codes, scales *uint32, groups int, xa, xb *int16, da, db *float32, out *[2]float32)
//
// Rows a and b: accumulators V0..V3 and min terms V4 for a, V5..V8 and V9
// for b; each group's nibbles are unpacked once (V10..V13) for both, and
// each row's codes of the group are loaded beside them (V24..V27).
TEXT ·dotQ4x2NEON(SB), NOSPLIT, $0-64
	MOVD codes+0(FP), R0
	MOVD scales+8(FP), R1
	MOVD groups+16(FP), R4
	MOVD xa+24(FP), R2
	MOVD xb+32(FP), R6
	MOVD da+40(FP), R3
	MOVD db+48(FP), R7
	VMOVI $15, V31.B16
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	LSR $1, R4, R5
	CBZ R5, single2

pair2:
	FMOVD.P 8(R1), F20
	FCVTL4S(20, 20)
	VLD1.P 16(R3), [V21.S4]
	FMUL4S(21, 20, 22)
	FADD4S(22, 4, 4)
	VLD1.P 16(R7), [V21.S4]
	FMUL4S(21, 20, 23)
	FADD4S(23, 9, 9)
	VLD1.P 32(R0), [V16.B16, V17.B16]
	UNPACK(V16, V10, V11, V12, V13)
	FLDPQ (R2), (F24, F25)
	FLDPQ 64(R2), (F26, F27)
	GROUP(10, 11, 12, 13, 24, 25, 26, 27, 22, 0, 0, 1)
	FLDPQ (R6), (F24, F25)
	FLDPQ 64(R6), (F26, F27)
	GROUP(10, 11, 12, 13, 24, 25, 26, 27, 23, 0, 5, 6)
	UNPACK(V17, V10, V11, V12, V13)
	FLDPQ 32(R2), (F24, F25)
	FLDPQ 96(R2), (F26, F27)
	GROUP(10, 11, 12, 13, 24, 25, 26, 27, 22, 2, 2, 3)
	FLDPQ 32(R6), (F24, F25)
	FLDPQ 96(R6), (F26, F27)
	GROUP(10, 11, 12, 13, 24, 25, 26, 27, 23, 2, 7, 8)
	ADD $128, R2
	ADD $128, R6
	SUB $1, R5
	CBNZ R5, pair2

single2:
	TBZ $0, R4, done2
	FMOVS (R1), F20
	FCVTL4S(20, 20)
	FMOVD (R3), F21
	FMUL4S(21, 20, 22)
	FADD4S(22, 4, 4)
	FMOVD (R7), F21
	FMUL4S(21, 20, 23)
	FADD4S(23, 9, 9)
	VLD1 (R0), [V16.B16]
	UNPACK(V16, V10, V11, V12, V13)
	VLD1 (R2), [V24.H8, V25.H8, V26.H8, V27.H8]
	GROUP(10, 11, 12, 13, 24, 25, 26, 27, 22, 0, 0, 1)
	VLD1 (R6), [V24.H8, V25.H8, V26.H8, V27.H8]
	GROUP(10, 11, 12, 13, 24, 25, 26, 27, 23, 0, 5, 6)

done2:
	MOVD out+56(FP), R8
	FINISH(0, 1, 2, 3, 4, 14)
	FINISH(5, 6, 7, 8, 9, 14)
	FMOVS F0, 0(R8)
	FMOVS F5, 4(R8)
	RET
