package cpu

import (
	"math"

	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// The encoders' ops (BERT, nomic-bert) and pooling: twins of the layernorm,
// act and mean_pool kernels and of embed as Lookup uses it.

// LayerNorm sets dst = (x - mean) / sqrt(var + eps) * w + b, the variance
// taken about the mean in a second pass, both sums in float64 (as ggml_norm
// does): residual streams have means far from zero, where an f32 sum in
// order loses more than the kernel's tree reduction.
func LayerNorm(dst, x, w, b []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := float32(sum / float64(len(x)))
	var ss float64
	for _, v := range x {
		d := v - mean
		ss += float64(d * d)
	}
	inv := float32(1 / math.Sqrt(float64(float32(ss/float64(len(x)))+eps)))
	for i, v := range x {
		dst[i] = float32((v-mean)*inv*w[i]) + b[i]
	}
}

// GELU is exact GELU, x/2·(1 + erf(x/√2)).
func GELU(x float32) float32 {
	return float32(0.5 * float64(x) * (1 + math.Erf(float64(x)/math.Sqrt2)))
}

// Activation applies any activation Activate takes.
func Activation(a tensor.Activation, x float32) float32 {
	switch a {
	case tensor.GELU:
		return GELU(x)
	case tensor.Tanh:
		return tanhf(x)
	case tensor.GELUQuick:
		return x * Sigmoid(1.702*x)
	}
	return Act(a, x)
}

// MeanPool sets row s of dst (cols wide) to the mean of the rows of x whose
// sequence seq[i] is s, for s < len(dst)/cols; rows are summed in order.
func MeanPool(dst, x []float32, seq []int32, cols int) {
	clear(dst)
	counts := make([]int, len(dst)/cols)
	for i, s := range seq {
		if int(s) >= len(counts) {
			continue
		}
		counts[s]++
		d := dst[int(s)*cols : int(s+1)*cols]
		for c, v := range x[i*cols : (i+1)*cols] {
			d[c] += v
		}
	}
	for s, n := range counts {
		if n == 0 {
			continue
		}
		inv := 1 / float32(n)
		for c := range cols {
			dst[s*cols+c] *= inv
		}
	}
}

func (b *Backend) Lookup(dst backend.Tensor, table backend.Weight, by backend.Index) {
	b.op()
	d, w := dst.(*Tensor), table.(*Weight)
	idx := b.batch.Pos
	if by == backend.ByType {
		idx = b.batch.Types
	}
	rows := len(w.Data) / d.cols
	for i := 0; i < b.rows(d); i++ {
		r := 0 // no types: type 0
		if idx != nil {
			r = int(idx[i])
		}
		if r < 0 || r >= rows {
			continue // as the kernel: a row outside the table is left alone
		}
		copy(d.Row(i), w.Data[r*d.cols:(r+1)*d.cols])
	}
}

func (b *Backend) LayerNorm(dst, x backend.Tensor, w, bias backend.Weight, eps float32) {
	b.op()
	d, xs := dst.(*Tensor), x.(*Tensor)
	ws, bs := w.(*Weight), bias.(*Weight)
	b.team.over(4*b.rows(d)*d.cols, b.rows(d), func(lo, hi int) { // a vision tower's thousands of rows
		for i := lo; i < hi; i++ {
			LayerNorm(d.Row(i), xs.Row(i), ws.Data, bs.Data, eps)
		}
	})
}

// Activate shares the rows among the team: GELU's tanh is dozens of
// operations a value, and a vision tower's feed-forward has millions of
// values a layer (every value is its own, so the bits do not change).
func (b *Backend) Activate(x backend.Tensor, act tensor.Activation) {
	b.op()
	xs := x.(*Tensor)
	cols := xs.cols
	b.team.over(16*b.rows(xs)*cols, b.rows(xs), func(lo, hi int) {
		for i := lo * cols; i < hi*cols; i++ {
			xs.Data[i] = Activation(act, xs.Data[i])
		}
	})
}

func (b *Backend) MeanPool(dst, x backend.Tensor) {
	b.op()
	d, xs := dst.(*Tensor), x.(*Tensor)
	seqs := min(len(b.batch.Tables), d.rows)
	n := b.rows(xs)
	MeanPool(d.Data[:seqs*d.cols], xs.Data[:n*xs.cols], b.batch.Seq[:n], d.cols)
}
