package gpu

import (
	"fmt"

	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
	"github.com/tessera-llm/tessera/shaders"
)

var (
	moeRouteOp   = op{kernel: "moe_route", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly}}
	moeCombineOp = op{kernel: "moe_combine", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}}
)

// The mixture-of-experts ops. Route is one dispatch of moe_route, whose
// routing (expert ids, weights, the pairs sorted by expert and the block
// table) stays in one buffer on the device. An expert product is the GEMV
// of the weight's storage composed with shaders.Fusion{Experts}: each
// workgroup reads its block's expert from the table and multiplies the
// block's pairs by that expert's rows only, so a step reads the chosen
// experts' weights, each once per block of up to gemvMaxRows pairs, and
// nothing comes back to the host. Combine is one dispatch of moe_combine.
//
// Routes is a step's routing on the device: 3·P words of ids, weights and
// pair order, then a table of up to 2·P blocks of 3 words (P = rows·k
// pairs; a step's blocks are at most one per pair).
type Routes struct {
	buf     webgpu.Buffer
	rows, k int
	// Set by Route for the step's products: the pairs a block takes at
	// most, the blocks the table may hold, and the register rows of the
	// grouped GEMM's tiles (blocks of 16·tm pairs), 0 for the GEMVs.
	block, blocks, tm int
}

func (r *Routes) Rows() int { return r.rows }
func (r *Routes) K() int    { return r.k }

func (r *Routes) pairs() int { return r.rows * r.k }

func (b *Backend) NewRoutes(rows, k int) (backend.Routes, error) {
	if rows <= 0 || k <= 0 || k > tensor.MaxExperts {
		return nil, fmt.Errorf("gpu: routes of %d rows × %d slots", rows, k)
	}
	r := &Routes{rows: rows, k: k}
	var err error
	if r.buf, err = b.buffer("routes", int64(9*r.pairs())*4, webgpu.Storage|webgpu.CopyDst|webgpu.CopySrc); err != nil {
		return nil, err
	}
	return r, nil
}

func (b *Backend) UploadExperts(ts []*tensor.Tensor, s backend.Storage) (backend.Weight, error) {
	parts, _, rows, err := backend.ExpertMatrices(ts)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	if parts[0].Shape[1]%4 != 0 {
		return nil, fmt.Errorf("gpu: experts %s of width %d (the expert GEMVs need a multiple of 4)", ts[0].Name, parts[0].Shape[1])
	}
	var w *Weight
	if len(parts) == 2 { // gate and up, alternating rows within each expert
		if w, err = b.fuse(parts, s, true, 2*rows); err != nil {
			return nil, err
		}
		w.perExpert, w.shape = 2*rows, ts[0].Shape
		return w, nil
	}
	h, err := hostForm(parts[0], s)
	if err != nil {
		return nil, err
	}
	if w, err = b.uploadRows(parts[0].Name, parts[0].Shape, s, h, rows); err != nil {
		return nil, err
	}
	w.perExpert, w.shape = rows, ts[0].Shape
	return w, nil
}

func (b *Backend) Route(r backend.Routes, logits backend.Tensor, norm bool) {
	rs, l := r.(*Routes), logits.(*Tensor)
	e := l.cols
	if e > tensor.MaxExperts || rs.k > e {
		b.fail(fmt.Errorf("gpu: routing %d of %d experts (at most %d)", rs.k, e, tensor.MaxExperts))
		return
	}
	rows := min(b.rows(l), rs.rows)
	n := rows * rs.k
	rs.tm = b.expertTM(rows, n, e)
	rs.block = 16 * rs.tm
	if rs.tm == 0 {
		rs.block = 1 // an expert meets each row at most once
		for rs.block < min(rows, gemvMaxRows) {
			rs.block *= 2
		}
	}
	// An expert of c pairs takes ceil(c/B) blocks: c with B = 1 (every
	// decode step), at most c/B + 1 otherwise.
	rs.blocks = n
	if rs.block > 1 {
		rs.blocks = n/rs.block + min(e, n)
	}
	flag := uint32(0)
	if norm {
		flag = 1
	}
	b.record(moeRouteOp, params{uint32(e), uint32(rs.k), flag, uint32(min(l.rows, rs.rows)), uint32(rs.pairs()), uint32(rs.block), uint32(rs.blocks)},
		[]webgpu.Binding{{Buffer: rs.buf}, {Buffer: l.buf}}, 1, 1, 1)
}

// expertTM plans a step of rows rows, n pairs over e experts: the
// register rows of the grouped GEMM's tiles (16·tm pairs of one expert),
// or 0 for the expert GEMVs. The GEMM reads each tile of an expert's
// weights once for up to 64 of its pairs where the GEMV reads it once per
// 8; it pays where a step puts many rows on each expert (prompt chunks on
// GPUs): more than half a GEMV block on average, past which blocks of 8
// start to read experts twice. Decode steps and small batches, and CPU
// adapters, where the GEMV's loads are the cheaper (measured: see the
// MoE entry of docs/DECISIONS.md), keep the GEMVs. The tile holds
// twice the pairs an expert takes on average (at most 64), so that most
// experts' weights are read once, at the cost of tile rows left unused.
func (b *Backend) expertTM(rows, n, e int) int {
	avg := (n + e - 1) / e
	gemm := rows > gemvMaxRows && avg > gemvMaxRows/2 && b.info.DeviceType != "cpu"
	switch b.plan.Experts {
	case "gemm":
		gemm = true
	case "gemv":
		gemm = false
	}
	if !gemm {
		return 0
	}
	switch {
	case avg > 16:
		return 4
	case avg > 8:
		return 2
	}
	return 1
}

