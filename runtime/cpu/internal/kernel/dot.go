package kernel

import "github.com/tessera-llm/tessera/models/dtype"

// Path names the kernels this CPU runs: "avx2", or "go" for the twins.
func Path() string {
	if hasAVX2 {
		return "avx2"
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
	if hasAVX2 {
		return dotQ4AVX2(&codes[0], &scales[0], &x.Codes[0], &x.DS[0], g)
	}
	return dotQ4Go(codes, scales, x.Codes, x.DS)
}

// DotQ4x4 sets out[r] to DotQ4(codes, scales, xs[r]) for four rows at once,
// unpacking each weight group once for all of them (the batched path of
// prompts). Every result equals DotQ4's bit for bit.
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
	if hasAVX2 {
		dotQ4x4AVX2(&codes[0], &scales[0], g,
			&[4]*int16{&xs[0].Codes[0], &xs[1].Codes[0], &xs[2].Codes[0], &xs[3].Codes[0]},
			&[4]*float32{&xs[0].DS[0], &xs[1].DS[0], &xs[2].DS[0], &xs[3].DS[0]}, out)
		return
	}
	for r, x := range xs {
		out[r] = dotQ4Go(codes, scales, x.Codes, x.DS)
	}
}

// dotQ4Go is the definition of DotQ4, the twin the assembly is tested
// against. Each group:
//
//	sd = f32(s·d), mt = f32(m·sum)
//	lane_k = Σ_{i=4k}^{4k+3} q_i·x_i (exact); acc_k += f32(f32(lane_k)·sd)
//	macc += mt
//
// and at the end ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7)) + macc: the
// horizontal sum of a 256-bit register folded in halves.
func dotQ4Go(codes, scales []uint32, xq []int16, ds []float32) float32 {
	var acc [Lanes]float32
	var macc float32
	for g, sm := range scales {
		s, m := dtype.UnpackScaleMin(sm)
		sd, mt := float32(s*ds[2*g]), float32(m*ds[2*g+1])
		macc += mt
		ws := codes[4*g : 4*g+4]
		x := xq[g*Group : (g+1)*Group]
		for k := range Lanes {
			var lane int32
			for i := 4 * k; i < 4*k+4; i++ {
				// Input i is nibble i%8 of word i/8; its code sits at
				// i/2 (even i) or 16+i/2 (odd i) in QRow order.
				q := int32(ws[i/8] >> (4 * (i % 8)) & 15)
				lane += q * int32(x[i/2+i%2*Group/2])
			}
			acc[k] += float32(float32(lane) * sd)
		}
	}
	return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])) + macc
}
