// NEON instructions that Go's arm64 assembler does not spell, as the WORDs
// of their encodings (Arm ARM, "Advanced SIMD"), and the folds the NEON
// kernels share. Operands are register numbers (0..31, the V registers) in
// Go's order: sources first, destination last, so that FMUL4S(m, n, d) is
// d = n·m as Go's own VFMLA or VADD would read. Every float operation here
// rounds once: there is no fused multiply-add, so each step rounds as the
// Go twins' float32(a*b) + c does.

// FADD4S: d.4S = n.4S + m.4S. FADD2S: the low two lanes only.
#define FADD4S(m, n, d) WORD $(0x4E20D400 | (m)<<16 | (n)<<5 | (d))
#define FADD2S(m, n, d) WORD $(0x0E20D400 | (m)<<16 | (n)<<5 | (d))

// FMUL4S: d.4S = n.4S · m.4S. FMULE4S: d.4S = n.4S · m.S[i], i in 0..3.
#define FMUL4S(m, n, d) WORD $(0x6E20DC00 | (m)<<16 | (n)<<5 | (d))
#define FMULE4S(m, i, n, d) WORD $(0x4F809000 | ((i)&1)<<21 | (m)<<16 | ((i)>>1)<<11 | (n)<<5 | (d))

// FADDS: scalar d.S = n.S + m.S. FADDP2S: scalar d.S = n.S[0] + n.S[1].
#define FADDS(m, n, d) WORD $(0x1E202800 | (m)<<16 | (n)<<5 | (d))
#define FADDP2S(n, d) WORD $(0x7E30D800 | (n)<<5 | (d))

// FABS4S, FMAX4S (IEEE maxNum is not used: FMAX propagates NaN, as Go's
// max does), FMAXV4S (scalar d.S = the largest lane of n).
#define FABS4S(n, d) WORD $(0x4EA0F800 | (n)<<5 | (d))
#define FMAX4S(m, n, d) WORD $(0x4E20F400 | (m)<<16 | (n)<<5 | (d))
#define FMAXV4S(n, d) WORD $(0x6E30F800 | (n)<<5 | (d))

// SCVTF4S: int32 lanes to f32, rounding to nearest even (FPCR's mode, which
// Go leaves at its default), as Go's float32(int32) does. FCVTNS4S: f32
// lanes to int32, rounding to nearest with ties to even (math.RoundToEven),
// saturating.
#define SCVTF4S(n, d) WORD $(0x4E21D800 | (n)<<5 | (d))
#define FCVTNS4S(n, d) WORD $(0x4E21A800 | (n)<<5 | (d))

// FCVTL4S widens the low four halves of n to f32 lanes, FCVTL24S the high
// four: exactly (every half is a float32), like dtype.HalfValue.
#define FCVTL4S(n, d) WORD $(0x0E217800 | (n)<<5 | (d))
#define FCVTL24S(n, d) WORD $(0x4E217800 | (n)<<5 | (d))

// SMULL4S: d.4S = n.4H · m.4H (int16 × int16 → exact int32, low four
// lanes); SMULL24S the high four. SMLAL4S and SMLAL24S add the products to
// d instead. ADDP4S: d.4S = pairwise sums of n (lanes 0, 1) then m (2, 3).
#define SMULL4S(m, n, d) WORD $(0x0E60C000 | (m)<<16 | (n)<<5 | (d))
#define SMULL24S(m, n, d) WORD $(0x4E60C000 | (m)<<16 | (n)<<5 | (d))
#define SMLAL4S(m, n, d) WORD $(0x0E608000 | (m)<<16 | (n)<<5 | (d))
#define SMLAL24S(m, n, d) WORD $(0x4E608000 | (m)<<16 | (n)<<5 | (d))
#define ADDP4S(m, n, d) WORD $(0x4EA0BC00 | (m)<<16 | (n)<<5 | (d))

