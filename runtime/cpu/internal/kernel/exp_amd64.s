//go:build !purego

#include "textflag.h"

// FOLDMAX leaves the largest of Y0's eight lanes in X0 (X2 its scratch).
#define FOLDMAX \
	VEXTRACTF128 $1, Y0, X2 \
	VMAXPS       X2, X0, X0 \
	VMOVHLPS     X0, X0, X2 \
	VMAXPS       X2, X0, X0 \
	VMOVSHDUP    X0, X2 \
	VMAXSS       X2, X0, X0

// Expf's constants, as float32 bits (and the integer exponent bias).
DATA expc<>+0(SB)/4, $0x3fb8aa3b  // log2e
DATA expc<>+4(SB)/4, $0x3f318000  // ln2hi
DATA expc<>+8(SB)/4, $0xb95e8083  // ln2lo
DATA expc<>+12(SB)/4, $0x39506967 // the polynomial, highest degree first
DATA expc<>+16(SB)/4, $0x3ab743ce
DATA expc<>+20(SB)/4, $0x3c088908
DATA expc<>+24(SB)/4, $0x3d2aa9c1
DATA expc<>+28(SB)/4, $0x3e2aaaaa
DATA expc<>+32(SB)/4, $0x3f000000 // 0.5: the last coefficient, and the rounding's half
DATA expc<>+36(SB)/4, $0x3f800000 // 1
DATA expc<>+40(SB)/4, $0x80000000 // the sign bit
DATA expc<>+44(SB)/4, $127        // the exponent bias, an integer
DATA expc<>+48(SB)/4, $0x42b17217 // 88.72283: above, +Inf
DATA expc<>+52(SB)/4, $0xc2aeac4f // -87.33654: below, 0
DATA expc<>+56(SB)/4, $0x7f800000 // +Inf
GLOBL expc<>(SB), RODATA|NOPTR, $60

// func expShiftAVX2(x *float32, m float32, n int)
// Expf's steps on eight lanes, in its order; the special cases (NaN, above
// and below the range) are computed as ordinary lanes and replaced at the
// end, as Expf's early returns would give them.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), DI
	VBROADCASTSS m+8(FP), Y15
	MOVQ         n+16(FP), CX
	SHRQ         $3, CX
	VBROADCASTSS expc<>+0(SB), Y14
	VBROADCASTSS expc<>+4(SB), Y13
	VBROADCASTSS expc<>+8(SB), Y12
	VBROADCASTSS expc<>+32(SB), Y11
	VBROADCASTSS expc<>+36(SB), Y10
	VBROADCASTSS expc<>+40(SB), Y9
	VPBROADCASTD expc<>+44(SB), Y8

