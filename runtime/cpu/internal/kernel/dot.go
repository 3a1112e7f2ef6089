package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// Path names the kernels this CPU runs: "avx512" (int4 products; the rest
// AVX2), "avx2", "neon" (arm64), or "go" for the twins.
func Path() string {
	switch {
	case hasAVX512:
		return "avx512"
	case hasAVX2:
		return "avx2"
	case hasNEON:
		return "neon"
	}
	return "go"
}

// Lanes is the width of the float accumulators the kernels' arithmetic is
// defined with: a group's 32 products are summed exactly into 8 integer
// lanes (lane k: inputs 4k..4k+3), each lane scaled and added to its own
// f32 accumulator.
const Lanes = 8

// DotQ4 returns the dot product of an Int4 row (its codes and scale|min
// words, as dtype.Int4 lays out one row) with the quantized row x:
//
//	Σ_g  s_g·d_g·Σ_i q_i·x_i  +  m_g·sum_g
//
// in the order dotQ4Go spells out, on every path.
func DotQ4(codes, scales []uint32, x *QRow) float32 {
	g := len(scales)
	if g == 0 {
		return 0
	}
	_, _, _ = codes[4*g-1], x.Codes[Group*g-1], x.DS[2*g-1]
	switch {
	case hasAVX512:
		return dotQ4AVX512(&codes[0], &scales[0], &x.Codes[0], &x.DS[0], g)
	case hasAVX2:
		return dotQ4AVX2(&codes[0], &scales[0], &x.Codes[0], &x.DS[0], g)
	case hasNEON:
		return dotQ4NEON(&codes[0], &scales[0], &x.Codes[0], &x.DS[0], g)
	}
	return dotQ4Go(codes, scales, x.Codes, x.DS)
}

// DotQ4x4 sets out[r] to DotQ4(codes, scales, xs[r]) for four rows at once,
// with AVX-512 unpacking each weight group once for all of them and NEON
// once per two of them (the batched path of prompts; elsewhere it is four
// DotQ4). Every result equals DotQ4's bit for bit.
func DotQ4x4(codes, scales []uint32, xs *[4]*QRow, out *[4]float32) {
	g := len(scales)
	if g == 0 {
		*out = [4]float32{}
		return
	}
	_ = codes[4*g-1]
	for _, x := range xs {
		_, _ = x.Codes[Group*g-1], x.DS[2*g-1]
	}
	if hasAVX512 {
		dotQ4x4AVX512(&codes[0], &scales[0], g,
			&[4]*int16{&xs[0].Codes[0], &xs[1].Codes[0], &xs[2].Codes[0], &xs[3].Codes[0]},
			&[4]*float32{&xs[0].DS[0], &xs[1].DS[0], &xs[2].DS[0], &xs[3].DS[0]}, out)
		return
	}
	if hasNEON {
		for r := 0; r < 4; r += 2 {
			a, b := xs[r], xs[r+1]
			dotQ4x2NEON(&codes[0], &scales[0], g, &a.Codes[0], &b.Codes[0], &a.DS[0], &b.DS[0], (*[2]float32)(out[r:]))
		}
		return
	}
	for r, x := range xs {
		out[r] = DotQ4(codes, scales, x)
	}
}

// dotQ4Go is the definition of DotQ4, the twin the assembly is tested
// against. Groups alternate between two sets of 8 lanes (even groups, odd
// groups: the halves of a 512-bit register that takes a pair). Each group:
//
//	sd = f32(s·d), mt = f32(m·sum)
//	lane_k = Σ_{i=4k}^{4k+3} q_i·x_i (exact); acc[g%2][k] += f32(f32(lane_k)·sd)
//	macc[g%2] += mt
//
// and at the end a_k = acc[0][k] + acc[1][k], then
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) + (macc[0]+macc[1]): the horizontal
// sum of a register folded in halves.
func dotQ4Go(codes, scales []uint32, xq []int16, ds []float32) float32 {
	var acc [2][Lanes]float32
	var macc [2]float32
	G := len(scales)
	for g, sm := range scales {
		p := g % 2
		s, m := dtype.UnpackScaleMin(sm)
		sd, mt := float32(s*ds[2*g]), float32(m*ds[2*g+1])
		macc[p] += mt
		ws := codes[4*g : 4*g+4]
		for k := range Lanes {
			var lane int32
			for i := 4 * k; i < 4*k+4; i++ {
				// Input i is nibble i%8 of word i/8.
				q := int32(ws[i/8] >> (4 * (i % 8)) & 15)
				lane += q * int32(xq[CodeIndex(g, G, i)])
			}
			acc[p][k] += float32(float32(lane) * sd)
		}
	}
	var a [Lanes]float32
	for k := range a {
		a[k] = acc[0][k] + acc[1][k]
	}
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])) + (macc[0] + macc[1])
}