// FSUB4S: d.4S = n.4S - m.4S. FCMGT4S: d = all ones where n > m (ordered),
// FCMEQ4S where n == m (so FCMEQ4S(x, x, d) marks the lanes that are not
// NaN). FCVTZS4S: f32 lanes to int32, toward zero, as Go's int32(float32)
// does in range. CMGT4S, ADD4S: signed int32 lanes, d = n > m, d = n + m.
// SHL4S23: d = n << 23 per int32 lane.
#define FSUB4S(m, n, d) WORD $(0x4EA0D400 | (m)<<16 | (n)<<5 | (d))
#define FCMGT4S(m, n, d) WORD $(0x6EA0E400 | (m)<<16 | (n)<<5 | (d))
#define FCMEQ4S(m, n, d) WORD $(0x4E20E400 | (m)<<16 | (n)<<5 | (d))
#define FCVTZS4S(n, d) WORD $(0x4EA1B800 | (n)<<5 | (d))
#define CMGT4S(m, n, d) WORD $(0x4EA03400 | (m)<<16 | (n)<<5 | (d))
#define ADD4S(m, n, d) WORD $(0x4EA08400 | (m)<<16 | (n)<<5 | (d))
#define SHL4S23(n, d) WORD $(0x4F375400 | (n)<<5 | (d))

// Bitwise, on all 128 bits: AND16B, ORR16B: d = n & m, n | m; BIC16B:
// d = n &^ m; BIT16B: d takes n's bits where m is set, BIF16B where m is
// clear (a lane select by a compare's mask).
#define AND16B(m, n, d) WORD $(0x4E201C00 | (m)<<16 | (n)<<5 | (d))
#define ORR16B(m, n, d) WORD $(0x4EA01C00 | (m)<<16 | (n)<<5 | (d))
#define BIC16B(m, n, d) WORD $(0x4E601C00 | (m)<<16 | (n)<<5 | (d))
#define BIT16B(m, n, d) WORD $(0x6EA01C00 | (m)<<16 | (n)<<5 | (d))
#define BIF16B(m, n, d) WORD $(0x6EE01C00 | (m)<<16 | (n)<<5 | (d))

// DUPD1: d.2D = both lanes n.D[1] (the high half of n in d's low half).
// DUPS1: scalar d.S = n.S[1].
#define DUPD1(n, d) WORD $(0x4E180400 | (n)<<5 | (d))
#define DUPS1(n, d) WORD $(0x5E0C0400 | (n)<<5 | (d))

// HSUM8 leaves in lane 0 of L the fold ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))
// of the eight lanes a0..a3 in L and a4..a7 in H (T is scratch): the fold
// of a 256-bit register in halves that the twins spell out.
#define HSUM8(L, H, T) \
	FADD4S(H, L, L) \
	DUPD1(L, T) \
	FADD2S(T, L, L) \
	FADDP2S(L, L)

// FOLD32 leaves in lane 0 of R0 the fold dotF32Go spells out of 32 lanes
// in eight registers, lanes 4i..4i+3 in A_i: an AVX register r_m is the
// pair A_2m, A_2m+1, and the registers are folded as (r0+r1) + (r2+r3),
// then in halves (HSUM8). R1 and T are scratch; R0 and R1 may be A0, A1.
#define FOLD32(A0, A1, A2, A3, A4, A5, A6, A7, R0, R1, T) \
	FADD4S(A2, A0, R0) \
	FADD4S(A6, A4, T) \
	FADD4S(T, R0, R0) \
	FADD4S(A3, A1, R1) \
	FADD4S(A7, A5, T) \
	FADD4S(T, R1, R1) \
	HSUM8(R0, R1, T)

// Registers the group products use as scratch.
#define P0 18
#define P1 19
#define P2 28
#define P3 29

// GROUP adds one group to accumulators A0 (lanes 0..3) and A1 (4..7): its
// widened nibbles in W0..W3 (UNPACK), its even inputs' codes in E0, E1 and
// odd ones' in O0, O1, its scale s·d in lane I of SD.
#define GROUP(W0, W1, W2, W3, E0, E1, O0, O1, SD, I, A0, A1) \
	SMULL4S(E0, W0, P0) \
	SMLAL4S(O0, W2, P0) \
	SMULL24S(E0, W0, P1) \
	SMLAL24S(O0, W2, P1) \
	ADDP4S(P1, P0, P0) \
	SMULL4S(E1, W1, P2) \
	SMLAL4S(O1, W3, P2) \
	SMULL24S(E1, W1, P3) \
	SMLAL24S(O1, W3, P3) \
	ADDP4S(P3, P2, P2) \
	SCVTF4S(P0, P0) \
	SCVTF4S(P2, P2) \
	FMULE4S(SD, I, P0, P0) \
	FMULE4S(SD, I, P2, P2) \
	FADD4S(P0, A0, A0) \
	FADD4S(P2, A1, A1)