eight:
	VMOVUPS (DI), Y0
	VSUBPS  Y15, Y0, Y0 // x = x - m

	// k = float32(int32(t + copysign(0.5, t))), t = x·log2e
	VMULPS     Y14, Y0, Y1
	VANDPS     Y9, Y1, Y2
	VORPS      Y11, Y2, Y2
	VADDPS     Y2, Y1, Y1
	VCVTTPS2DQ Y1, Y1    // int32(k)
	VCVTDQ2PS  Y1, Y2    // k

	// r = (x - k·ln2hi) - k·ln2lo
	VMULPS Y13, Y2, Y3
	VSUBPS Y3, Y0, Y3
	VMULPS Y12, Y2, Y4
	VSUBPS Y4, Y3, Y3

	// p, then e = ((p·r)·r + r) + 1
	VBROADCASTSS expc<>+12(SB), Y4
	VMULPS       Y3, Y4, Y4
	VBROADCASTSS expc<>+16(SB), Y5
	VADDPS       Y5, Y4, Y4
	VMULPS       Y3, Y4, Y4
	VBROADCASTSS expc<>+20(SB), Y5
	VADDPS       Y5, Y4, Y4
	VMULPS       Y3, Y4, Y4
	VBROADCASTSS expc<>+24(SB), Y5
	VADDPS       Y5, Y4, Y4
	VMULPS       Y3, Y4, Y4
	VBROADCASTSS expc<>+28(SB), Y5
	VADDPS       Y5, Y4, Y4
	VMULPS       Y3, Y4, Y4
	VADDPS       Y11, Y4, Y4
	VMULPS       Y3, Y4, Y4
	VMULPS       Y3, Y4, Y4
	VADDPS       Y3, Y4, Y4
	VADDPS       Y10, Y4, Y4

	// k > 127: (e+e)·2^(k-1); otherwise e·2^k
	VPCMPGTD  Y8, Y1, Y5
	VADDPS    Y4, Y4, Y6
	VBLENDVPS Y5, Y6, Y4, Y4
	VPADDD    Y8, Y1, Y1
	VPADDD    Y5, Y1, Y1
	VPSLLD    $23, Y1, Y1
	VMULPS    Y1, Y4, Y4

	// x > 88.72283: +Inf; x < -87.33654: 0; NaN: x
	VBROADCASTSS expc<>+48(SB), Y6
	VCMPPS       $0x1e, Y6, Y0, Y5 // x > hi, ordered
	VBROADCASTSS expc<>+56(SB), Y6
	VBLENDVPS    Y5, Y6, Y4, Y4
	VBROADCASTSS expc<>+52(SB), Y6
	VCMPPS       $0x11, Y6, Y0, Y5 // x < lo, ordered
	VXORPS       Y6, Y6, Y6
	VBLENDVPS    Y5, Y6, Y4, Y4
	VCMPPS       $0x03, Y0, Y0, Y5 // unordered: x is NaN
	VBLENDVPS    Y5, Y0, Y4, Y4

	VMOVUPS Y4, (DI)
	ADDQ    $32, DI
	DECQ    CX
	JNZ     eight
	VZEROUPPER
	RET

// func scaleMaxAVX2(x *float32, scale float32, n int) float32
TEXT ·scaleMaxAVX2(SB), NOSPLIT, $0-28
	MOVQ         x+0(FP), DI
	VBROADCASTSS scale+8(FP), Y1
	MOVQ         n+16(FP), CX
	SHRQ         $3, CX
	VMULPS       (DI), Y1, Y0
	VMOVUPS      Y0, (DI)
	ADDQ         $32, DI
	DECQ         CX
	JZ           fold

scale8:
	VMULPS  (DI), Y1, Y2
	VMOVUPS Y2, (DI)
	VMAXPS  Y2, Y0, Y0
	ADDQ    $32, DI
	DECQ    CX
	JNZ     scale8

fold:
	FOLDMAX
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func expShiftAVX512(x *float32, m float32, n int)
// expShiftAVX2's steps on sixteen lanes (n a multiple of 16), each the
// same single-rounded operation, so every lane has Expf's bits; the
// blends are masked moves and the exponent's adjustment a masked add.
TEXT ·expShiftAVX512(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), DI
	VBROADCASTSS m+8(FP), Z15
	MOVQ         n+16(FP), CX
	SHRQ         $4, CX
	VBROADCASTSS expc<>+0(SB), Z14
	VBROADCASTSS expc<>+4(SB), Z13
	VBROADCASTSS expc<>+8(SB), Z12
	VBROADCASTSS expc<>+32(SB), Z11
	VBROADCASTSS expc<>+36(SB), Z10
	VBROADCASTSS expc<>+40(SB), Z9
	VPBROADCASTD expc<>+44(SB), Z8
	VBROADCASTSS expc<>+12(SB), Z16
	VBROADCASTSS expc<>+16(SB), Z17
	VBROADCASTSS expc<>+20(SB), Z18
	VBROADCASTSS expc<>+24(SB), Z19
	VBROADCASTSS expc<>+28(SB), Z20
	VBROADCASTSS expc<>+48(SB), Z21
	VBROADCASTSS expc<>+52(SB), Z22
	VBROADCASTSS expc<>+56(SB), Z23
	VPXORD       Z24, Z24, Z24           // 0
	VPTERNLOGD   $0xff, Z25, Z25, Z25    // -1 in every lane

