// The wide kernels' products in AVX2 (dotWideAVX2, dotWideKAVX2) and in
// AVX2 with AVX-VNNI's VEX-encoded VPDPWSSD (dotWideAVXVNNI,
// dotWideKAVXVNNI, with AVXVNNI defined), included by
// blocks_wide_amd64.s with W2DOT and KW2DOT their names: dotWideVNNI's
// and dotWideKVNNI's walks with sixteen weight rows in two vectors of
// eight, and the lanes a row of activations carries (16 vectors, the K
// quants' 48) in acc.

#ifdef AVXVNNI
// VPDPWSSD_AX(DISP, V, D): VPDPWSSD DISP(AX), Y(V), Y(D) (D below 8), in
// the VEX form of AVX-VNNI (the Go assembler encodes only AVX512_VNNI's
// EVEX one): C4, R̄X̄B̄ and map 0F38, W0 with ~V, 256 bits and prefix 66,
// opcode 52, then a ModRM of D and a 32-bit displacement from AX.
#define VPDPWSSD_AX(DISP, V, D) \
	BYTE $0xC4; BYTE $0xE2; BYTE $(((15-V)<<3)|0x05); BYTE $0x52; BYTE $(0x80|(D<<3)); LONG $(DISP)

// KWK2(W, X, XO, A, B, NA, NB): KWK and GK for eight weight rows a
// vector: the pairs of codes of rows 0..7 at W(AX) and 1024+W(AX) (8..15
// 32 bytes on) meet the activation row's pairs at X(R8) and XO(R8),
// broadcast, added to A (rows 0..7, register number NA) and B exactly in
// int32.
#define KWK2(W, X, XO, A, B, NA, NB) \
	VPBROADCASTD X(R8), Y4 \
	VPBROADCASTD XO(R8), Y7 \
	VPDPWSSD_AX(W, 4, NA) \
	VPDPWSSD_AX(W+32, 4, NB) \
	VPDPWSSD_AX(1024+W, 7, NA) \
	VPDPWSSD_AX(1024+W+32, 7, NB)
#else
// KWK2(W, X, XO, A, B, NA, NB): KWK2 with each VPDPWSSD a VPMADDWD and
// a VPADDD (VPMADDWD's pair sums wrap as VPDPWSSD's do, and the sum is
// exact where the twin's fits).
#define KWK2(W, X, XO, A, B, NA, NB) \
	VPBROADCASTD X(R8), Y4 \
	VPBROADCASTD XO(R8), Y7 \
	VPMADDWD W(AX), Y4, Y5 \
	VPADDD Y5, A, A \
	VPMADDWD W+32(AX), Y4, Y6 \
	VPADDD Y6, B, B \
	VPMADDWD 1024+W(AX), Y7, Y5 \
	VPADDD Y5, A, A \
	VPMADDWD 1024+W+32(AX), Y7, Y6 \
	VPADDD Y6, B, B
#endif

// KWHALF2(A, B, L): a half's sums f·half of rows 0..7 (A) and 8..15 (B) as
// f32(f32(f·half)·s), added to lane L in acc.
#define KWHALF2(A, B, L) \
	VCVTDQ2PS A, A \
	VMULPS Y14, A, A \
	VADDPS (L*64)(R9), A, A \
	VMOVUPS A, (L*64)(R9) \
	VCVTDQ2PS B, B \
	VMULPS Y15, B, B \
	VADDPS (L*64+32)(R9), B, B \
	VMOVUPS B, (L*64+32)(R9)

// KWGROUP2(W, X, LA, LB): KWGROUP's group, its halves to lanes LA and LB.
#define KWGROUP2(W, X, LA, LB) \
	VPXOR Y0, Y0, Y0 \
	VPXOR Y1, Y1, Y1 \
	VPXOR Y2, Y2, Y2 \
	VPXOR Y3, Y3, Y3 \
	KWK2(W, X, X+64, Y0, Y1, 0, 1) \
	KWK2(W+256, X+16, X+16+64, Y2, Y3, 2, 3) \
	KWK2(W+64, X+4, X+4+64, Y0, Y1, 0, 1) \
	KWK2(W+320, X+20, X+20+64, Y2, Y3, 2, 3) \
	KWK2(W+128, X+8, X+8+64, Y0, Y1, 0, 1) \
	KWK2(W+384, X+24, X+24+64, Y2, Y3, 2, 3) \
	KWK2(W+192, X+12, X+12+64, Y0, Y1, 0, 1) \
	KWK2(W+448, X+28, X+28+64, Y2, Y3, 2, 3) \
	KWHALF2(Y0, Y1, LA) \
	KWHALF2(Y2, Y3, LB)

