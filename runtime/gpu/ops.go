package gpu

import (
	"fmt"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// The simple ops: one invocation per output element (or per row), each the
// WGSL twin of the function of the same name in runtime/cpu.

const elementWG = 256

var (
	embedOp   = op{kernel: "embed", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}
	rmsnormOp = op{kernel: "rmsnorm", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}
	ropeOp    = op{kernel: "rope", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}
	storeKVOp = op{kernel: "store_kv", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
	gluOp     = op{kernel: "glu", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly}}
	scaleOp   = op{kernel: "scale", operands: []webgpu.Access{webgpu.ReadWrite}}
	addOp     = op{kernel: "add", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly}}
	argmaxOp  = op{kernel: "argmax", operands: []webgpu.Access{webgpu.ReadOnly, webgpu.ReadWrite}}
	biasOp    = op{kernel: "bias", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly}}
	headNorm  = op{kernel: "rmsnorm_heads", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly}}
	topkOp    = op{kernel: "topk", operands: []webgpu.Access{webgpu.ReadOnly, webgpu.ReadWrite}}
	maskOp    = op{kernel: "mask", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly}}
)

func (b *Backend) Embed(dst backend.Tensor, table backend.Weight) {
	d, w := dst.(*Tensor), table.(*Weight)
	if w.storage != backend.F32 {
		b.embedQ(d, w)
		return
	}
	n := b.rows(d)
	x, y := b.grid(n*d.cols, elementWG)
	for _, pt := range w.parts {
		b.record(embedOp, params{uint32(d.cols), uint32(d.rows), uint32(pt.row0), uint32(pt.rows)},
			[]webgpu.Binding{{Buffer: d.buf}, {Buffer: pt.buf}, {Buffer: b.tokens}}, x, y, 1)
	}
}

func (b *Backend) RMSNorm(dst, x backend.Tensor, w backend.Weight, eps float32) {
	d, xs, ws := dst.(*Tensor), x.(*Tensor), w.(*Weight)
	o, wg := b.reduce(rmsnormOp)
	b.record(o, params{uint32(d.cols), uint32(d.rows), f32param(eps), wg},
		[]webgpu.Binding{{Buffer: d.buf}, {Buffer: xs.buf}, {Buffer: ws.parts[0].buf}}, uint32(b.rows(d)), 1, 1)
}

func (b *Backend) Rope(x backend.Tensor, r backend.Rope) {
	xs := x.(*Tensor)
	if r.Dim == 0 { // no rotated dimensions (NoPE layers)
		return
	}
	freqs, err := b.ropeFreqs(r)
	if err != nil {
		b.fail(err)
		return
	}
	pos, axes := b.pos, 0
	if r.Multi() && b.batch.RopePos != nil { // each pair its axis's position
		pos, axes = b.ropePos, 4
	}
	gx, gy := b.grid(b.rows(xs)*r.Heads*r.Dim/2, elementWG)
	b.record(ropeOp, params{uint32(xs.cols), uint32(xs.rows), uint32(r.Heads), uint32(r.HeadDim), uint32(r.Dim), uint32(r.Layout), uint32(axes)},
		[]webgpu.Binding{{Buffer: xs.buf}, {Buffer: freqs}, {Buffer: pos}}, gx, gy, 1)
}

func (b *Backend) StoreKV(kv backend.KV, l int, k, v backend.Tensor) {
	c, ks, vs := kv.(*KV), k.(*Tensor), v.(*Tensor)
	gx, gy := b.grid(b.rows(ks)*c.shape.Heads, elementWG)
	b.record(storeKVOp.forKV(c), params{uint32(c.shape.Heads), uint32(c.shape.HeadDim), uint32(ks.rows), uint32(c.context)},
		[]webgpu.Binding{{Buffer: c.k[l]}, {Buffer: c.v[l]}, {Buffer: ks.buf}, {Buffer: vs.buf}, {Buffer: b.slotsFor(c)}}, gx, gy, 1)
}

// slotsFor is the buffer of each row's slot in cache c: its ring's for a
// windowed cache.
func (b *Backend) slotsFor(c *KV) webgpu.Buffer {
	if c.shape.Windowed {
		return b.windowSlots
	}
	return b.slots
}

// tablesFor is the buffer of the sequences' block tables in cache c: the
// rings' for a windowed cache.
func (b *Backend) tablesFor(c *KV) webgpu.Buffer {
	if c.shape.Windowed {
		return b.windows
	}
	return b.tables
}

// CopyBlock copies one block of every layer, recorded in order with the
// step's dispatches. WebGPU cannot copy within one buffer, so each copy goes
// through a block-sized scratch buffer.
func (b *Backend) CopyBlock(kv backend.KV, src, dst int) {
	c := kv.(*KV)
	if c.shape.Layers == 0 { // the pool's cache of a model whose layers all keep rings
		return
	}
	size := int64(c.shape.BlockSize) * c.slotBytes()
	if c.scratch == nil {
		var err error
		if c.scratch, err = b.buffer("kv block copy", size, webgpu.CopySrc|webgpu.CopyDst); err != nil {
			b.fail(err)
			return
		}
	}
	for l := range c.shape.Layers {
		for _, buf := range []webgpu.Buffer{c.k[l], c.v[l]} {
			b.rec.Copy(buf, int64(src)*size, c.scratch, 0, size)
			b.rec.Copy(c.scratch, 0, buf, int64(dst)*size, size)
		}
	}
	b.pending = true
}

