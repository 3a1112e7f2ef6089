package cpu

import (
	"cmp"
	"math"
	"slices"

	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
)

// The ops below work on plain slices so that kernel tests can call them
// directly as the Go twins of the WGSL kernels. They follow llama2.c's run.c
// in the order of their floating-point operations, except that dot products
// and sums of squares sum in the 32 lanes of kernel.DotF32 (vector
// registers, then a fixed fold), which the WGSL kernels do not follow
// either.

// RMSNorm sets dst = x / sqrt(mean(x²) + eps) * w. The sum of squares is
// kernel.DotF32(x, x): one serial chain of adds was 1.5% of a served
// 32-stream run's CPU (every layer's two norms on every row).
func RMSNorm(dst, x, w []float32, eps float32) {
	ss := kernel.DotF32(x, x)
	ss = ss/float32(len(x)) + eps
	inv := float32(1 / math.Sqrt(float64(ss)))
	for i, v := range x {
		dst[i] = w[i] * (inv * v)
	}
}

// MatMul sets dst[m×n] = x[m×k] · w[n×k]ᵀ (see products).
func MatMul(dst, x, w []float32, m, k, n, workers int) {
	matMul(dst, x, w, m, k, n, newTeam(workers))
}

// matMul is products' split for f32 weights, a worker's weight rows
// meeting a block of input rows (rowBlock) in one kernel.DotF32Block call
// (register tiles of four weight rows by three input rows where the CPU
// has AVX-512; the bits of DotF32 and of products' four-row kernel alike).
func matMul(dst, x, w []float32, m, k, n int, t *team) {
	t.over(m*n*k, n, func(lo, hi int) {
		mb := rowBlock(m, k)
		for i := 0; i < m; i += mb {
			kernel.DotF32Block(dst[i*n+lo:], n, w[lo*k:hi*k], hi-lo, x[i*k:], k, min(mb, m-i))
		}
	})
}

// rowBlockBytes bounds the input rows that a worker's weight rows meet
// before moving on: a block stays in the core's cache while every weight
// row of the worker's share passes it. Without it, a product of many rows
// (a vision tower's 1024 patches, a long prompt) read all of x from
// memory once for every weight row: x of 1024 rows of 768 floats is 3 MiB,
// and each of its bytes met two multiply-adds before being evicted.
const rowBlockBytes = 256 << 10

// rowBlock is how many input rows of k values (as f32) make a block of at
// most rowBlockBytes: a multiple of twelve (products' four-row kernels,
// DotF32Block's tiles of three), at least twelve, at most m.
func rowBlock(m, k int) int {
	r := rowBlockBytes / (4 * max(k, 1))
	return min(m, max(12, r-r%12))
}

// products sets dst[i·n+j] to the product of input row i with weight row
// j, the shape every matrix product of the backend shares: the n weight
// rows are split across the team t so that each reads its own slice of the
// weights, and each weight row meets the input rows four at a time (four
// computes four products of one weight row at once, reading it once: a
// prompt reads the weights a quarter as often), the rest one at a time, a
// block of input rows at a time (rowBlock).
// four must give one's bits, so that no result depends on the number of
// rows, their grouping or the number of workers. k is the inner dimension,
// for the decision to stay on one goroutine for small products.
func products[R any](dst []float32, rows []R, n, k int, t *team, one func(j int, x *R) float32, four func(j int, xs *[4]*R, out *[4]float32)) {
	m := len(rows)
	t.over(m*n*k, n, func(lo, hi int) {
		var out [4]float32
		var xs [4]*R // one per worker: four may keep it
		mb := rowBlock(m, k)
		for i0 := 0; i0 < m; i0 += mb {
			end := min(m, i0+mb)
			for j := lo; j < hi; j++ {
				i := i0
				for ; i+4 <= end; i += 4 {
					xs = [4]*R{&rows[i], &rows[i+1], &rows[i+2], &rows[i+3]}
					four(j, &xs, &out)
					for r, v := range out {
						dst[(i+r)*n+j] = v
					}
				}
				for ; i < end; i++ {
					dst[i*n+j] = one(j, &rows[i])
				}
			}
		}
	})
}

// Dot is the float32 dot product (kernel.DotF32: vector code where the CPU
// has it, its Go twin elsewhere, the same bits).
func Dot(a, b []float32) float32 { return kernel.DotF32(a, b) }

// Rope rotates every head of the row x at position pos.
func Rope(x []float32, pos int, r backend.Rope) {
	RopeWith(x, RopeAngles(nil, RopeFreqs(nil, r), r.Mscale(), pos), r)
}

// RopeFreqs returns backend.Rope.Freq of every rotation pair, reusing f.
func RopeFreqs(f []float32, r backend.Rope) []float32 {
	f = f[:0]
	for i := 0; i < r.Dim/2; i++ {
		f = append(f, r.Freq(i))
	}
	return f
}