// KWMIN2(J, K): KWMIN of min J (at J·64 of the super-block's mins) and
// the row's sum J, taken from the mins' lane K in acc.
#define KWMIN2(J, K) \
	VBROADCASTSS (J*4)(R12), Y4 \
	VMULPS (J*64)(DX), Y4, Y5 \
	VMULPS (J*64+32)(DX), Y4, Y6 \
	VMOVUPS (1024+K*64)(R9), Y0 \
	VMOVUPS (1024+K*64+32)(R9), Y1 \
	VSUBPS Y5, Y0, Y0 \
	VSUBPS Y6, Y1, Y1 \
	VMOVUPS Y0, (1024+K*64)(R9) \
	VMOVUPS Y1, (1024+K*64+32)(R9)

// KWFOLD2(O): dotWideKVNNI's fold (foldLanes) of rows 0..7 (O = 0) or
// 8..15 (O = 32) of the lanes in acc to Y0: a_k = lane k + lane 8+k, then
// fold8(a) + fold8(the mins' lanes).
#define KWFOLD2(O) \
	VMOVUPS (O)(R9), Y0 \
	VADDPS (512+O)(R9), Y0, Y0 \
	VMOVUPS (64+O)(R9), Y1 \
	VADDPS (576+O)(R9), Y1, Y1 \
	VMOVUPS (128+O)(R9), Y2 \
	VADDPS (640+O)(R9), Y2, Y2 \
	VMOVUPS (192+O)(R9), Y3 \
	VADDPS (704+O)(R9), Y3, Y3 \
	VMOVUPS (256+O)(R9), Y4 \
	VADDPS (768+O)(R9), Y4, Y4 \
	VMOVUPS (320+O)(R9), Y5 \
	VADDPS (832+O)(R9), Y5, Y5 \
	VMOVUPS (384+O)(R9), Y6 \
	VADDPS (896+O)(R9), Y6, Y6 \
	VMOVUPS (448+O)(R9), Y7 \
	VADDPS (960+O)(R9), Y7, Y7 \
	FOLD8(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7) \
	VMOVUPS (1024+O)(R9), Y8 \
	VMOVUPS (1088+O)(R9), Y9 \
	VMOVUPS (1152+O)(R9), Y10 \
	VMOVUPS (1216+O)(R9), Y11 \
	VMOVUPS (1280+O)(R9), Y12 \
	VMOVUPS (1344+O)(R9), Y13 \
	VMOVUPS (1408+O)(R9), Y14 \
	VMOVUPS (1472+O)(R9), Y15 \
	FOLD8(Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15) \
	VADDPS Y8, Y0, Y0

// func KW2DOT(w *int32, sc *float32, xq *int16, xstride int, kd, sums *float32, groups int, acc *float32, mode int, out *float32, ostride int)
//
// KW2DOT is dotWideKVNNI in AVX2, the lanes always in acc: with mode&1
// they start from it, else from zero; with mode&2 they fold to out.
// Registers as dotWideKVNNI's; Y14 and Y15 f32(d·D) of rows 0..7 and
// 8..15.
TEXT KW2DOT(SB), NOSPLIT, $0-88
	XORQ R10, R10

k2row:
	MOVQ R10, R9
	IMULQ $1536, R9
	ADDQ acc+56(FP), R9
	TESTQ $1, mode+64(FP)
	JNZ   k2go
	VXORPS Y0, Y0, Y0
	MOVQ R9, AX
	MOVQ $24, CX

k2zero:
	VMOVUPS Y0, (AX)
	VMOVUPS Y0, 32(AX)
	ADDQ $64, AX
	DECQ CX
	JNZ  k2zero

k2go:
	KWARGS