sixteen:
	VMOVUPS (DI), Z0
	VSUBPS  Z15, Z0, Z0 // x = x - m

	// k = float32(int32(t + copysign(0.5, t))), t = x·log2e
	VMULPS     Z14, Z0, Z1
	VPANDD     Z9, Z1, Z2
	VPORD      Z11, Z2, Z2
	VADDPS     Z2, Z1, Z1
	VCVTTPS2DQ Z1, Z1
	VCVTDQ2PS  Z1, Z2

	// r = (x - k·ln2hi) - k·ln2lo
	VMULPS Z13, Z2, Z3
	VSUBPS Z3, Z0, Z3
	VMULPS Z12, Z2, Z4
	VSUBPS Z4, Z3, Z3

	// p, then e = ((p·r)·r + r) + 1
	VMULPS Z3, Z16, Z4
	VADDPS Z17, Z4, Z4
	VMULPS Z3, Z4, Z4
	VADDPS Z18, Z4, Z4
	VMULPS Z3, Z4, Z4
	VADDPS Z19, Z4, Z4
	VMULPS Z3, Z4, Z4
	VADDPS Z20, Z4, Z4
	VMULPS Z3, Z4, Z4
	VADDPS Z11, Z4, Z4
	VMULPS Z3, Z4, Z4
	VMULPS Z3, Z4, Z4
	VADDPS Z3, Z4, Z4
	VADDPS Z10, Z4, Z4

	// k > 127: (e+e)·2^(k-1); otherwise e·2^k
	VPCMPGTD Z8, Z1, K1
	VADDPS   Z4, Z4, K1, Z4
	VPADDD   Z8, Z1, Z1
	VPADDD   Z25, Z1, K1, Z1
	VPSLLD   $23, Z1, Z1
	VMULPS   Z1, Z4, Z4

	// x > 88.72283: +Inf; x < -87.33654: 0; NaN: x
	VCMPPS  $0x1e, Z21, Z0, K2 // x > hi, ordered
	VMOVAPS Z23, K2, Z4
	VCMPPS  $0x11, Z22, Z0, K2 // x < lo, ordered
	VMOVAPS Z24, K2, Z4
	VCMPPS  $0x03, Z0, Z0, K2  // unordered: x is NaN
	VMOVAPS Z0, K2, Z4

	VMOVUPS Z4, (DI)
	ADDQ    $64, DI
	DECQ    CX
	JNZ     sixteen
	VZEROUPPER
	RET

// func maxAVX2(x *float32, n int) float32
//
// The largest of x[:n] (n a multiple of 8), NaNs passed over (-Inf where
// all are NaN). VMAXPS returns its second source where either is NaN or
// both are zeros, so the running maxima are always that source: a NaN of
// x never enters them.
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	SHRQ         $3, CX
	MOVL         $0xff800000, AX // -Inf
	MOVL         AX, X0
	VBROADCASTSS X0, Y0
	VMOVAPS      Y0, Y1

	// Two chains of maxima, so that each VMAXPS waits on the one before
	// last, not the last.
	TESTQ $1, CX
	JZ    pairs
	VMOVUPS (DI), Y2
	VMAXPS  Y0, Y2, Y0
	ADDQ    $32, DI
	DECQ    CX
	JZ      fold

pairs:
	TESTQ CX, CX
	JZ    fold

pair:
	VMOVUPS (DI), Y2
	VMOVUPS 32(DI), Y3
	VMAXPS  Y0, Y2, Y0
	VMAXPS  Y1, Y3, Y1
	ADDQ    $64, DI
	SUBQ    $2, CX
	JNZ     pair

fold:
	// Neither chain holds a NaN, so the order of the folds is free.
	VMAXPS Y1, Y0, Y0
	FOLDMAX
	VZEROUPPER
	MOVSS  X0, ret+16(FP)
	RET

// func findAVX2(x *float32, n int, v float32) int
//
// The first i < n (n a multiple of 8) with x[i] == v (an ordered
// comparison: −0 equals +0, NaN equals nothing), or -1.
TEXT ·findAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS v+16(FP), Y0
	XORQ         AX, AX

eight:
	VCMPPS    $0, (DI)(AX*4), Y0, Y1 // EQ_OQ
	VMOVMSKPS Y1, DX
	TESTL     DX, DX
	JNZ       found
	ADDQ      $8, AX
	CMPQ      AX, CX
	JNE       eight
	MOVQ      $-1, ret+24(FP)
	VZEROUPPER
	RET

found:
	BSFL      DX, DX
	ADDQ      DX, AX
	MOVQ      AX, ret+24(FP)
	VZEROUPPER
	RET
