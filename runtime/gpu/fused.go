package gpu

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/shaders"
)

// The fused ops. A Projection is one dispatch per weight part where the
// planned matrix kernel composes with its shaders.Fusion (the GEMVs of
// decoding: matmul_int4_gemv, matmul_gemv, matmul_f16_gemv); elsewhere
// (the tiled GEMMs of prompt chunks, the naive kernel) it is the product into a scratch
// tensor and fuse_epilogue, after an rmsnorm when it normalises. RopeStore
// is one dispatch of rope_kv.

var (
	fuseEpilogueOp = op{kernel: "fuse_epilogue", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly}}
	ropeKVOp       = op{kernel: "rope_kv", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadWrite, webgpu.ReadWrite, webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
)

// Fuse uploads the matrices ts as one weight of their rows, one after the
// other, or alternating (gate, up, gate, up, ...) for a GLU so that the
// two values of an output are adjacent columns of one workgroup; vectors
// are joined. Matrices kept in block types of their own (Blocks) keep
// them, in parts of their own (not for a GLU, whose rows alternate).
func (b *Backend) Fuse(ts []*tensor.Tensor, s backend.Storage, glu bool) (backend.Weight, error) {
	return b.fuse(ts, s, glu, 1)
}

// fuse is Fuse splitting the weight across bindings only at multiples of
// align rows of the result (the rows of one expert, for UploadExperts).
func (b *Backend) fuse(ts []*tensor.Tensor, s backend.Storage, glu bool, align int) (*Weight, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("gpu: fuse of no tensors")
	}
	name := ts[0].Name + "+"
	if len(ts[0].Shape) == 1 {
		var data []float32
		for _, t := range ts {
			if len(t.Shape) != 1 {
				return nil, fmt.Errorf("gpu: fuse of vector %s with %s of shape %v", ts[0].Name, t.Name, t.Shape)
			}
			v, err := t.Float32()
			if err != nil {
				return nil, err
			}
			data = append(data, v...)
		}
		raw := f32bytes(data)
		w, err := b.Upload(tensor.New(name, []int{len(data)}, dtype.F32, func() ([]byte, error) { return raw, nil }))
		if err != nil {
			return nil, err
		}
		return w.(*Weight), nil
	}
	if glu && (len(ts) != 2 || !slices.Equal(ts[0].Shape, ts[1].Shape)) {
		return nil, fmt.Errorf("gpu: a GLU's fused weight needs two matrices of one shape, not %d", len(ts))
	}
	var hs []host
	var split []int
	for _, t := range ts {
		if len(t.Shape) != 2 || t.Shape[1] != ts[0].Shape[1] {
			return nil, fmt.Errorf("gpu: fuse of %s (shape %v) with matrices %d wide", t.Name, t.Shape, ts[0].Shape[1])
		}
		h, err := hostForm(t, s)
		if err != nil {
			return nil, err
		}
		hs, split = append(hs, h), append(split, t.Shape[0])
	}
	if glu && hs[0].format != hs[1].format {
		return nil, fmt.Errorf("gpu: a GLU's gate and up in two formats (%s, %s)", hs[0].format, hs[1].format)
	}
	if slices.ContainsFunc(hs, func(h host) bool { return h.format != hs[0].format }) {
		// Matrices of block types of their own (Q4_K and Q6_K): each its
		// parts, of its format, their rows one after the other.
		w := &Weight{shape: []int{0, ts[0].Shape[1]}, storage: s, split: split}
		for i, h := range hs {
			perPart, err := b.rowsPerPart(ts[i].Name, h, align)
			if err != nil {
				return nil, err
			}
			parts, err := b.uploadParts(ts[i].Name, h, perPart, w.shape[0])
			if err != nil {
				return nil, err
			}
			w.parts = append(w.parts, parts...)
			w.shape[0] += h.rows
		}
		return w, nil
	}
	all := host{rowBytes: hs[0].rowBytes, rowScale: hs[0].rowScale, format: hs[0].format}
	row := func(h host, r int) {
		all.codes = append(all.codes, h.codes[int64(r)*h.rowBytes:][:h.rowBytes]...)
		if h.scales != nil {
			all.scales = append(all.scales, h.scales[int64(r)*h.rowScale:][:h.rowScale]...)
		}
		all.rows++
	}
	if glu {
		for r := range hs[0].rows {
			row(hs[0], r)
			row(hs[1], r)
		}
	} else {
		for _, h := range hs {
			for r := range h.rows {
				row(h, r)
			}
		}
	}
	if glu && align%2 != 0 {
		align *= 2 // a part holds whole pairs
	}
	w, err := b.uploadRows(name, []int{all.rows, ts[0].Shape[1]}, s, all, align)
	if err != nil {
		return nil, err
	}
	w.split, w.pairs = split, glu
	return w, nil
}