k2super:
	VBROADCASTSS (R11), Y4
	VMULPS (DX)(BX*1), Y4, Y14
	VMULPS 32(DX)(BX*1), Y4, Y15
	TESTQ $12, mode+64(FP)
	JZ    k2nomin
	KWMIN2(0, 0)
	KWMIN2(1, 1)
	KWMIN2(2, 2)
	KWMIN2(3, 3)
	KWMIN2(4, 4)
	KWMIN2(5, 5)
	KWMIN2(6, 6)
	KWMIN2(7, 7)
	TESTQ $8, mode+64(FP)
	JZ    k2nomin
	KWMIN2(8, 0)
	KWMIN2(9, 1)
	KWMIN2(10, 2)
	KWMIN2(11, 3)
	KWMIN2(12, 4)
	KWMIN2(13, 5)
	KWMIN2(14, 6)
	KWMIN2(15, 7)

k2nomin:
	KWGROUP2(0, 0, 0, 4)
	KWGROUP2(512, 32, 8, 12)
	KWGROUP2(2048, 128, 1, 5)
	KWGROUP2(2560, 160, 9, 13)
	KWGROUP2(4096, 256, 2, 6)
	KWGROUP2(4608, 288, 10, 14)
	KWGROUP2(6144, 384, 3, 7)
	KWGROUP2(6656, 416, 11, 15)
	ADDQ $8192, AX
	ADDQ SI, DX
	ADDQ $512, R8
	ADDQ $16, R11
	ADDQ DI, R12
	DECQ CX
	JNZ  k2super

	TESTQ $2, mode+64(FP)
	JZ    k2next
	MOVQ  R10, BX
	IMULQ ostride+80(FP), BX
	ADDQ  out+72(FP), BX
	KWFOLD2(0)
	VMOVUPS Y0, (BX)
	KWFOLD2(32)
	VMOVUPS Y0, 32(BX)

k2next:
	INCQ R10
	CMPQ R10, $4
	JLT  k2row
	VZEROUPPER
	RET

// ---- The types of a scale a group (dotWideVNNI's walk).

// G2SD(DOFF, XOFF): a group's f32(d·D) of rows 0..7 to Y14, 8..15 to Y15:
// the sixteen weight rows' scales at DOFF(DX), the activation row's d at
// XOFF(R9).
#define G2SD(DOFF, XOFF) \
	VBROADCASTSS XOFF(R9), Y4 \
	VMULPS DOFF(DX), Y4, Y14 \
	VMULPS DOFF+32(DX), Y4, Y15

// G2GROUP(W, X, XO, L): GGROUP's group (its codes at W(AX), the even
// inputs' activations at X(R8), the odd ones' XO bytes on), its term
// f32(f32(S)·sd) added to lane L of the lanes at R12.
#define G2GROUP(W, X, XO, L) \
	VPXOR Y0, Y0, Y0 \
	VPXOR Y1, Y1, Y1 \
	VPXOR Y2, Y2, Y2 \
	VPXOR Y3, Y3, Y3 \
	KWK2(W, X, X+XO, Y0, Y1, 0, 1) \
	KWK2(W+64, X+4, X+XO+4, Y2, Y3, 2, 3) \
	KWK2(W+128, X+8, X+XO+8, Y0, Y1, 0, 1) \
	KWK2(W+192, X+12, X+XO+12, Y2, Y3, 2, 3) \
	KWK2(W+256, X+16, X+XO+16, Y0, Y1, 0, 1) \
	KWK2(W+320, X+20, X+XO+20, Y2, Y3, 2, 3) \
	KWK2(W+384, X+24, X+XO+24, Y0, Y1, 0, 1) \
	KWK2(W+448, X+28, X+XO+28, Y2, Y3, 2, 3) \
	VPADDD Y2, Y0, Y0 \
	VPADDD Y3, Y1, Y1 \
	VCVTDQ2PS Y0, Y0 \
	VMULPS Y14, Y0, Y0 \
	VADDPS (L*64)(R12), Y0, Y0 \
	VMOVUPS Y0, (L*64)(R12) \
	VCVTDQ2PS Y1, Y1 \
	VMULPS Y15, Y1, Y1 \
	VADDPS (L*64+32)(R12), Y1, Y1 \
	VMOVUPS Y1, (L*64+32)(R12)