func (b *Backend) GLU(gate, up backend.Tensor, act tensor.Activation) {
	g, u := gate.(*Tensor), up.(*Tensor)
	gx, gy := b.grid(b.rows(g)*g.cols, elementWG)
	b.record(gluOp, params{uint32(g.cols), uint32(g.rows), uint32(act)},
		[]webgpu.Binding{{Buffer: g.buf}, {Buffer: u.buf}}, gx, gy, 1)
}

func (b *Backend) Scale(x backend.Tensor, s float32) { b.scale(x, 0, s) }

func (b *Backend) Softcap(x backend.Tensor, cap float32) { b.scale(x, 1, cap) }

// scale records the scale kernel in mode 0 (x·s) or 1 (soft cap s).
func (b *Backend) scale(x backend.Tensor, mode uint32, s float32) {
	xs := x.(*Tensor)
	gx, gy := b.grid(b.rows(xs)*xs.cols, elementWG)
	b.record(scaleOp, params{uint32(xs.cols), uint32(xs.rows), mode, f32param(s)},
		[]webgpu.Binding{{Buffer: xs.buf}}, gx, gy, 1)
}

func (b *Backend) AddBias(x backend.Tensor, bias backend.Weight) {
	xs := x.(*Tensor)
	gx, gy := b.grid(b.rows(xs)*xs.cols, elementWG)
	b.record(biasOp, params{uint32(xs.cols), uint32(xs.rows)},
		[]webgpu.Binding{{Buffer: xs.buf}, {Buffer: bias.(*Weight).parts[0].buf}}, gx, gy, 1)
}

func (b *Backend) HeadNorm(x backend.Tensor, w backend.Weight, headDim int, eps float32) {
	xs := x.(*Tensor)
	b.record(headNorm, params{uint32(xs.cols), uint32(xs.rows), uint32(headDim), f32param(eps)},
		[]webgpu.Binding{{Buffer: xs.buf}, {Buffer: w.(*Weight).parts[0].buf}}, uint32(xs.cols/headDim), uint32(b.rows(xs)), 1)
}

func (b *Backend) Add(dst, x backend.Tensor) {
	d, xs := dst.(*Tensor), x.(*Tensor)
	gx, gy := b.grid(b.rows(d)*d.cols, elementWG)
	b.record(addOp, params{uint32(d.cols), uint32(d.rows)},
		[]webgpu.Binding{{Buffer: d.buf}, {Buffer: xs.buf}}, gx, gy, 1)
}

func (b *Backend) CopyRow(t backend.Tensor, dst int, x backend.Tensor, src int) {
	ts, xs := t.(*Tensor), x.(*Tensor)
	row := int64(ts.cols) * 4
	b.rec.Copy(xs.buf, int64(src)*row, ts.buf, int64(dst)*row, row)
	b.pending = true
	b.seq++
}

// fail keeps the first error met while recording.
func (b *Backend) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// ropeFreqs returns a buffer of RoPE's inverse frequencies for r, computed
// on the host exactly as the CPU reference computes them, so that the two
// backends rotate by the same angles.
func (b *Backend) ropeFreqs(r backend.Rope) (webgpu.Buffer, error) {
	return b.ropeBuffer(r, false)
}

// ropeUniformSize is the bytes of the frequencies as a uniform
// (attention_lane's Rope form): array<vec4<f32>, 65>, room for the 256
// frequencies and the scale of heads of maxHeadDim.
const ropeUniformSize = 65 * 16

// ropeUniform is ropeFreqs as a uniform buffer of ropeUniformSize bytes,
// for a rotation by one axis.
func (b *Backend) ropeUniform(r backend.Rope) (webgpu.Buffer, error) {
	if r.Multi() || 4*(r.Dim/2+1) > ropeUniformSize {
		return nil, fmt.Errorf("gpu: a rotation of %d dimensions (multi-axis %v) as a uniform", r.Dim, r.Multi())
	}
	return b.ropeBuffer(r, true)
}

// ropeBuffer is ropeFreqs (uniform false) or ropeUniform.
func (b *Backend) ropeBuffer(r backend.Rope, uniform bool) (webgpu.Buffer, error) {
	key := ropeKey{r.Dim, r.Theta, r.Mscale(), nil, r.Sections, r.Axes, uniform}
	if r.Factors != nil {
		key.factors = &r.Factors[0]
	}
	if buf, ok := b.freqs[key]; ok {
		return buf, nil
	}
	// The frequencies, then the scale, then (a multi-axis rotation) each
	// pair's axis.
	f := make([]float32, r.Dim/2+1, r.Dim+1)
	for i := range r.Dim / 2 {
		f[i] = r.Freq(i)
	}
	f[r.Dim/2] = r.Mscale()
	if r.Multi() {
		for i := range r.Dim / 2 {
			f = append(f, float32(r.Axis(i)))
		}
	}
	size, usage := int64(4*len(f)), webgpu.Storage|webgpu.CopyDst
	if uniform {
		size, usage = ropeUniformSize, webgpu.Uniform|webgpu.CopyDst
	}
	buf, err := b.buffer("rope freqs", size, usage)
	if err != nil {
		return nil, err
	}
	if err := b.dev.Write(buf, 0, f32bytes(f)); err != nil {
		return nil, err
	}
	if b.freqs == nil {
		b.freqs = map[ropeKey]webgpu.Buffer{}
	}
	b.freqs[key] = buf
	return buf, nil
}

type ropeKey struct {
	dim     int
	theta   float64
	scale   float32
	factors *float32 // the config's scaling factors, by identity
	// a multi-axis rotation's sections and their order
	sections [4]int
	axes     backend.RopeAxes
	uniform  bool // ropeUniform's
}