func (b *Backend) Project(p backend.Projection) {
	w := p.W.(*Weight)
	split := w.split
	if split == nil {
		if w.whole == nil { // made once: a list made here was an allocation a projection
			w.whole = []int{w.shape[0]}
		}
		split = w.whole
	}
	if err := p.Check(split); err != nil {
		b.fail(fmt.Errorf("gpu: %w", err))
		return
	}
	if p.GLU != w.pairs && !(w.pairs && len(p.Out) == 2) {
		b.fail(fmt.Errorf("gpu: projection with GLU %v of a weight fused for a GLU %v", p.GLU, w.pairs))
		return
	}
	if c, ok := p.LoRA.(*LoRA); ok {
		if _, groups := b.loraGrid(c, p.Out[0].(*Tensor).out, b.rows(p.Out[0].(*Tensor))); groups > 0 {
			b.projectLoRA(p, w, c) // lora.go
			return
		}
	}
	b.project(p, w, false, false)
}

// projection is the fusion of p's product of w: its norm, outputs, GLU,
// residual add, bias and, with lora, adapters (with shrink, their h
// computed by the product itself; their values in halves where p.LoRA
// keeps them so).
func projection(p backend.Projection, w *Weight, lora, shrink bool) shaders.Fusion {
	f := shaders.Fusion{Norm: p.Norm != nil, Outs: len(p.Out), Pairs: w.pairs, GLU: p.GLU, Add: p.Add, Bias: p.Bias != nil, LoRA: lora, Shrink: shrink}
	if lora {
		f.Half = p.LoRA.(*LoRA).half
	}
	return f
}

// project records p, its adapters in the epilogue with lora (their h
// computed by lora_shrink, or with shrink by the product itself:
// projectLoRA).
func (b *Backend) project(p backend.Projection, w *Weight, lora, shrink bool) {
	xs, d := p.X.(*Tensor), p.Out[0].(*Tensor)
	f := projection(p, w, lora, shrink)
	if !f.Fused() {
		b.matmul(d, xs, w, f, nil)
		return
	}
	var ea [maxBindings]webgpu.Binding // on the stack: nothing a dispatch allocates
	extra, err := b.fusionBindings(ea[:0], p, f)
	if err != nil {
		b.fail(err)
		return
	}
	unfused := b.plan.Fusion == "off"
	switch {
	case unfused:
	case b.normPrologue():
	case f.Norm && b.prescaled(d, xs, w, p, f, extra):
		return
	case p.Next != nil && !f.Norm && b.prepareNext(d, xs, w, p, f, extra):
		return
	}
	if !unfused && (!f.Norm || b.normPrologue()) && b.matmul(d, xs, w, f, extra) {
		return
	}
	// The norm in a dispatch of its own, then the product fused with the
	// rest or, where the planned kernel does not compose, into a scratch
	// tensor and through the epilogue kernel.
	x := xs
	if f.Norm {
		if x, err = b.scratch(xs, -xs.cols); err != nil {
			b.fail(err)
			return
		}
		b.RMSNorm(x, xs, p.Norm, p.Eps)
		var xa [maxBindings]webgpu.Binding
		at := normAt(f, extra)
		f.Norm, extra = false, append(append(xa[:0], extra[:at]...), extra[at+1:]...)
		if !f.Fused() {
			b.matmul(d, x, w, f, nil)
			return
		}
		if !unfused && b.matmul(d, x, w, f, extra) {
			return
		}
	}
	y, err := b.scratch(d, w.shape[0])
	if err != nil {
		b.fail(err)
		return
	}
	b.matmul(y, x, w, shaders.Fusion{}, nil)
	units := w.shape[0]
	if f.Pairs {
		units /= 2
	}
	gx, gy := b.grid(b.rows(d)*units, elementWG)
	b.record(b.ops.fused(fuseEpilogueOp, f), params{uint32(w.shape[0]), uint32(d.rows), uint32(d.cols)},
		append([]webgpu.Binding{{Buffer: d.buf}, {Buffer: y.buf}}, extra...), gx, gy, 1)
}

// nextInput is what a residual projection with Next prepared for the
// norm of the projection after it: xn, the new x times the norm's
// weights. It serves only that projection: seq is the backend's count of
// recorded work when it was made.
type nextInput struct {
	x, xn *Tensor
	norm  backend.Weight
	seq   uint64
}

