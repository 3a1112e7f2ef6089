//go:build !purego

#include "textflag.h"

// func prefetch(x *float32, n int)
TEXT ·prefetch(SB), NOSPLIT, $0-16
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	LEAQ (SI)(CX*4), DI

line:
	PREFETCHT0 (SI)
	ADDQ       $64, SI
	CMPQ       SI, DI
	JCS        line
	RET
