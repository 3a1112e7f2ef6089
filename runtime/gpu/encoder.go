package gpu

import (
	"fmt"

	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// The encoders' ops (BERT, nomic-bert) and pooling. Lookup reuses the embed
// kernel with the batch's positions or token types for ids; bidirectional
// attention (attention.go) binds each row's end of sequence where causal
// attention binds its position.

var (
	layerNormOp = op{kernel: "layernorm", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
	actOp       = op{kernel: "act", operands: []webgpu.Access{webgpu.ReadWrite}}
	meanPoolOp  = op{kernel: "mean_pool", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}
)

func (b *Backend) Lookup(dst backend.Tensor, table backend.Weight, by backend.Index) {
	d, w := dst.(*Tensor), table.(*Weight)
	if w.storage != backend.F32 {
		b.fail(fmt.Errorf("gpu: lookup in a %s table", w.storage))
		return
	}
	ids := b.pos
	if by == backend.ByType {
		var err error
		if ids, err = b.typeIDs(); err != nil {
			b.fail(err)
			return
		}
	}
	n := b.rows(d)
	x, y := b.grid(n*d.cols, elementWG)
	for _, pt := range w.parts {
		b.record(embedOp, params{uint32(d.cols), uint32(d.rows), uint32(pt.row0), uint32(pt.rows)},
			[]webgpu.Binding{{Buffer: d.buf}, {Buffer: pt.buf}, {Buffer: ids}}, x, y, 1)
	}
}

// typeIDs returns the buffer of the batch's token types (zeros where the
// batch has none), written once per step.
func (b *Backend) typeIDs() (webgpu.Buffer, error) {
	if b.enc == nil {
		b.enc = &encState{}
	}
	st := b.enc
	if st.types == nil {
		var err error
		if st.types, err = b.buffer("token types", int64(4*b.maxRows), webgpu.Storage|webgpu.CopyDst); err != nil {
			return nil, err
		}
	}
	if !st.typesWritten {
		types := b.batch.Types
		if types == nil {
			types = make([]int32, b.batch.Len())
		}
		if err := b.dev.Write(st.types, 0, i32bytes(types)); err != nil {
			return nil, fmt.Errorf("gpu: token types: %w", err)
		}
		st.typesWritten = true
	}
	return st.types, nil
}

// ends returns the buffer of each row's end of sequence (Batch.Ends), the
// positions bidirectional attention binds, written once per step.
func (b *Backend) ends() (webgpu.Buffer, []int32, error) {
	if b.enc == nil {
		b.enc = &encState{}
	}
	st := b.enc
	if st.ends == nil {
		var err error
		if st.ends, err = b.buffer("sequence ends", int64(4*b.maxRows), webgpu.Storage|webgpu.CopyDst); err != nil {
			return nil, nil, err
		}
	}
	if st.endRows == nil {
		if b.kept > 0 {
			return nil, nil, fmt.Errorf("gpu: bidirectional attention in a chained step")
		}
		st.endRows = b.batch.Ends()
		if err := b.dev.Write(st.ends, 0, i32bytes(st.endRows)); err != nil {
			return nil, nil, fmt.Errorf("gpu: sequence ends: %w", err)
		}
	}
	return st.ends, st.endRows, nil
}

// encState is what the encoders' ops keep per step.
type encState struct {
	types, ends  webgpu.Buffer
	typesWritten bool    // types holds this step's
	endRows      []int32 // this step's ends, once written
}

// beginEncoder forgets the last step's types and ends.
func (b *Backend) beginEncoder() {
	if b.enc != nil {
		b.enc.typesWritten, b.enc.endRows = false, nil
	}
}

func (b *Backend) LayerNorm(dst, x backend.Tensor, w, bias backend.Weight, eps float32) {
	d, xs := dst.(*Tensor), x.(*Tensor)
	b.record(layerNormOp, params{uint32(d.cols), uint32(d.rows), f32param(eps)},
		[]webgpu.Binding{{Buffer: d.buf}, {Buffer: xs.buf}, {Buffer: w.(*Weight).parts[0].buf}, {Buffer: bias.(*Weight).parts[0].buf}},
		uint32(b.rows(d)), 1, 1)
}

func (b *Backend) Activate(x backend.Tensor, act tensor.Activation) {
	xs := x.(*Tensor)
	gx, gy := b.grid(b.rows(xs)*xs.cols, elementWG)
	b.record(actOp, params{uint32(xs.cols), uint32(xs.rows), uint32(act)}, []webgpu.Binding{{Buffer: xs.buf}}, gx, gy, 1)
}

func (b *Backend) MeanPool(dst, x backend.Tensor) {
	d, xs := dst.(*Tensor), x.(*Tensor)
	if d.cols != xs.cols {
		b.fail(fmt.Errorf("gpu: mean pool of %d columns into %d", xs.cols, d.cols))
		return
	}
	seqs := min(len(b.batch.Tables), d.rows)
	gx, gy := b.grid(seqs*d.cols, elementWG)
	b.record(meanPoolOp, params{uint32(d.cols), uint32(d.rows)},
		[]webgpu.Binding{{Buffer: d.buf}, {Buffer: xs.buf}, {Buffer: b.rowSeq}}, gx, gy, 1)
}