func (b *Backend) ExpertProject(p backend.ExpertProjection) {
	w, r, xs, d := p.W.(*Weight), p.R.(*Routes), p.X.(*Tensor), p.Out.(*Tensor)
	k := xs.cols
	out := w.perExpert // w.shape is [E, rows, in] of one matrix
	if p.GLU {
		out /= 2
	}
	switch {
	case w.perExpert == 0 || p.GLU != w.pairs:
		b.fail(fmt.Errorf("gpu: expert projection (GLU %v) of a weight not uploaded by UploadExperts for it", p.GLU))
		return
	case k != w.shape[2] || d.cols != out:
		b.fail(fmt.Errorf("gpu: expert projection of %d columns into %d with experts of %d×%d", k, d.cols, out, w.shape[2]))
		return
	case r.blocks == 0:
		b.fail(fmt.Errorf("gpu: expert projection before Route"))
		return
	}
	// The GEMV of the storage (a block of pairs a workgroup row, g.z) or
	// the grouped GEMM (a tile of 64 columns × a table entry, g.y).
	f := shaders.Fusion{Experts: true, Pairs: p.GLU, GLU: p.GLU}
	var o op
	var tail params
	var gx, gy, gz uint32
	if r.tm > 0 {
		o, tail = b.ops.gemm(w.format(), r.tm, f)
		gx, gy, gz = uint32((w.perExpert+63)/64), uint32(r.blocks), 1
	} else {
		cpu := b.info.DeviceType == "cpu"
		tpc := 1 // as MatMul plans: one invocation a column on CPU adapters
		switch {
		case w.storage == backend.F32 && (!cpu || b.plan.MatMul == "gemv"):
			tpc = gemvThreads(k)
		case w.storage != backend.F32 && (!cpu || b.plan.Quant == "gemv-gpu"):
			tpc = quantTPC(w.format(), k, false) // lanes take groups, as matmulQ plans
		}
		var cpi, perWG int
		o, tail, cpi, perWG = b.gemv(w.format(), r.block, tpc, f)
		gx, gy = b.grid((w.perExpert+cpi-1)/cpi, perWG)
		gz = uint32(r.blocks)
	}
	slots := uint32(0)
	if p.Slots {
		slots = 1
	}
	for _, pt := range w.parts {
		u, err := b.uniform(params{uint32(d.cols), 0, 0, 0, uint32(p.Act), uint32(r.k),
			uint32(pt.row0 / w.perExpert), uint32(pt.rows / w.perExpert), slots, uint32(2 * r.pairs()), uint32(3 * r.pairs())})
		if err != nil {
			b.fail(err)
			return
		}
		operands := []webgpu.Binding{{Buffer: d.buf}, {Buffer: xs.buf}, {Buffer: pt.buf}}
		pp := params{uint32(k), uint32(d.cols), uint32(d.rows), 0, uint32(w.perExpert)}
		if gs, ok := grouped(pt.format); ok {
			operands = append(operands, webgpu.Binding{Buffer: pt.scales})
			pp = append(pp, uint32((k+gs-1)/gs))
		}
		b.record(o, append(pp, tail...), append(operands, webgpu.Binding{Buffer: u}, webgpu.Binding{Buffer: r.buf}), gx, gy, gz)
	}
}

func (b *Backend) Combine(c backend.MoECombine) {
	d, y, r := c.Dst.(*Tensor), c.Y.(*Tensor), c.R.(*Routes)
	if y.cols != d.cols || c.Shared != nil && (c.SharedGate == nil || c.Shared.Cols() != d.cols) {
		b.fail(fmt.Errorf("gpu: combine of experts of %d columns into %d", y.cols, d.cols))
		return
	}
	scale := c.Scale
	if scale == 0 {
		scale = 1
	}
	shared, sh, g := uint32(0), y.buf, y.buf // bound, unread, without a shared expert
	if c.Shared != nil {
		shared, sh, g = 1, c.Shared.(*Tensor).buf, c.SharedGate.(*Tensor).buf
	}
	scaled, es := uint32(0), y.buf // likewise without the experts' scales
	if c.ExpertScale != nil {
		scaled, es = 1, c.ExpertScale.(*Weight).parts[0].buf
	}
	set := uint32(0)
	if c.Set {
		set = 1
	}
	b.record(moeCombineOp, params{uint32(d.cols), uint32(min(d.rows, r.rows)), uint32(r.k), f32param(scale), shared, uint32(r.pairs()), scaled, set},
		[]webgpu.Binding{{Buffer: d.buf}, {Buffer: y.buf}, {Buffer: r.buf}, {Buffer: sh}, {Buffer: g}, {Buffer: es}}, uint32(min(b.rows(d), r.rows)), 1, 1)
}
