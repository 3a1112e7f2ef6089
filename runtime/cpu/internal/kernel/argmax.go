package kernel

import "math"

// Argmax is the index of x's largest value, the first of equals (−0 and
// +0 are equal), NaNs passed over, and 0 when x is empty or x[0] is NaN:
// exactly the plain loop's answer (best := 0; if x[i] > x[best] then
// best = i), which the greedy tokens of every backend are defined by. A
// batched decode step takes one of each row of logits: the plain loop
// over 32 rows of a 49,152-token vocabulary was 1.7% of a served step's
// CPU. Where the CPU has vectors it takes two passes, eight lanes at a
// time: the largest value, then its first index.
func Argmax(x []float32) int {
	if len(x) == 0 || x[0] != x[0] {
		return 0
	}
	n := len(x) &^ (Lanes - 1)
	if !hasAVX2 {
		n = 0
	}
	m := float32(math.Inf(-1))
	if n > 0 {
		m = maxAVX2(&x[0], n)
	}
	for _, v := range x[n:] {
		if v > m {
			m = v
		}
	}
	if n > 0 {
		if i := findAVX2(&x[0], n, m); i >= 0 {
			return i
		}
	}
	for i := n; i < len(x); i++ {
		if x[i] == m {
			return i
		}
	}
	return 0 // not reached: x[0] is a number, so m is one of x's
}
