package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// Group8 is the Int8 weight format's group: 16 inputs share a scale and
// a min.
const Group8 = dtype.Int8GroupSize

// GroupSums8 sets sums[g] to the sum of inputs 16g..16g+15 of x (a short
// last group sums what it has), in the order of dotQ8Go's lanes: lane k
// adds inputs k and k+8, then the lanes fold as a register does. An Int8
// product meets each group's min with it, so a row of x, summed once,
// serves every weight row.
func GroupSums8(x, sums []float32) {
	for g := range sums {
		var in [Group8]float32
		copy(in[:], x[g*Group8:min(len(x), (g+1)*Group8)])
		var l [Lanes]float32
		for k := range Lanes {
			l[k] = in[k] + in[k+Lanes]
		}
		sums[g] = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
	}
}

// DotQ8 returns the dot product of an Int8 row (its codes and scale|min
// words, as dtype.Int8 lays out one row) with the f32 row x, whose group
// sums (GroupSums8) are sums:
//
//	Σ_g  s_g·Σ_i q_i·x_i  +  m_g·sum_g
//
// in the order dotQ8Go spells out, on every path (AVX2 or NEON for whole groups
// where the CPU has it). x stays f32 (the activations the GPU kernels
// read), so both backends compute the same products up to the order of
// their sums. len(x) may be short of a whole last group.
func DotQ8(codes, scales []uint32, x, sums []float32) float32 {
	g := len(scales)
	if g == 0 {
		return 0
	}
	_, _ = codes[4*g-1], sums[g-1]
	var acc [2][Lanes]float32
	var macc float32
	full := 0
	if hasAVX2 {
		if full = min(g, len(x)/Group8); full > 0 {
			macc = dotQ8AVX2(&codes[0], &scales[0], &x[0], &sums[0], full, &acc)
		}
	} else if hasNEON {
		if full = min(g, len(x)/Group8); full > 0 {
			macc = dotQ8NEON(&codes[0], &scales[0], &x[0], &sums[0], full, &acc)
		}
	}
	return dotQ8Fold(&acc, dotQ8Groups(codes, scales, x, sums, full, &acc, macc))
}

// dotQ8Go is the definition of DotQ8. Groups alternate between two sets
// of 8 lanes (even groups, odd groups: two independent chains of adds for
// the vector code); per group g, lane k (0..7) takes inputs k and k+8:
//
//	t_k = f32(q_k·x_k) + f32(q_{k+8}·x_{k+8});  acc[g%2][k] += f32(s·t_k)
//	macc += f32(m·sum_g)
//
// and at the end a_k = acc[0][k] + acc[1][k], then
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) + macc.
func dotQ8Go(codes, scales []uint32, x, sums []float32) float32 {
	var acc [2][Lanes]float32
	return dotQ8Fold(&acc, dotQ8Groups(codes, scales, x, sums, 0, &acc, 0))
}

// dotQ8Groups adds groups g0... to acc and returns macc with their min
// terms added (dotQ8Go's loop).
func dotQ8Groups(codes, scales []uint32, x, sums []float32, g0 int, acc *[2][Lanes]float32, macc float32) float32 {
	n := len(x)
	for g := g0; g < len(scales); g++ {
		s, m := dtype.UnpackScaleMin(scales[g])
		macc += float32(m * sums[g])
		ws := codes[4*g : 4*g+4]
		var in [Group8]float32
		copy(in[:], x[g*Group8:min(n, (g+1)*Group8)])
		for k := range Lanes {
			a := float32(float32(uint8(ws[k/4]>>(8*(k%4)))) * in[k])
			b := float32(float32(uint8(ws[2+k/4]>>(8*(k%4)))) * in[k+Lanes])
			acc[g%2][k] += float32(s * (a + b))
		}
	}
	return macc
}

// dotQ8Fold is dotQ8Go's horizontal sum.
func dotQ8Fold(acc *[2][Lanes]float32, macc float32) float32 {
	var a [Lanes]float32
	for k := range a {
		a[k] = acc[0][k] + acc[1][k]
	}
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])) + macc
}
