package gpu

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// Attention runs as two kernels, each taking some rows of the step:
//
//   - rows of a sequence with at most decodeRows rows in the batch (decoding,
//     or verifying a few draft tokens) go to attention_decode, which splits
//     each row's positions into chunks, one workgroup per (row, kv head or
//     slice of its group, chunk), then attention_combine merges the chunks
//     (with one chunk attention_decode finishes alone); on CPU adapters
//     attention_lane takes them instead, an invocation per (row, head,
//     chunk) and no barrier, into the same partials;
//   - rows of longer runs (prompt chunks) go to attention_prefill,
//     FlashAttention-style tiles of query rows × key positions streamed
//     through workgroup memory with an online softmax, split over the
//     positions too (and combined) only when a context is too long for one
//     workgroup's loop budget.
//
// A flag per row in the scratch buffer, written by the host when it
// changes, tells each kernel its rows, so that one batch can hold both
// kinds (continuous batching). All dispatches go into the step's command
// buffer like any other op; every kernel reads the cache through the
// sequences' block tables.

// maxHeadDim is the widest head the attention kernels take (Gemma 4's
// global layers have heads of 512).
const maxHeadDim = 512

const (
	// decodeRows is the most rows of one sequence that take the split-K
	// path (decoding, and verifying a few draft tokens): it reads the cache
	// once per row, the tiled kernel once per tile of rows but with the
	// tile mostly idle for so few (on llvmpipe the two cost the same at
	// about 11 rows).
	decodeRows = 8
	// maxChunks bounds the chunks that split-K cuts a row's positions into
	// for parallelism (more may be needed to keep within loopBudget).
	maxChunks = 32
	// minChunk is the fewest positions worth a chunk of their own: shorter
	// contexts use fewer chunks (one below 2·minChunk).
	minChunk = 128
	// chunkTarget is the number of workgroups that split-K aims for in
	// total, enough to occupy a large GPU; beyond it chunks only add
	// partials to combine.
	chunkTarget = 256
	// maxGroup bounds the query heads that one decode workgroup serves; a
	// larger GQA group is split into slices. Heads wider than 256 take at
	// most 4 (wideGroup): their queries fill 8 KiB of workgroup memory.
	maxGroup  = 8
	wideGroup = 4
	// loopBudget bounds the loop iterations one invocation runs: llvmpipe
	// (lavapipe) stops all loops of an invocation once 65535 iterations
	// have run in total, and then every later loop after one iteration,
	// silently. It unrolls loops of a small constant trip count, which do
	// not count; the kernels keep the others (whose count span and
	// decodeSpan add up) within the budget by splitting long contexts
	// into chunks.
	loopBudget = 60000
)

// prefillTile is a shape of attention_prefill: br query rows by bc positions
// per tile; each of its 64 invocations computes tr × tc scores and or rows
// of the output. Workgroup memory holds (br + bc)·HD + br·bc + br floats,
// at most 14.4 KiB, under the 16 KiB every adapter has.
type prefillTile struct{ br, bc, tr, tc, or int }

// prefillWG is attention_prefill's workgroup size.
const prefillWG = 64

// prefillTileFor picks the tile for heads of d4 vec4s (head dim 4·d4).
func prefillTileFor(d4 int) prefillTile {
	switch {
	case d4 <= 8:
		return prefillTile{br: 32, bc: 32, tr: 4, tc: 4, or: 4} // ≤ 12.4 KiB
	case d4 <= 16:
		return prefillTile{br: 16, bc: 32, tr: 2, tc: 4, or: 2} // ≤ 14.4 KiB
	case d4 <= 32:
		return prefillTile{br: 16, bc: 8, tr: 2, tc: 1, or: 2} // ≤ 12.6 KiB
	case d4 <= 64:
		return prefillTile{br: 8, bc: 4, tr: 1, tc: 1, or: 1} // ≤ 12.2 KiB
	}
	return prefillTile{br: 4, bc: 2, tr: 1, tc: 1, or: 1} // ≤ 12.1 KiB at 512 dims
}

func (t prefillTile) op(d4 int) op {
	return op{kernel: "attention_prefill", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly},
		consts: map[string]float64{"HD": float64(4 * d4), "BR": float64(t.br), "BC": float64(t.bc),
			"TR": float64(t.tr), "TC": float64(t.tc), "OR": float64(t.or)}}
}