// prepareNext runs a residual projection whose epilogue also stores the
// next norm's input (shaders.Fusion.Next), when its GEMV composes.
func (b *Backend) prepareNext(d, xs *Tensor, w *Weight, p backend.Projection, f shaders.Fusion, extra []webgpu.Binding) bool {
	f.Next = true
	if !b.fits(w, xs.cols, f) {
		return false
	}
	xn, err := b.scratch(d, -d.cols) // where the rmsnorm of the next projection would go
	if err != nil {
		b.fail(err)
		return true
	}
	at := len(extra) - loraBindings(f) // nwn and xn come before the adapters' bindings
	var xa [maxBindings]webgpu.Binding
	extra = append(append(append(xa[:0], extra[:at]...), webgpu.Binding{Buffer: p.Next.(*Weight).parts[0].buf}, webgpu.Binding{Buffer: xn.buf}), extra[at:]...)
	if !b.matmul(d, xs, w, f, extra) {
		return false
	}
	b.next = nextInput{x: d, xn: xn, norm: p.Next, seq: b.seq}
	return true
}

// prescaled runs a normalised projection of x right after the residual
// projection that prepared its input: the GEMV reads xn as it is
// (shaders.Fusion.Prescaled) and each workgroup adds up x's squares for
// 1/rms, with neither an rmsnorm dispatch nor the norm's weights on every
// load of x.
func (b *Backend) prescaled(d, xs *Tensor, w *Weight, p backend.Projection, f shaders.Fusion, extra []webgpu.Binding) bool {
	if !b.prepared(xs, p.Norm) {
		return false
	}
	n := b.next
	f.Prescaled = true
	var xa [maxBindings]webgpu.Binding
	extra = append(xa[:0], extra...)
	extra[normAt(f, extra)] = webgpu.Binding{Buffer: xs.buf} // xraw, where nw was
	return b.matmul(d, n.xn, w, f, extra)
}

// prepared reports whether the last work recorded was a residual
// projection into xs that prepared the input of norm (or a shrink of
// adapters after it, which writes only their h).
func (b *Backend) prepared(xs *Tensor, norm backend.Weight) bool {
	n := b.next
	return n.xn != nil && n.seq == b.seq && n.x == xs && n.norm == norm
}

// normAt is the index of the norm's weights among fusionBindings' extra
// bindings of f (with Norm): the last but the adapters'.
func normAt(f shaders.Fusion, extra []webgpu.Binding) int {
	return len(extra) - 1 - loraBindings(f)
}

// loraBindings is how many of f's extra bindings are the adapters' (last).
func loraBindings(f shaders.Fusion) int {
	if f.LoRA {
		return 3
	}
	return 0
}

// fits reports whether the GEMV of w's storage for inputs of width k,
// composed with f, binds no more storage buffers than the device allows.
func (b *Backend) fits(w *Weight, k int, f shaders.Fusion) bool {
	o, _, _, _ := b.gemv(w.format(), 1, 1, f)
	return webgpu.StorageCount(o.operands) <= int(b.info.MaxStorageBuffersPerShaderStage)
}

// normPrologue reports whether the GEMVs take a projection's RMSNorm as
// their prologue. Not on lavapipe: there an invocation is a SIMD lane,
// every load of x (the same address for all lanes) is a gather, and the
// norm's weights on each of them cost more than the dispatch of an
// rmsnorm (BenchmarkFusion: smollm2's gate+up 1.63 ms fused against 1.27
// ms; the head 43 against 34). On SwiftShader (narrow workgroups) yes:
// its TPC 1 form sums the squares as it loads x, with no barrier, where
// the prepared (Prescaled) input's GEMVs each add them up behind one, and
// a dispatch costs more in the browser than lavapipe's gathers
// (BenchmarkStepKernels, the two forms alternated in one run: Chromium
// 3.5 → 3.1 ms a stories260K step, natively 2.6 → 2.9 and 2.4 → 2.0 in
// two runs). Plan.NormPrologue forces the choice.
func (b *Backend) normPrologue() bool {
	if b.plan.NormPrologue != "" {
		return b.plan.NormPrologue == "on"
	}
	return b.info.DeviceType != "cpu" || b.narrow()
}

