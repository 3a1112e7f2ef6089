// The walk of a row of activations over a call's groups in dotWideVNNI
// and dotWideAVX2 (the types of a scale a group), included in their bodies
// with WPAIR(E, O) (a pair of groups, its terms to lanes E and O, the
// pointers and count moved on), WLONE(L) (a lone last group to lane L)
// and WLANE0..WLANE7 (the lanes, as the form's macros name them) defined:
// pairs of groups to the lanes of their places in a chunk of eight while
// two are left, then a lone last one, and on to wend. Registers: AX the
// expanded codes, DX their scales, R8 the row's codes in the tile (R11
// the tile's data), R9 its d, R10 the row, CX the groups left.
	MOVQ w+0(FP), AX
	MOVQ sc+8(FP), DX
	MOVQ groups+24(FP), CX
	MOVQ R10, R8
	SHLQ $7, R8
	ADDQ R11, R8
	LEAQ 512(R11)(R10*4), R9

wchunk:
	CMPQ CX, $2
	JLT  wlone0
	WPAIR(WLANE0, WLANE1)
	CMPQ CX, $2
	JLT  wlone2
	WPAIR(WLANE2, WLANE3)
	CMPQ CX, $2
	JLT  wlone4
	WPAIR(WLANE4, WLANE5)
	CMPQ CX, $2
	JLT  wlone6
	WPAIR(WLANE6, WLANE7)
	JMP  wchunk

wlone0:
	TESTQ CX, CX
	JZ    wend
	WLONE(WLANE0)
	JMP   wend

wlone2:
	TESTQ CX, CX
	JZ    wend
	WLONE(WLANE2)
	JMP   wend

wlone4:
	TESTQ CX, CX
	JZ    wend
	WLONE(WLANE4)
	JMP   wend

wlone6:
	TESTQ CX, CX
	JZ    wend
	WLONE(WLANE6)

#undef WLANE0
#undef WLANE1
#undef WLANE2
#undef WLANE3
#undef WLANE4
#undef WLANE5
#undef WLANE6
#undef WLANE7
#undef WPAIR
#undef WLONE