// RopeAngles returns the cosine and sine of each rotation pair's angle at
// position pos (cos, sin of pair i at 2i, 2i+1) for the pairs' frequencies
// freqs, each times scale (Rope.Mscale), reusing cs: computed once per row
// and applied to every head.
func RopeAngles(cs, freqs []float32, scale float32, pos int) []float32 {
	cs = cs[:0]
	for _, f := range freqs {
		angle := float32(pos) * f
		cs = append(cs, float32(math.Cos(float64(angle)))*scale, float32(math.Sin(float64(angle)))*scale)
	}
	return cs
}

// RopeAnglesMulti is RopeAngles for a multi-axis rotation (r.Sections):
// pair i's angle is pos[r.Axis(i)]·freqs[i], pos being the row's four
// positions (Batch.RopePos).
func RopeAnglesMulti(cs, freqs []float32, r backend.Rope, pos []int32) []float32 {
	cs = cs[:0]
	scale := r.Mscale()
	for i, f := range freqs {
		angle := float32(pos[r.Axis(i)]) * f
		cs = append(cs, float32(math.Cos(float64(angle)))*scale, float32(math.Sin(float64(angle)))*scale)
	}
	return cs
}

// RopeWith rotates every head of x by the angles of RopeAngles.
func RopeWith(x, cs []float32, r backend.Rope) {
	for h := 0; h < r.Heads; h++ {
		head := x[h*r.HeadDim : (h+1)*r.HeadDim]
		for i := 0; i < r.Dim/2; i++ {
			a, b := i, i+r.Dim/2 // halves
			if r.Layout == tensor.RopePairs {
				a, b = 2*i, 2*i+1
			}
			c, s := cs[2*i], cs[2*i+1]
			v0, v1 := head[a], head[b]
			head[a] = float32(v0*c) - float32(v1*s)
			head[b] = float32(v0*s) + float32(v1*c)
		}
	}
}

// AttendHead sets out to the attention of one query head q over the
// positions whose keys and values are records recs[t] of k and v, each
// score scaled and, for softcap > 0, soft-capped; sink, unless -Inf,
// joins the softmax without a value (gpt-oss's attention sinks). scores
// is scratch of at least len(recs) values.
func AttendHead(out, q []float32, k, v *KVStore, recs []int, scale, softcap, sink float32, scores []float32) {
	n := len(recs)
	mx := float32(math.Inf(-1))
	for t, r := range recs {
		s := k.dot(q, r) * scale
		if softcap > 0 {
			s = Softcap(s, softcap)
		}
		scores[t], mx = s, max(mx, s)
	}
	mx = max(mx, sink)
	// The softmax's weights are left unnormalised and the sum divides the
	// output once: hd multiplies instead of n divisions.
	var sum float32
	for t, s := range scores[:n] {
		scores[t] = expf(s - mx)
		sum += scores[t]
	}
	if !math.IsInf(float64(sink), -1) {
		sum += expf(sink - mx)
	}
	clear(out)
	for t, r := range recs {
		v.axpy(out, scores[t], r)
	}
	inv := 1 / sum
	for i := range out {
		out[i] *= inv
	}
}

// Softmax normalises x in place, subtracting the maximum for stability.
func Softmax(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float32
	for i, v := range x {
		x[i] = expf(v - mx)
		sum += x[i]
	}
	inv := 1 / sum
	for i := range x {
		x[i] *= inv
	}
}

// Silu is x·sigmoid(x).
func Silu(x float32) float32 { return x * (1 / (1 + expf(-x))) }

// GELUTanh is GELU's tanh approximation,
// x/2·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³))).
func GELUTanh(x float32) float32 {
	const c = 0.7978845608028654 // sqrt(2/π)
	return 0.5 * x * (1 + tanhf(c*(x+float32(0.044715*x*x*x))))
}

// Act applies activation a.
func Act(a tensor.Activation, x float32) float32 {
	switch a {
	case tensor.GELUTanh:
		return GELUTanh(x)
	case tensor.Sigmoid:
		return Sigmoid(x)
	case tensor.GELUQuick: // Gemma 4's vision tower gates with it
		return x * Sigmoid(1.702*x)
	}
	return Silu(x)
}

// Sigmoid is 1/(1+e^-x).
func Sigmoid(x float32) float32 { return 1 / (1 + expf(-x)) }

// Softcap is cap·tanh(x/cap): about x for |x| ≪ cap, never beyond ±cap.
func Softcap(x, cap float32) float32 { return cap * tanhf(x/cap) }

func tanhf(x float32) float32 { return float32(math.Tanh(float64(x))) }

// TopK returns the k largest values of x and their indices, largest first,
// the lower index first among equals.
func TopK(x []float32, k int) ([]int32, []float32) {
	idx := make([]int32, len(x))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortStableFunc(idx, func(a, b int32) int { return cmp.Compare(x[b], x[a]) })
	idx = idx[:k]
	vals := make([]float32, k)
	for i, id := range idx {
		vals[i] = x[id]
	}
	return idx, vals
}