// fusionBindings appends to dst the bindings that f adds to a kernel (see
// shaders.Fusion.Extra): the Fuse uniform, the other outputs, the bias,
// the norm's weights and the adapters' buffers.
func (b *Backend) fusionBindings(dst []webgpu.Binding, p backend.Projection, f shaders.Fusion) ([]webgpu.Binding, error) {
	var n [3]uint32
	for i, o := range p.Out {
		n[i] = uint32(o.Cols())
	}
	u0 := params{n[0], n[1], n[2], f32param(p.Eps), uint32(p.Act)}
	if f.LoRA {
		c := p.LoRA.(*LoRA)
		u0 = append(u0, 0, 0, 0, 0, 0, 0, uint32(c.maxRank), uint32(c.n), uint32(len(c.outs)))
	}
	u, err := b.uniform(u0)
	if err != nil {
		return nil, err
	}
	extra := append(dst, webgpu.Binding{Buffer: u})
	for _, o := range p.Out[1:] {
		extra = append(extra, webgpu.Binding{Buffer: o.(*Tensor).buf})
	}
	if p.Bias != nil {
		extra = append(extra, webgpu.Binding{Buffer: p.Bias.(*Weight).parts[0].buf})
	}
	if p.Norm != nil {
		extra = append(extra, webgpu.Binding{Buffer: p.Norm.(*Weight).parts[0].buf})
	}
	if f.LoRA {
		c := p.LoRA.(*LoRA)
		h, rows := b.loraBuffers(p.Out[0].(*Tensor).out)
		if f.Shrink { // the product computes h from the shrink's slot table and Aᵀ
			h = c.a
		}
		extra = append(extra, webgpu.Binding{Buffer: h})
		extra = append(extra, webgpu.Binding{Buffer: c.bt}, webgpu.Binding{Buffer: rows})
	}
	return extra, nil
}

// uniform returns a uniform buffer holding p (padded like every
// parameter buffer), one per distinct content.
func (b *Backend) uniform(p params) (webgpu.Buffer, error) {
	key := keyOf(p)
	if buf, ok := b.uniforms[key]; ok {
		return buf, nil
	}
	raw := append(u32bytes(p), make([]byte, paramsSize-4*len(p))...)
	buf, err := b.buffer("fusion params", int64(len(raw)), webgpu.Uniform|webgpu.CopyDst)
	if err != nil {
		return nil, err
	}
	if err := b.dev.Write(buf, 0, raw); err != nil {
		return nil, err
	}
	if b.uniforms == nil {
		b.uniforms = map[paramKey]webgpu.Buffer{}
	}
	b.uniforms[key] = buf
	return buf, nil
}

// scratch returns a tensor with like's rows (and kind) and |cols| columns
// for the intermediate values of a fused op, made on first use: a negative
// count (a normalised input) keeps it apart from a product of that width.
func (b *Backend) scratch(like *Tensor, cols int) (*Tensor, error) {
	key := [3]int{like.rows, cols, 0}
	cols = max(cols, -cols)
	if like.out {
		key[2] = 1
	}
	if t, ok := b.scratches[key]; ok {
		return t, nil
	}
	var t backend.Tensor
	var err error
	if like.out {
		t, err = b.NewOutputTensor(like.rows, cols)
	} else {
		t, err = b.NewTensor(like.rows, cols)
	}
	if err != nil {
		return nil, err
	}
	if b.scratches == nil {
		b.scratches = map[[3]int]*Tensor{}
	}
	b.scratches[key] = t.(*Tensor)
	return t.(*Tensor), nil
}

// ropeFusable reports whether q and k rotate alike, by one axis, and k
// and v are as wide as the cache's records: what rope_kv (and
// attention_lane composed with Rope) takes.
func ropeFusable(rq, rk backend.Rope, ks, vs *Tensor, c *KV) bool {
	return !rq.Multi() && !rk.Multi() && rq.Dim == rk.Dim && rq.Theta == rk.Theta && rq.Mscale() == rk.Mscale() && rq.Layout == rk.Layout && rq.HeadDim == rk.HeadDim &&
		slices.Equal(rq.Factors, rk.Factors) && ks.cols == c.shape.Dim() && vs.cols == c.shape.Dim() && rk.Heads == c.shape.Heads
}

func (b *Backend) RopeStore(q, k, v backend.Tensor, kv backend.KV, l int, rq, rk backend.Rope) {
	qs, ks, vs, c := q.(*Tensor), k.(*Tensor), v.(*Tensor), kv.(*KV)
	if !ropeFusable(rq, rk, ks, vs, c) {
		b.Rope(q, rq) // q and k rotate differently, or by several axes: the plain ops
		b.Rope(k, rk)
		b.StoreKV(kv, l, k, v)
		return
	}
	freqs, err := b.ropeFreqs(rq)
	if err != nil {
		b.fail(err)
		return
	}
	gx, gy := b.grid(b.rows(qs)*(rq.Heads*rq.Dim/2+c.shape.Heads), elementWG)
	b.record(ropeKVOp.forKV(c), params{uint32(qs.cols), uint32(c.shape.Heads), uint32(qs.rows), uint32(rq.Heads), uint32(rq.HeadDim), uint32(rq.Dim), uint32(rq.Layout), uint32(c.context)},
		[]webgpu.Binding{{Buffer: qs.buf}, {Buffer: c.k[l]}, {Buffer: c.v[l]}, {Buffer: ks.buf}, {Buffer: vs.buf}, {Buffer: freqs}, {Buffer: b.pos}, {Buffer: b.slotsFor(c)}}, gx, gy, 1)
}