// span is how many positions one prefill workgroup may take within
// loopBudget: the worst-case loop iterations of a tile, from the loops of
// attention_prefill.wgsl (loads, scores, softmax, outputs).
func (t prefillTile) span(d4 int) int {
	loads := (t.bc*d4 + prefillWG - 1) / prefillWG
	perTile := 1 + 2*loads*(1+3) + d4 + 2*t.bc + t.bc
	return (loopBudget - 2000) / perTile * t.bc
}

// decodeSpan is how many positions one decode workgroup may take within
// loopBudget, from the loops of attention_decode.wgsl per 64-position block.
func decodeSpan(d4 int) int {
	return (loopBudget - 2000) / (2*d4 + 24) * 64
}

var combineOp = op{kernel: "attention_combine", operands: []webgpu.Access{webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly}}

func (b *Backend) Attend(dst, q backend.Tensor, kv backend.KV, l int, a backend.Attention) {
	b.attend(dst, q, kv, l, a, nil)
}

// laneRope is what attention_lane composed with Rope binds besides its
// own: the unrotated k and v, the rotation and its frequencies.
type laneRope struct {
	k, v   *Tensor
	rq, rk backend.Rope
	freqs  webgpu.Buffer
}

// RopeAttend is one dispatch of attention_lane composed with Rope where
// ropeAttention says so and every row of the step is its sequence's only
// one, with q and k rotated alike (RopeStore's fused form) and heads as
// attention has them; otherwise RopeStore then Attend. A decoding step of
// a small model on SwiftShader is paced by its dispatches (in the browser
// ~60–90 µs each whatever the kernel): this saves one a layer.
func (b *Backend) RopeAttend(dst, q, k, v backend.Tensor, kv backend.KV, l int, rq, rk backend.Rope, a backend.Attention) {
	qs, ks, vs, c := q.(*Tensor), k.(*Tensor), v.(*Tensor), kv.(*KV)
	if !b.ropeAttention() || webgpu.StorageCount(laneRopeOperands) > int(b.info.MaxStorageBuffersPerShaderStage) ||
		!ropeFusable(rq, rk, ks, vs, c) || a.Bidirectional || a.HeadDim%4 != 0 || a.HeadDim > maxHeadDim ||
		rq.Heads != a.Heads || rq.HeadDim != a.HeadDim || qs.cols != a.Heads*a.HeadDim || ks.rows != qs.rows {
		b.RopeStore(q, k, v, kv, l, rq, rk)
		b.Attend(dst, q, kv, l, a)
		return
	}
	freqs, err := b.ropeUniform(rq)
	if err != nil {
		b.fail(err)
		return
	}
	b.attend(dst, q, kv, l, a, &laneRope{k: ks, v: vs, rq: rq, rk: rk, freqs: freqs})
}