// G2PAIR(LE, LO): GPAIR's pair of groups, to lanes LE and LO.
#define G2PAIR(LE, LO) \
	G2SD(0, 0) \
	G2GROUP(0, 0, 64, LE) \
	G2SD(64, 32) \
	G2GROUP(512, 32, 64, LO) \
	ADDQ $2048, AX \
	ADDQ $128, DX \
	ADDQ $768, R8 \
	ADDQ $768, R9 \
	SUBQ $2, CX

// G2LONE(L): GLONE's lone last group, to lane L.
#define G2LONE(L) \
	MOVQ R10, BX \
	SHLQ $6, BX \
	SUBQ BX, R8 \
	MOVQ R8, R9 \
	SUBQ BX, R9 \
	LEAQ 256(R9)(R10*4), R9 \
	G2SD(0, 0) \
	G2GROUP(0, 0, 32, L)

// G2FOLD(O): dotWideVNNI's fold of rows 0..7 (O = 0) or 8..15 (O = 32) of
// the lanes at R12 to Y0: fold8 of the lanes, plus the fold of the (zero)
// mins' lanes.
#define G2FOLD(O) \
	VMOVUPS (O)(R12), Y0 \
	VMOVUPS (64+O)(R12), Y1 \
	VMOVUPS (128+O)(R12), Y2 \
	VMOVUPS (192+O)(R12), Y3 \
	VMOVUPS (256+O)(R12), Y4 \
	VMOVUPS (320+O)(R12), Y5 \
	VMOVUPS (384+O)(R12), Y6 \
	VMOVUPS (448+O)(R12), Y7 \
	FOLD8(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7) \
	VXORPS Y1, Y1, Y1 \
	VADDPS Y1, Y0, Y0

// func W2DOT(w *int32, sc *float32, xq *int16, groups int, acc *float32, mode int, out *float32, ostride int)
//
// W2DOT is dotWideVNNI in AVX2, the lanes (512 bytes a row) always in acc:
// with mode&1 they start from it, else from zero; with mode&2 they fold to
// out. Registers as dotWideVNNI's; Y14 and Y15 a group's f32(d·D).
TEXT W2DOT(SB), NOSPLIT, $0-64
	MOVQ xq+16(FP), R11
	MOVQ acc+32(FP), R12
	MOVQ out+48(FP), R13
	XORQ R10, R10

w2row:
	TESTQ $1, mode+40(FP)
	JNZ   w2go
	VXORPS Y0, Y0, Y0
	VMOVUPS Y0, 0(R12)
	VMOVUPS Y0, 32(R12)
	VMOVUPS Y0, 64(R12)
	VMOVUPS Y0, 96(R12)
	VMOVUPS Y0, 128(R12)
	VMOVUPS Y0, 160(R12)
	VMOVUPS Y0, 192(R12)
	VMOVUPS Y0, 224(R12)
	VMOVUPS Y0, 256(R12)
	VMOVUPS Y0, 288(R12)
	VMOVUPS Y0, 320(R12)
	VMOVUPS Y0, 352(R12)
	VMOVUPS Y0, 384(R12)
	VMOVUPS Y0, 416(R12)
	VMOVUPS Y0, 448(R12)
	VMOVUPS Y0, 480(R12)

w2go:
#define WLANE0 0
#define WLANE1 1
#define WLANE2 2
#define WLANE3 3
#define WLANE4 4
#define WLANE5 5
#define WLANE6 6
#define WLANE7 7
#define WPAIR G2PAIR
#define WLONE G2LONE
#include "blocks_wide_walk_amd64.h"

wend:
	TESTQ $2, mode+40(FP)
	JZ    w2next
	MOVQ  R10, BX
	IMULQ ostride+56(FP), BX
	G2FOLD(0)
	VMOVUPS Y0, (R13)(BX*1)
	G2FOLD(32)
	VMOVUPS Y0, 32(R13)(BX*1)

w2next:
	ADDQ $512, R12
	INCQ R10
	CMPQ R10, $4
	JLT  w2row
	VZEROUPPER
	RET

#undef G2SD
#undef G2GROUP
#undef G2PAIR
#undef G2LONE
#undef G2FOLD
#undef KWK2
#undef KWHALF2
#undef KWGROUP2
#undef KWMIN2
#undef KWFOLD2
#ifdef AVXVNNI
#undef VPDPWSSD_AX
#endif
