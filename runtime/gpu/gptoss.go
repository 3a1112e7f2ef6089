package gpu

import (
	"fmt"

	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// gpt-oss's ops: the experts' biases (moe_bias), its clamped SwiGLU (the
// glu kernel's act 4) and its attention sinks (attention_combine).

var moeBiasOp = op{kernel: "moe_bias", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}

func (b *Backend) ExpertBias(x backend.Tensor, bias backend.Weight, r backend.Routes) {
	xs, w, rs := x.(*Tensor), bias.(*Weight), r.(*Routes)
	if sh := w.Shape(); len(sh) != 2 || sh[1] != xs.cols {
		b.fail(fmt.Errorf("gpu: expert biases of shape %v for rows of %d", sh, xs.cols))
		return
	}
	rows := min(xs.rows/rs.k, rs.rows)
	gx, gy := b.grid(min(b.batch.Len(), rows)*rs.k*xs.cols, elementWG)
	b.record(moeBiasOp, params{uint32(xs.cols), uint32(rows), uint32(rs.k)},
		[]webgpu.Binding{{Buffer: xs.buf}, {Buffer: w.parts[0].buf}, {Buffer: rs.buf}}, gx, gy, 1)
}

// ExpertGLU runs the glu kernel over the step's pair rows: they are a
// row's k pairs one after the other, so rows of k·cols values.
func (b *Backend) ExpertGLU(gate, up backend.Tensor, r backend.Routes, act tensor.Activation) {
	g, u, rs := gate.(*Tensor), up.(*Tensor), r.(*Routes)
	rows := min(g.rows/rs.k, rs.rows)
	gx, gy := b.grid(min(b.batch.Len(), rows)*rs.k*g.cols, elementWG)
	b.record(gluOp, params{uint32(rs.k * g.cols), uint32(rows), uint32(act)},
		[]webgpu.Binding{{Buffer: g.buf}, {Buffer: u.buf}}, gx, gy, 1)
}