// attend records attention, and with rope (from RopeAttend) the rotation
// and the store before it: in attention_lane itself where every row is
// its sequence's only one, else by RopeStore.
func (b *Backend) attend(dst, q backend.Tensor, kv backend.KV, l int, a backend.Attention, rope *laneRope) {
	d, qs, c := dst.(*Tensor), q.(*Tensor), kv.(*KV)
	switch {
	case a.HeadDim <= 0 || a.HeadDim > maxHeadDim:
		b.fail(fmt.Errorf("gpu: head dim %d outside the attention kernels' 1..%d", a.HeadDim, maxHeadDim))
		return
	case a.KVHeads <= 0 || a.Heads%a.KVHeads != 0:
		b.fail(fmt.Errorf("gpu: %d query heads over %d kv heads", a.Heads, a.KVHeads))
		return
	case a.KVHeads != c.shape.Heads || a.HeadDim != c.shape.HeadDim:
		b.fail(fmt.Errorf("gpu: attention over %d kv heads of %d, in a cache of %d heads of %d", a.KVHeads, a.HeadDim, c.shape.Heads, c.shape.HeadDim))
		return
	}
	n := b.rows(d)
	st := b.attention()
	// Bidirectional rows attend up to their sequence's end: the kernels
	// bind the ends where causal rows bind their positions. A sliding
	// window starts from each row's own position, though: with one, the
	// tiled kernel binds the positions and sees up to the horizon, the
	// sequence's end, which must then be the batch's only sequence (a
	// Gemma 3 image's step).
	batch, pos := b.batch, b.pos
	horizon := 0
	if a.Bidirectional && a.Window > 0 {
		for i := range n {
			if batch.Seq[i] != batch.Seq[0] {
				b.fail(fmt.Errorf("gpu: bidirectional sliding-window attention over several sequences"))
				return
			}
			horizon = max(horizon, int(batch.Pos[i])+1)
		}
	} else if a.Bidirectional {
		ends, rows, err := b.ends()
		if err != nil {
			b.fail(err)
			return
		}
		batch.Pos, pos = rows, ends
	}
	// The decode kernel reads the cache as vec4s; other head dims take the
	// tiled kernel even for single rows.
	var decChunks, preChunks, preSpan int
	group := a.Heads / a.KVHeads
	mg := maxGroup
	if a.HeadDim > 256 {
		mg = wideGroup
	}
	slices := (group + mg - 1) / mg
	d4 := (a.HeadDim + 3) / 4
	t := prefillTileFor(d4)
	dec, pre := st.survey(batch, n, b.maxRows, a.HeadDim%4 == 0 && horizon == 0, a.Window, horizon)
	lane := b.laneAttention()
	// On CPU adapters prompt rows take attention_lane_rows, laneRows rows
	// an invocation (see attention_lane_rows.wgsl), for heads of up to
	// laneMaxD4 vec4s in an f32 cache (llvmpipe took minutes to compile
	// the multi-row form over f16 and int8 records), but for a
	// bidirectional sliding-window step (the horizon), which only the
	// tiled kernel reads.
	rb := laneRows
	preLane := lane && a.HeadDim%4 == 0 && horizon == 0 && d4 <= laneMaxD4 && c.shape.Type == backend.KVF32
	if rope != nil && !(lane && dec.rows == n && st.lone(batch, n)) {
		b.RopeStore(q, rope.k, rope.v, kv, l, rope.rq, rope.rk)
		rope = nil
	}
	if dec.rows > 0 {
		if lane {
			decChunks = laneChunks(dec.ctx, (dec.rows*a.Heads+laneWG-1)/laneWG, laneSpan(d4))
		} else {
			decChunks = decodeChunks(dec.ctx, dec.rows*a.KVHeads*slices, decodeSpan(d4))
		}
	}
	if pre.rows > 0 && preLane {
		preChunks = laneChunks(pre.ctx, ((pre.rows+rb-1)/rb*a.Heads+laneWG-1)/laneWG, laneRowsSpan(d4, rb))
	} else if pre.rows > 0 {
		// A workgroup makes one pass over the positions for each
		// sequence among its rows: the budget is shared by the passes.
		preSpan = t.span(d4) / st.passes(batch, n, t.br)
		preChunks = (pre.ctx + preSpan - 1) / preSpan
	}
	if a.Sinks != nil { // the sinks join the softmax in attention_combine (an empty chunk weighs nothing)
		decChunks, preChunks = max(decChunks, 2), max(preChunks, 2)
	}
	part, err := st.scratch(b, max(decChunks, preChunks), n, a)
	if err != nil {
		b.fail(err)
		return
	}
	base := uint32(b.maxRows) // part: a flag per row, then the partials
	if dec.rows > 0 {
		g := (group + slices - 1) / slices // query heads per workgroup
		o := op{kernel: "attention_decode", operands: decodeOperands, consts: b.ops.attnConsts(a.HeadDim, g, 0)}
		gx, gz := uint32(a.KVHeads*slices), uint32(n) // workgroups: (kv head, slice) × chunk × row
		if lane {
			o.kernel, o.consts = "attention_lane", b.ops.attnConsts(a.HeadDim, 0, 0)
			gx, gz = uint32((n*a.Heads+laneWG-1)/laneWG), 1 // invocations: (row, head) × chunk
		}
		// Arrays, not appends: nothing allocated a dispatch.
		p := [...]uint32{uint32(a.Heads), uint32(a.KVHeads), uint32(a.HeadDim), uint32(d.rows), f32param(a.Scale),
			uint32(c.shape.BlockSize), uint32(b.tableWidth), uint32(slices), base, f32param(a.Softcap), uint32(a.Window), 0, 0, 0}
		bind := [...]webgpu.Binding{{Buffer: part}, {Buffer: d.buf}, {Buffer: qs.buf}, {Buffer: c.k[l]}, {Buffer: c.v[l]},
			{Buffer: pos}, {Buffer: b.rowSeq}, {Buffer: b.tablesFor(c)}, {}, {}, {}}
		np, nb := 11, 8
		o = o.forKV(c)
		if rope != nil {
			o.operands, o.fusion.Rope = laneRopeOperands, true
			p[11], p[12], p[13], np = uint32(rope.rq.Dim), uint32(rope.rq.Layout), uint32(c.context), 14
			bind[8], bind[9], bind[10], nb = webgpu.Binding{Buffer: rope.k.buf}, webgpu.Binding{Buffer: rope.v.buf}, webgpu.Binding{Buffer: rope.freqs}, 11
		}
		b.record(o, params(p[:np]), bind[:nb], gx, uint32(decChunks), gz)
		b.combine(d, part, a, n, decChunks, base, 1)
	}
	if pre.rows > 0 && preLane {
		b.laneRows(d, qs, c, l, a, part, base, pos, n, rb, preChunks)
		b.combine(d, part, a, n, preChunks, base, 0)
	} else if pre.rows > 0 {
		b.record(t.op(d4).forKV(c), params{uint32(a.Heads), uint32(a.KVHeads), uint32(a.HeadDim), uint32(d.rows), f32param(a.Scale),
			uint32(c.shape.BlockSize), uint32(b.tableWidth), uint32(preSpan), base, f32param(a.Softcap), uint32(a.Window), uint32(horizon)},
			[]webgpu.Binding{{Buffer: d.buf}, {Buffer: part}, {Buffer: qs.buf}, {Buffer: c.k[l]}, {Buffer: c.v[l]},
				{Buffer: pos}, {Buffer: b.rowSeq}, {Buffer: b.tablesFor(c)}},
			uint32(a.Heads), uint32((n+t.br-1)/t.br), uint32(preChunks))
		b.combine(d, part, a, n, preChunks, base, 0)
	}
}

