package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// On-device sampling (backend.Sampling): the penalize kernel applies each
// row's penalties to the logits in place, and the sample kernel draws each
// row's token with the values of the host sampler's own random stream.
// What a row draws with is written once by SetSampling (a chain's steps
// share it); the kernel counts each row's used draws in state, which
// Sample reads back with the token (8 bytes a row) and a chain's Kept
// reads after the kept ids. Every draw is settled on the device: a flat
// row's draw past the ranked candidates by radix selection (sample.wgsl).

var (
	penalizeOp = op{kernel: "penalize", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly}}
	sampleOp   = op{kernel: "sample", operands: []webgpu.Access{webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadWrite, webgpu.ReadWrite}}
)

// sampling is the backend's on-device sampling state, made on first use.
type sampling struct {
	cfg, draws, state, pens webgpu.Buffer
	npens                   int
	rows                    int  // rows SetSampling described
	chained                 bool // the chain being kept draws with KeepSampled
	kept                    []backend.Drawn
}

// samplingBuffers makes the buffers of on-device sampling on first use.
func (b *Backend) samplingBuffers() (*sampling, error) {
	if b.smp != nil {
		return b.smp, nil
	}
	s := &sampling{}
	var err error
	if s.cfg, err = b.buffer("sampling rows", int64(16*b.maxRows), webgpu.Storage|webgpu.CopyDst); err != nil {
		return nil, err
	}
	if s.draws, err = b.buffer("sampling draws", int64(8*backend.MaxChain*b.maxRows), webgpu.Storage|webgpu.CopyDst); err != nil {
		return nil, err
	}
	if s.state, err = b.buffer("sampling state", int64(8*b.maxRows), webgpu.Storage|webgpu.CopyDst|webgpu.CopySrc); err != nil {
		return nil, err
	}
	b.smp = s
	return s, nil
}

// SetSampling writes each row's settings, draws and penalties.
func (b *Backend) SetSampling(rows []backend.SampleRow) error {
	if b.err != nil {
		return b.err
	}
	if len(rows) > b.maxRows {
		return fmt.Errorf("gpu: sampling %d rows of at most %d", len(rows), b.maxRows)
	}
	s, err := b.samplingBuffers()
	if err != nil {
		return err
	}
	cfg := make([]byte, 16*len(rows))
	draws := make([]byte, 8*backend.MaxChain*len(rows))
	var pens []byte
	for i, r := range rows {
		if r.TopK < 0 || !(r.Temperature >= 0) || len(r.Draws) > backend.MaxChain {
			return fmt.Errorf("gpu: row %d samples with temperature %g, top-k %d, %d draws", i, r.Temperature, r.TopK, len(r.Draws))
		}
		for j, v := range []uint32{math.Float32bits(r.Temperature), math.Float32bits(r.TopP), math.Float32bits(r.MinP), uint32(r.TopK)} {
			binary.LittleEndian.PutUint32(cfg[16*i+4*j:], v)
		}
		for j, d := range r.Draws {
			if !(d >= 0 && d < 1) {
				return fmt.Errorf("gpu: row %d draws %g, outside [0, 1)", i, d)
			}
			// d * 2^64 exactly (a PCG draw is k * 2^-53): the kernel's
			// radix selection needs every bit, where an f32 would move a
			// flat row's draw across a boundary a few times in a thousand.
			binary.LittleEndian.PutUint64(draws[8*(backend.MaxChain*i+j):], uint64(d*(1<<64)))
		}
		for _, p := range r.Penalties {
			if p.ID < 0 {
				return fmt.Errorf("gpu: penalty of token %d", p.ID)
			}
			for _, v := range []uint32{uint32(i), uint32(p.ID), math.Float32bits(p.Bias), math.Float32bits(p.Repeat), math.Float32bits(p.Sub)} {
				pens = binary.LittleEndian.AppendUint32(pens, v)
			}
		}
	}
	if len(rows) > 0 {
		if err := b.dev.Write(s.cfg, 0, cfg); err != nil {
			return err
		}
		if err := b.dev.Write(s.draws, 0, draws); err != nil {
			return err
		}
	}
	if len(pens) > 0 {
		if s.pens == nil || s.pens.Size() < int64(len(pens)) {
			if s.pens, err = b.buffer("sampling penalties", int64(max(len(pens), 20*256)), webgpu.Storage|webgpu.CopyDst); err != nil {
				return err
			}
		}
		if err := b.dev.Write(s.pens, 0, pens); err != nil {
			return err
		}
	}
	s.rows, s.npens = len(rows), len(pens)/20
	return nil
}

