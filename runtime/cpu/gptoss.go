package cpu

import (
	"math"

	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// gpt-oss's ops: the experts' biases, its clamped SwiGLU and the sinks of
// its attention (in AttendHead and attendGroup).

// ExpertBias adds row e of b to each pair row p of x, e the pair's
// expert. The twin of moe_bias.wgsl.
func (b *Backend) ExpertBias(x backend.Tensor, bias backend.Weight, r backend.Routes) {
	b.op()
	xs, w, rs := x.(*Tensor), bias.(*Weight), r.(*Routes)
	pairs := min(b.batch.Len(), rs.rows) * rs.k
	for p := range min(pairs, xs.rows) {
		e := int(rs.IDs[p])
		row, br := xs.Row(p), w.Data[e*xs.cols:(e+1)*xs.cols]
		for c := range row {
			row[c] += br[c]
		}
	}
}

// ExpertGLU is GLU over the step's pair rows: a row's k pairs are one
// after the other, so rows of k·cols values.
func (b *Backend) ExpertGLU(gate, up backend.Tensor, r backend.Routes, act tensor.Activation) {
	g, u, k := gate.(*Tensor), up.(*Tensor), r.(*Routes).k
	b.GLU(&Tensor{rows: g.rows / k, cols: k * g.cols, Data: g.Data}, &Tensor{rows: u.rows / k, cols: k * u.cols, Data: u.Data}, act)
}

// swigluAlpha and swigluLimit are gpt-oss's SwiGLU constants, which
// llama.cpp and transformers fix in code.
const swigluAlpha, swigluLimit = 1.702, 7.0

// SwiGLUOAI is gpt-oss's clamped SwiGLU of gate g and up u (ggml's
// swiglu_oai): x = min(g, 7), x·sigmoid(1.702·x)·(clamp(u, −7, 7) + 1).
func SwiGLUOAI(g, u float32) float32 {
	x := min(g, swigluLimit)
	y := min(max(u, -swigluLimit), swigluLimit)
	return x / (1 + expf(-swigluAlpha*x)) * (y + 1)
}

// sinkOf is head h's sink logit, or -Inf where a has none.
func sinkOf(a backend.Attention, h int) float32 {
	if a.Sinks == nil {
		return float32(math.Inf(-1))
	}
	return a.Sinks.(*Weight).Data[h]
}