// combine merges the partials of split-K for the rows flagged kind, when
// there is more than one chunk.
func (b *Backend) combine(d *Tensor, part webgpu.Buffer, a backend.Attention, n, chunks int, base uint32, kind float32) {
	if chunks > 1 {
		sinks, on := part, uint32(0) // bound, unread, without sinks
		if a.Sinks != nil {
			sinks, on = a.Sinks.(*Weight).parts[0].buf, 1
		}
		b.record(combineOp, params{uint32(a.Heads), uint32(a.HeadDim), uint32(d.rows), base, f32param(kind), on},
			[]webgpu.Binding{{Buffer: d.buf}, {Buffer: part}, {Buffer: sinks}}, uint32(a.Heads), uint32(n), 1)
	}
}

// ropeAttention reports whether RopeAttend may take one dispatch: where
// decode rows take attention_lane, on SwiftShader, unless Plan.RopeAttend
// says otherwise. Not on lavapipe: there the composed kernel, an
// invocation a head rotating its query and its group's key alone, cost
// more CPU than the dispatch it saves (smollm2-135m's decode 88–94 →
// 97–101 CPU ms a token, alternated in one run; stories260K's equal).
func (b *Backend) ropeAttention() bool {
	if !b.laneAttention() {
		return false
	}
	switch b.plan.RopeAttend {
	case "on":
		return true
	case "off":
		return false
	}
	return b.onSwiftShader
}

// laneWG is attention_lane's workgroup size.
const laneWG = 8

// laneRows is how many prompt rows an invocation of attention_lane_rows
// takes on CPU adapters: each key and value it reads (a loop over the SIMD
// lanes on llvmpipe) then serves that many rows. It does so for heads of
// up to laneMaxD4 vec4s (72 dims: Gemma 3's vision heads); wider ones take
// attention_prefill, since llvmpipe's compile time of the kernel explodes
// past them (measured: 8 rows of 64 or 72 dims compile in about a second,
// 6 rows of 96 in 159 s, 4 of 128 in 91 s, 8 of 256 did not in 17
// minutes). Decode rows keep attention_lane, a kernel of its own, so that
// a decoding step never compiles the multi-row form.
const (
	laneRows  = 8
	laneMaxD4 = 18
)

