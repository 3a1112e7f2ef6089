package gpu

import (
	"fmt"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// Linear attention's ops (backend.Recurrences): the conv1d and delta_rule
// kernels over per-sequence states, one buffer a layer; each sequence's
// slot comes from seqState, written by Begin (a chain's later steps keep
// the first step's sequences and so its slots).

var (
	conv1dOp    = op{kernel: "conv1d", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
	deltaRuleOp = op{kernel: "delta_rule", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
)

// deltaRuleWG is the delta_rule kernel's workgroup; maxDeltaDim its widest
// head (workgroup memory for q and k).
const deltaRuleWG, maxDeltaDim, maxConvTaps = 64, 512, 16

// Recurrent holds each linear layer's states: Slots records of the
// convolution's rows, then the delta rule's matrices.
type Recurrent struct {
	shape   backend.RecurrentShape
	layers  []webgpu.Buffer
	scratch webgpu.Buffer // one slot: WebGPU copies within a buffer through it
}

func (r *Recurrent) Shape() backend.RecurrentShape { return r.shape }

// stride is one slot's floats in a layer's buffer.
func (r *Recurrent) stride() int { return r.shape.ConvFloats() + r.shape.MatrixFloats() }

func (b *Backend) NewRecurrent(s backend.RecurrentShape) (backend.Recurrent, error) {
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	if s.HeadDim > maxDeltaDim || s.Conv > maxConvTaps {
		return nil, fmt.Errorf("gpu: linear attention of heads of %d (at most %d) and %d taps (at most %d)", s.HeadDim, maxDeltaDim, s.Conv, maxConvTaps)
	}
	r := &Recurrent{shape: s}
	size := 4 * int64(s.Slots) * int64(r.stride())
	if size > b.info.MaxStorageBufferBindingSize {
		return nil, fmt.Errorf("gpu: one layer's recurrent states (%s) exceed the storage binding limit %s", dtype.FormatBytes(size), dtype.FormatBytes(b.info.MaxStorageBufferBindingSize))
	}
	for range s.Layers {
		buf, err := b.buffer("recurrent state", size, webgpu.Storage|webgpu.CopyDst|webgpu.CopySrc)
		if err != nil {
			return nil, err
		}
		r.layers = append(r.layers, buf)
	}
	if b.seqState == nil {
		var err error
		if b.seqState, err = b.buffer("state slots", int64(4*b.maxRows), webgpu.Storage|webgpu.CopyDst); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (b *Backend) Conv1D(dst, x backend.Tensor, w backend.Weight, st backend.Recurrent, l int) {
	d, xs, r := dst.(*Tensor), x.(*Tensor), st.(*Recurrent)
	s := r.shape
	seqs := len(b.batch.Tables)
	b.record(conv1dOp, params{uint32(s.Channels), uint32(s.Conv), uint32(seqs), uint32(r.stride())},
		[]webgpu.Binding{{Buffer: d.buf}, {Buffer: xs.buf}, {Buffer: w.(*Weight).parts[0].buf}, {Buffer: r.layers[l]},
			{Buffer: b.pos}, {Buffer: b.rowSeq}, {Buffer: b.seqState}},
		uint32((s.Channels+63)/64), uint32(seqs), 1)
}

func (b *Backend) DeltaNet(dst, qkv, gates backend.Tensor, decay backend.Weight, st backend.Recurrent, l int, dn backend.DeltaNet) {
	d, x, g, r := dst.(*Tensor), qkv.(*Tensor), gates.(*Tensor), st.(*Recurrent)
	seqs := len(b.batch.Tables)
	b.record(deltaRuleOp, params{uint32(dn.KHeads), uint32(dn.VHeads), uint32(dn.HeadDim), uint32(seqs), uint32(r.stride()),
		uint32(r.shape.ConvFloats()), f32param(dn.Eps)},
		[]webgpu.Binding{{Buffer: d.buf}, {Buffer: x.buf}, {Buffer: g.buf}, {Buffer: decay.(*Weight).parts[0].buf}, {Buffer: r.layers[l]},
			{Buffer: b.pos}, {Buffer: b.rowSeq}, {Buffer: b.seqState}},
		uint32(dn.VHeads), uint32(seqs), 1)
}

// CopyState copies a slot of every layer, recorded in order with the
// step's dispatches, through a slot-sized scratch buffer.
func (b *Backend) CopyState(st backend.Recurrent, src, dst int) {
	r := st.(*Recurrent)
	size := 4 * int64(r.stride())
	if r.scratch == nil {
		var err error
		if r.scratch, err = b.buffer("recurrent state copy", size, webgpu.CopySrc|webgpu.CopyDst); err != nil {
			b.fail(err)
			return
		}
	}
	for _, buf := range r.layers {
		b.rec.Copy(buf, int64(src)*size, r.scratch, 0, size)
		b.rec.Copy(r.scratch, 0, buf, int64(dst)*size, size)
	}
	b.pending = true
	b.seq++
}
