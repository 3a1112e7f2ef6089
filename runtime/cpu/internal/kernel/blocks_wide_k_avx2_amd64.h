// The K quants' wide kernel in AVX2 (dotWideKAVX2) and in AVX2 with
// AVX-VNNI's VEX-encoded VPDPWSSD (dotWideKAVXVNNI, with AVXVNNI
// defined), included by blocks_wide_amd64.s with KW2DOT its name.
// dotWideKVNNI's walk, sixteen weight rows two vectors of eight, and the
// lanes (48 vectors a row of activations) in acc.

#ifdef AVXVNNI
// VPDPWSSD(DISP, V, D): VPDPWSSD DISP(AX), Y(V), Y(D), in the VEX form of
// AVX-VNNI (the Go assembler encodes only AVX512_VNNI's EVEX one): C4,
// R̄X̄B̄ and map 0F38, W0 with ~V, 256 bits and prefix 66, opcode 52, then
// a ModRM of D and a 32-bit displacement from AX.
#define VPDPWSSD_AX(DISP, V, D) \
	BYTE $0xC4; BYTE $0xE2; BYTE $(((15-V)<<3)|0x05); BYTE $0x52; BYTE $(0x80|(D<<3)); LONG $(DISP)

// KWK2(W, X, A, B, NA, NB): KWK for eight weight rows a vector: the pairs
// of codes of rows 0..7 at W(AX) and 1024+W(AX) (8..15 32 bytes on) meet
// the activation row's pairs at X(R8) and X+64(R8), broadcast, added to A
// (rows 0..7, register number NA) and B exactly in int32.
#define KWK2(W, X, A, B, NA, NB) \
	VPBROADCASTD X(R8), Y4 \
	VPBROADCASTD X+64(R8), Y7 \
	VPDPWSSD_AX(W, 4, NA) \
	VPDPWSSD_AX(W+32, 4, NB) \
	VPDPWSSD_AX(1024+W, 7, NA) \
	VPDPWSSD_AX(1024+W+32, 7, NB)
#else
// KWK2(W, X, A, B): KWK2 with each VPDPWSSD a VPMADDWD and a VPADDD
// (VPMADDWD's pair sums wrap as VPDPWSSD's do, and the sum is exact where
// the twin's fits).
#define KWK2(W, X, A, B, NA, NB) \
	VPBROADCASTD X(R8), Y4 \
	VPBROADCASTD X+64(R8), Y7 \
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
	KWK2(W, X, Y0, Y1, 0, 1) \
	KWK2(W+256, X+16, Y2, Y3, 2, 3) \
	KWK2(W+64, X+4, Y0, Y1, 0, 1) \
	KWK2(W+320, X+20, Y2, Y3, 2, 3) \
	KWK2(W+128, X+8, Y0, Y1, 0, 1) \
	KWK2(W+384, X+24, Y2, Y3, 2, 3) \
	KWK2(W+192, X+12, Y0, Y1, 0, 1) \
	KWK2(W+448, X+28, Y2, Y3, 2, 3) \
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

// KWFOLD2(O): dotWideKVNNI's fold of rows 0..7 (O = 0) or 8..15 (O = 32)
// of the lanes in acc to Y0.
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
	VADDPS Y4, Y0, Y0 \
	VADDPS Y6, Y2, Y2 \
	VADDPS Y2, Y0, Y0 \
	VADDPS Y5, Y1, Y1 \
	VADDPS Y7, Y3, Y3 \
	VADDPS Y3, Y1, Y1 \
	VADDPS Y1, Y0, Y0 \
	VMOVUPS (1024+O)(R9), Y1 \
	VADDPS (1280+O)(R9), Y1, Y1 \
	VMOVUPS (1152+O)(R9), Y2 \
	VADDPS (1408+O)(R9), Y2, Y2 \
	VADDPS Y2, Y1, Y1 \
	VMOVUPS (1088+O)(R9), Y2 \
	VADDPS (1344+O)(R9), Y2, Y2 \
	VMOVUPS (1216+O)(R9), Y3 \
	VADDPS (1472+O)(R9), Y3, Y3 \
	VADDPS Y3, Y2, Y2 \
	VADDPS Y2, Y1, Y1 \
	VADDPS Y1, Y0, Y0

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
	MOVQ w+0(FP), AX
	MOVQ sc+8(FP), DX
	MOVQ groups+48(FP), CX
	SHRQ $3, CX
	MOVQ R10, R8
	IMULQ xstride+24(FP), R8
	ADDQ xq+16(FP), R8
	MOVQ kd+32(FP), R11
	LEAQ (R11)(R10*4), R11
	MOVQ $512, BX
	MOVQ $1024, SI
	MOVQ $128, DI
	MOVQ R10, R12
	SHLQ $5, R12
	TESTQ $8, mode+64(FP)
	JZ    k2sizes
	MOVQ $1024, BX
	MOVQ $2048, SI
	MOVQ $256, DI
	SHLQ $1, R12

k2sizes:
	ADDQ sums+40(FP), R12

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

#undef KWK2
#undef KWHALF2
#undef KWGROUP2
#undef KWMIN2
#undef KWFOLD2
#ifdef AVXVNNI
#undef VPDPWSSD_AX
#endif