// laneRows records attention_lane_rows over the prompt rows (flagged 0 in
// part), rb rows an invocation, in chunks chunks.
func (b *Backend) laneRows(d, qs *Tensor, c *KV, l int, a backend.Attention, part webgpu.Buffer, base uint32, pos webgpu.Buffer, n, rb, chunks int) {
	o := op{kernel: "attention_lane_rows", operands: decodeOperands, consts: b.ops.attnConsts(a.HeadDim, 0, rb)}
	blocks := (n + rb - 1) / rb
	b.record(o.forKV(c), params{uint32(a.Heads), uint32(a.KVHeads), uint32(a.HeadDim), uint32(d.rows), f32param(a.Scale),
		uint32(c.shape.BlockSize), uint32(b.tableWidth), 0, base, f32param(a.Softcap), uint32(a.Window), f32param(0)},
		[]webgpu.Binding{{Buffer: part}, {Buffer: d.buf}, {Buffer: qs.buf}, {Buffer: c.k[l]}, {Buffer: c.v[l]},
			{Buffer: pos}, {Buffer: b.rowSeq}, {Buffer: b.tablesFor(c)}},
		uint32((blocks*a.Heads+laneWG-1)/laneWG), uint32(chunks), 1) // invocations: (block of rows, head) × chunk
}

// laneTarget is the workgroups that attention_lane's chunks aim for: a few
// per thread of a CPU adapter, so that the threads share a step's
// attention evenly.
const laneTarget = 16

// laneAttention reports whether decode rows take attention_lane: on CPU
// adapters, where a barrier between lanes of one thread costs more than
// the work it orders, unless the plan says otherwise.
func (b *Backend) laneAttention() bool {
	switch b.plan.Attention {
	case "lane":
		return true
	case "group":
		return false
	}
	return b.info.DeviceType == "cpu"
}

// laneSpan is how many positions one attention_lane invocation may take
// within loopBudget: per position a loop over the head's d4 vec4s for the
// score and one for the values, and one for a rescale, were none unrolled.
func laneSpan(d4 int) int {
	return (loopBudget - 2000) / (1 + 3*d4)
}

// laneRowsSpan is laneSpan for attention_lane_rows with rb rows an
// invocation: per position the loops over the head's d4 vec4s that read
// the key and the value, and the rows' loops over them for the scores and
// the outputs, were none of those unrolled (the loops over the rows, of a
// small constant trip count, are; the kernel would not be fast otherwise),
// after the loops over the rows' queries and outputs.
func laneRowsSpan(d4, rb int) int {
	return (loopBudget - 2000 - 8*rb*d4) / (1 + 4*d4)
}

// laneChunks is the number of chunks that attention_lane cuts positions
// 0..n-1 into when wgs workgroups take one chunk of every row: enough to
// reach laneTarget workgroups, each chunk at least minChunk positions and
// at most span, and at most maxChunks unless span needs more.
func laneChunks(n, wgs, span int) int {
	chunks := min(n/minChunk, (laneTarget+wgs-1)/wgs, maxChunks)
	return max(chunks, 1, (n+span-1)/span)
}

// decodeChunks is the number of chunks that positions 0..n-1 are split into
// when groups workgroups (rows × kv heads × slices) share the work: at least
// minChunk positions each, no more than needed to reach chunkTarget
// workgroups, at most maxChunks, and yet enough that none is longer than
// span.
func decodeChunks(n, groups, span int) int {
	chunks := min(n/minChunk, (chunkTarget+groups-1)/groups, maxChunks)
	return max(chunks, 1, (n+span-1)/span)
}

// attnState is what attention keeps per backend between calls.
type attnState struct {
	part    webgpu.Buffer // row flags and split-K partials, grown on demand
	flags   []float32     // per row: 1 for the decode kernel, 0 for the tiled one
	written []float32     // the flags in part
	counts  []int32       // rows per sequence, scratch of survey
	firsts  []int32       // first position per sequence, scratch of survey
	seen    []int32       // sequences of a tile, scratch of passes
}

// rowSet is the rows of a step that one kernel takes: how many, and the
// most positions one of them attends over.
type rowSet struct{ rows, ctx int }