// recordSample records the penalties and the draw of the first n rows of x.
func (b *Backend) recordSample(xs *Tensor, n int) {
	s := b.smp
	switch {
	case s == nil || n > s.rows:
		b.fail(fmt.Errorf("gpu: sampling %d rows before SetSampling described them", n))
		return
	case n > xs.rows:
		b.fail(fmt.Errorf("gpu: sampling %d rows of a %d-row tensor", n, xs.rows))
		return
	case xs.cols > backend.MaxSampleColumns:
		b.fail(fmt.Errorf("gpu: sampling rows of %d columns, at most %d", xs.cols, backend.MaxSampleColumns))
		return
	}
	if s.npens > 0 {
		b.record(penalizeOp, params{uint32(s.npens), uint32(xs.cols)}, []webgpu.Binding{{Buffer: xs.buf}, {Buffer: s.pens}}, uint32((s.npens+63)/64), 1, 1)
	}
	b.record(sampleOp, params{uint32(xs.cols), backend.MaxChain},
		[]webgpu.Binding{{Buffer: xs.buf}, {Buffer: s.cfg}, {Buffer: s.draws}, {Buffer: b.result}, {Buffer: s.state}}, uint32(n), 1, 1)
}

// resetState zeroes every row's draw count before a draw that
// starts afresh (Sample, a chain's first step). Nothing recorded and not
// yet submitted reads the state then: the last draw was read back.
func (b *Backend) resetState(n int) error {
	return b.dev.Write(b.smp.state, 0, make([]byte, 8*n))
}

// Sample draws the first n rows of x and reads back each row's token and
// its draws used: 8 bytes a row.
func (b *Backend) Sample(x backend.Tensor, n int) ([]backend.Drawn, error) {
	xs := x.(*Tensor)
	if b.smp == nil || n > b.smp.rows || n > b.maxRows {
		return nil, fmt.Errorf("gpu: sampling %d rows before SetSampling described them", n)
	}
	if err := b.resetState(n); err != nil {
		return nil, err
	}
	b.recordSample(xs, n)
	raw, err := b.flushRead(b.smp.state, int64(8*n))
	if err != nil {
		return nil, err
	}
	return drawn(raw, n), nil
}

// drawn decodes n rows of the state buffer.
func drawn(raw []byte, n int) []backend.Drawn {
	out := make([]backend.Drawn, n)
	for i := range out {
		w := func(j int) uint32 { return binary.LittleEndian.Uint32(raw[4*(2*i+j):]) }
		out[i] = backend.Drawn{Token: int32(w(0)), Draws: int(w(1))}
	}
	return out
}

// KeepSampled is Keep with the sample kernel in place of argmax.
func (b *Backend) KeepSampled(x backend.Tensor, n int) {
	xs := x.(*Tensor)
	if b.kept >= backend.MaxChain || n > b.maxRows {
		b.fail(fmt.Errorf("gpu: chain of more than %d steps of at most %d rows", backend.MaxChain, b.maxRows))
		return
	}
	if err := b.chainBuffers(); err != nil {
		b.fail(err)
		return
	}
	if b.smp == nil {
		b.fail(fmt.Errorf("gpu: KeepSampled before SetSampling"))
		return
	}
	if b.kept == 0 {
		if err := b.resetState(n); err != nil {
			b.fail(err)
			return
		}
	}
	b.smp.chained = true
	b.recordSample(xs, n)
	b.keepResult(n)
}

// KeptDraws returns what the last Kept read of a sampled chain's rows.
func (b *Backend) KeptDraws() []backend.Drawn {
	if b.smp == nil {
		return nil
	}
	return b.smp.kept
}
