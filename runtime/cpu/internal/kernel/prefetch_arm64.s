//go:build !purego

#include "textflag.h"

// func prefetch(x *float32, n int)
TEXT ·prefetch(SB), NOSPLIT, $0-16
	MOVD x+0(FP), R0
	MOVD n+8(FP), R1
	ADD  R1<<2, R0, R1

line:
	PRFM (R0), PLDL1KEEP
	ADD  $64, R0
	CMP  R1, R0
	BLO  line
	RET
