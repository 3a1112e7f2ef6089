package kernel

import "math"

// Expf is e^x in float32, within 1 ulp of the exact value, as C's expf
// is: the argument is reduced to r = x − k·ln 2 with |r| ≤ ln 2/2 (ln 2
// split in two so that k·ln2hi is exact), e^r comes from a degree-6
// polynomial (the minimax coefficients of the Cephes library's expf), and
// 2^k goes into the exponent bits. Every product and sum rounds on its own
// (the conversions forbid fused multiply-adds, which Go would otherwise
// use on arm64), so it is also the definition ExpShift's vector paths are
// tested against, and every machine computes the same bits.
func Expf(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375 // exact in 10 bits, so k·ln2hi is exact
		ln2lo = -2.12194440e-4
	)
	switch {
	case x != x:
		return x
	case x > 88.72283:
		return float32(math.Inf(1))
	case x < -87.33654: // e^x below the smallest normal float32
		return 0
	}
	t := float32(x * log2e)
	k := float32(int32(t + float32(math.Copysign(0.5, float64(t)))))
	r := float32(x-float32(k*ln2hi)) - float32(k*ln2lo)
	p := float32(1.9875691500e-4)
	p = float32(p*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	e := float32(float32(float32(p*r)*r)+r) + 1
	if k > 127 { // x just below the overflow: 2^128 is not a float32
		return float32(2*e) * math.Float32frombits(uint32(int32(k)+126)<<23)
	}
	return e * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// ExpShift sets x[i] to Expf(x[i] − m): a softmax's weights and SiLU's
// exps, sixteen or eight at a time where the CPU has vectors, the same
// bits on every path. (SiLU's were 1.6% of a served 32-stream run's CPU
// on eight AVX2 lanes.)
func ExpShift(x []float32, m float32) {
	done := 0
	if n := len(x) &^ 15; n > 0 && hasAVX512 {
		expShiftAVX512(&x[0], m, n)
		done = n
	}
	n := len(x) &^ (Lanes - 1)
	switch {
	case n > done && hasAVX2:
		expShiftAVX2(&x[done], m, n-done)
	case n > done && hasNEON:
		expShiftNEON(&x[done], m, n-done)
	default:
		n = done
	}
	for i := n; i < len(x); i++ {
		x[i] = Expf(x[i] - m)
	}
}

// ScaleMax multiplies x by scale in place and returns the largest product
// (-Inf for none), eight lanes at a time where the CPU has vectors: a
// softmax's scaled scores and the shift of their exps. Every product is
// the plain loop's; of zeros of either sign, and where a product is NaN,
// it may return any of them (a NaN among the scores makes every weight of
// the softmax NaN whatever the shift).
func ScaleMax(x []float32, scale float32) float32 {
	n := len(x) &^ (Lanes - 1)
	mx := float32(math.Inf(-1))
	switch {
	case n > 0 && hasAVX2:
		mx = scaleMaxAVX2(&x[0], scale, n)
	case n > 0 && hasNEON:
		mx = scaleMaxNEON(&x[0], scale, n)
	default:
		n = 0
	}
	for i := n; i < len(x); i++ {
		x[i] *= scale
		if x[i] > mx {
			mx = x[i]
		}
	}
	return mx
}