// survey splits the first n rows of batch between the kernels: rows of
// sequences with at most decodeRows rows in the batch go to the decode
// kernel (when decode allows it), the others to the tiled kernel. It sets
// st.flags, which depend on the batch alone, not on n. With a sliding
// window, a decode row sees at most window positions, and a pass of the
// tiled kernel, which starts at the window of its earliest row, at most
// window more than the distance from the sequence's first row (up to
// the horizon instead of the row's own position when horizon > 0).
func (st *attnState) survey(batch backend.Batch, n, maxRows int, decode bool, window, horizon int) (dec, pre rowSet) {
	if cap(st.counts) < len(batch.Tables) {
		st.counts = make([]int32, len(batch.Tables))
		st.firsts = make([]int32, len(batch.Tables))
	}
	counts, firsts := st.counts[:len(batch.Tables)], st.firsts[:len(batch.Tables)]
	clear(counts)
	for i, s := range batch.Seq {
		if counts[s] == 0 {
			firsts[s] = batch.Pos[i] // rows of a sequence come in order of position
		}
		counts[s]++
	}
	if len(st.flags) < maxRows {
		st.flags = make([]float32, maxRows)
	}
	for i := range n {
		ctx := int(batch.Pos[i]) + 1
		if decode && counts[batch.Seq[i]] <= decodeRows {
			if window > 0 {
				ctx = min(ctx, window)
			}
			st.flags[i] = 1
			dec.rows, dec.ctx = dec.rows+1, max(dec.ctx, ctx)
		} else {
			if window > 0 {
				ctx = min(ctx, int(batch.Pos[i]-firsts[batch.Seq[i]])+window)
			}
			if horizon > 0 {
				ctx = horizon - max(0, int(firsts[batch.Seq[i]])-window+1)
			}
			st.flags[i] = 0
			pre.rows, pre.ctx = pre.rows+1, max(pre.ctx, ctx)
		}
	}
	return dec, pre
}

// passes is the most sequences among the rows of one prefill tile of br
// rows that the tiled kernel takes: a workgroup makes one pass over the
// cache for each.
func (st *attnState) passes(batch backend.Batch, n, br int) int {
	most := 1
	for r0 := 0; r0 < n; r0 += br {
		st.seen = st.seen[:0]
		for i := r0; i < min(n, r0+br); i++ {
			if st.flags[i] == 0 && !slices.Contains(st.seen, batch.Seq[i]) {
				st.seen = append(st.seen, batch.Seq[i])
			}
		}
		most = max(most, len(st.seen))
	}
	return most
}

// scratch returns the buffer of row flags and partials, with room for the
// partials of chunks chunks of n rows, growing it when needed, and writes
// the flags of the first n rows into it unless it holds them already.
func (st *attnState) scratch(b *Backend, chunks, n int, a backend.Attention) (webgpu.Buffer, error) {
	size := 4 * (int64(b.maxRows) + 1)
	if chunks > 1 {
		size += 4 * int64(chunks) * int64(n) * int64(a.Heads) * int64(a.HeadDim+2)
	}
	if st.part == nil || st.part.Size() < size {
		if size > b.info.MaxStorageBufferBindingSize {
			return nil, fmt.Errorf("gpu: attention partials of %s exceed the storage binding limit", dtype.FormatBytes(size))
		}
		// Grow by half again, so that a context that grows step by
		// step does not allocate at every step.
		if st.part != nil {
			size = min(max(size, st.part.Size()*3/2), b.info.MaxStorageBufferBindingSize)
		}
		buf, err := b.buffer("attention partials", size, webgpu.Storage|webgpu.CopyDst)
		if err != nil {
			return nil, err
		}
		st.part, st.written = buf, nil
	}
	if len(st.written) < n || !slices.Equal(st.written[:n], st.flags[:n]) {
		if err := b.writeStep(st.part, f32bytes(st.flags[:n])); err != nil {
			return nil, err
		}
		st.written = append(st.written[:0], st.flags[:n]...)
	}
	return st.part, nil
}

// attention returns b's attnState, made on first use.
func (b *Backend) attention() *attnState {
	if b.attn == nil {
		b.attn = &attnState{}
	}
	return b.attn
}

// laneRopeOperands are those of attention_lane composed with Rope: the
// cache is written, and k, v and the frequencies (a uniform) follow.
var laneRopeOperands = []webgpu.Access{webgpu.ReadWrite, webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadWrite, webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly,
	webgpu.ReadOnly, webgpu.ReadOnly, webgpu.UniformBinding}

// lone reports whether each of the first n rows of batch is the only row
// of its sequence (from survey's counts): then none attends to a position
// that another row of the step stores.
func (st *attnState) lone(batch backend.Batch, n int) bool {
	for _, s := range batch.Seq[:n] {
		if st.counts[s] != 1 {
			return false
		}
	}
	return true
}

// decodeOperands are the operands of attention_decode and attention_lane.
var decodeOperands = []webgpu.Access{webgpu.ReadWrite, webgpu.ReadWrite, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly, webgpu.ReadOnly}