// FINISH leaves in lane 0 of A0 the twin's result from the even groups'
// accumulators A0, A1, the odd groups' A2, A3 and the min terms in lanes
// 1 and 3 of M: ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) + (m1+m3). T is
// scratch; M is clobbered.
#define FINISH(A0, A1, A2, A3, M, T) \
	FADD4S(A2, A0, A0) \
	FADD4S(A3, A1, A1) \
	HSUM8(A0, A1, T) \
	DUPD1(M, T) \
	FADD2S(T, M, M) \
	DUPS1(M, M) \
	FADDS(M, A0, A0)

// MUL4S: d.4S = n.4S · m.4S (int32, low 32 bits). UCVTF4S: uint32 lanes
// to f32. USHL16B: d.16B = n.16B shifted left by m's signed byte (right
// where negative). CMTST16B: d = all ones where n & m is not 0. TBL16B:
// d.16B = n.16B[m's bytes]. SXTL8H, SXTL28H: the low (high) eight int8 of
// n as int16; SXTL4S, SXTL24S: the low (high) four int16 as int32.
#define MUL4S(m, n, d) WORD $(0x4EA09C00 | (m)<<16 | (n)<<5 | (d))
#define UCVTF4S(n, d) WORD $(0x6E21D800 | (n)<<5 | (d))
#define USHL16B(m, n, d) WORD $(0x6E204400 | (m)<<16 | (n)<<5 | (d))
#define CMTST16B(m, n, d) WORD $(0x4E208C00 | (m)<<16 | (n)<<5 | (d))
#define TBL16B(m, n, d) WORD $(0x4E000000 | (m)<<16 | (n)<<5 | (d))
#define SXTL8H(n, d) WORD $(0x0F08A400 | (n)<<5 | (d))
#define SXTL28H(n, d) WORD $(0x4F08A400 | (n)<<5 | (d))
#define SXTL4S(n, d) WORD $(0x0F10A400 | (n)<<5 | (d))
#define SXTL24S(n, d) WORD $(0x4F10A400 | (n)<<5 | (d))

// FIFTH_CONSTS sets the constants FIFTHBITS reads: IE, IO the byte of a
// group's word of fifth bits (bit k: even input 2k, bit 16+k: odd input
// 2k+1) that lane k of the even (odd) inputs' vector takes, k/8 (2 + k/8),
// and BIT the bit it tests, k%8. R15 is scratch.
#define FIFTH_CONSTS(IE, IO, BIT) \
	VEOR IE.B16, IE.B16, IE.B16 \
	MOVD $0x0101010101010101, R15 \
	VMOV R15, IE.D[1] \
	MOVD $0x0202020202020202, R15 \
	VMOV R15, IO.D[0] \
	MOVD $0x0303030303030303, R15 \
	VMOV R15, IO.D[1] \
	MOVD $0x8040201008040201, R15 \
	VDUP R15, BIT.D2

// FIFTHBITS adds a group's fifth bits (its next code word, at R0) as 16
// to its even inputs' code bytes in E and its odd ones' in O; T and U are
// scratch, SIXTEEN holds the bytes 16.
#define FIFTHBITS(E, O, T, U, IE, IO, BIT, SIXTEEN) \
	MOVWU.P 4(R0), R15 \
	VDUP R15, T.S4 \
	VTBL IE.B16, [T.B16], U.B16 \
	VCMTST BIT.B16, U.B16, U.B16 \
	VAND SIXTEEN.B16, U.B16, U.B16 \
	VORR U.B16, E.B16, E.B16 \
	VTBL IO.B16, [T.B16], U.B16 \
	VCMTST BIT.B16, U.B16, U.B16 \
	VAND SIXTEEN.B16, U.B16, U.B16 \
	VORR U.B16, O.B16, O.B16
