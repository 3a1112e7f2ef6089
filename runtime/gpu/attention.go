package gpu

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"weak"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// Attention runs as one of two kernels, chosen by the number of rows in the
// step:
//
//   - a prompt chunk (more than decodeRows rows) goes to attention_prefill,
//     FlashAttention-style tiles of query rows × key positions streamed
//     through workgroup memory with an online softmax;
//   - decoding (up to decodeRows rows) goes to attention_decode, which splits
//     each row's positions into chunks, one workgroup per (row, kv head,
//     chunk), and attention_combine, which merges the chunks. With one
//     chunk attention_decode finishes alone.
//
// Both are recorded into the step's command buffer like any other op.

// maxHeadDim is the widest head the attention kernels take.
const maxHeadDim = 256

const (
	// decodeRows is the most rows that take the split-K path: below a
	// prefill tile's worth the tile would be mostly idle, while split-K
	// reads the cache once per row.
	decodeRows = 4
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
	// larger GQA group is split into slices.
	maxGroup = 8
	// loopBudget bounds the loop iterations one invocation runs, counting
	// every loop as if the compiler unrolled none: llvmpipe (lavapipe)
	// stops all loops of an invocation once 65535 iterations have run in
	// total. The kernels split long contexts into chunks to stay within it.
	loopBudget = 60000
)

// prefillTile is a shape of attention_prefill: br query rows by bc positions
// per tile, wg invocations. Workgroup memory holds (br + bc)·HD + br·bc + br
// floats, at most 14.4 KiB, under the 16 KiB every adapter has.
type prefillTile struct{ br, bc, wg int }

// prefillTileFor picks the tile for heads of d4 vec4s (head dim 4·d4).
func prefillTileFor(d4 int) prefillTile {
	switch {
	case d4 <= 8:
		return prefillTile{br: 32, bc: 32, wg: 256} // ≤ 12.4 KiB
	case d4 <= 16:
		return prefillTile{br: 16, bc: 32, wg: 256} // ≤ 14.4 KiB
	case d4 <= 32:
		return prefillTile{br: 16, bc: 8, wg: 128} // ≤ 12.6 KiB
	}
	return prefillTile{br: 8, bc: 4, wg: 64} // ≤ 12.2 KiB
}

// span is how many positions one prefill workgroup may take within
// loopBudget: the worst-case loop iterations of a tile, from the loops of
// attention_prefill.wgsl.
func (t prefillTile) span(d4 int) int {
	ceil := func(a, b int) int { return (a + b - 1) / b }
	loads := ceil(t.bc*d4, t.wg)
	perTile := 1 + 2*loads*(1+3) + ceil(t.br*t.bc, t.wg)*d4 + 2*t.bc + ceil(t.br*d4, t.wg)*t.bc
	return (loopBudget - 1000) / perTile * t.bc
}

// decodeSpan is how many positions one decode workgroup may take within
// loopBudget, from the loops of attention_decode.wgsl per 64-position block.
func decodeSpan(d4 int) int {
	return (loopBudget - 2000) / (2*d4 + 24) * 64
}

var combineOp = op{kernel: "attention_combine", operands: []Access{ReadWrite, ReadOnly}}

func (b *Backend) Attend(dst, q backend.Tensor, kv backend.KV, l int, a backend.Attention) {
	d, qs, c := dst.(*Tensor), q.(*Tensor), kv.(*KV)
	switch {
	case a.HeadDim <= 0 || a.HeadDim > maxHeadDim:
		b.fail(fmt.Errorf("gpu: head dim %d outside the attention kernels' 1..%d", a.HeadDim, maxHeadDim))
		return
	case a.KVHeads <= 0 || a.Heads%a.KVHeads != 0:
		b.fail(fmt.Errorf("gpu: %d query heads over %d kv heads", a.Heads, a.KVHeads))
		return
	}
	n := b.rows(d)
	st := b.attention()
	ctx, run := st.survey(b.batch, n)
	// The decode kernel reads the cache as vec4s; other head dims take the
	// tiled kernel even for single rows.
	if run <= decodeRows && a.HeadDim%4 == 0 {
		b.attendDecode(st, d, qs, c, l, a, n, ctx)
	} else {
		b.attendPrefill(st, d, qs, c, l, a, n, ctx)
	}
}

func (b *Backend) attendPrefill(st *attnState, d, qs *Tensor, c *KV, l int, a backend.Attention, n, ctx int) {
	d4 := (a.HeadDim + 3) / 4
	t := prefillTileFor(d4)
	// A workgroup makes one pass over the positions for each sequence
	// among its rows: the budget is shared by the passes.
	span := t.span(d4) / st.passes(b.batch, n, t.br)
	chunks := (ctx + span - 1) / span
	scratch, err := st.scratch(b, chunks, n, a)
	if err != nil {
		b.fail(err)
		return
	}
	o := op{kernel: "attention_prefill", operands: []Access{ReadWrite, ReadWrite, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadOnly},
		consts: map[string]float64{"HD": float64(4 * d4), "BR": float64(t.br), "BC": float64(t.bc), "WG": float64(t.wg)}}
	b.record(o, params{uint32(a.Heads), uint32(a.KVHeads), uint32(a.HeadDim), uint32(d.rows), f32param(a.Scale),
		uint32(c.blockSize), uint32(b.tableWidth), uint32(span)},
		[]Binding{{Buffer: d.buf}, {Buffer: scratch}, {Buffer: qs.buf}, {Buffer: c.k[l]}, {Buffer: c.v[l]},
			{Buffer: b.pos}, {Buffer: b.rowSeq}, {Buffer: b.tables}},
		uint32(a.Heads), uint32((n+t.br-1)/t.br), uint32(chunks))
	b.combine(d, scratch, a, n, chunks)
}

func (b *Backend) attendDecode(st *attnState, d, qs *Tensor, c *KV, l int, a backend.Attention, n, ctx int) {
	group := a.Heads / a.KVHeads
	slices := (group + maxGroup - 1) / maxGroup
	g := (group + slices - 1) / slices // query heads per workgroup
	chunks := decodeChunks(ctx, n*a.KVHeads*slices, decodeSpan(a.HeadDim/4))
	scratch, err := st.scratch(b, chunks, n, a)
	if err != nil {
		b.fail(err)
		return
	}
	o := op{kernel: "attention_decode", operands: []Access{ReadWrite, ReadWrite, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadOnly, ReadOnly},
		consts: map[string]float64{"HD": float64(a.HeadDim), "G": float64(g)}}
	b.record(o, params{uint32(a.Heads), uint32(a.KVHeads), uint32(a.HeadDim), uint32(d.rows), f32param(a.Scale),
		uint32(c.blockSize), uint32(b.tableWidth), uint32(slices)},
		[]Binding{{Buffer: scratch}, {Buffer: d.buf}, {Buffer: qs.buf}, {Buffer: c.k[l]}, {Buffer: c.v[l]},
			{Buffer: b.pos}, {Buffer: b.rowSeq}, {Buffer: b.tables}},
		uint32(a.KVHeads*slices), uint32(chunks), uint32(n))
	b.combine(d, scratch, a, n, chunks)
}

// combine merges the partials of split-K, when there is more than one chunk.
func (b *Backend) combine(d *Tensor, scratch Buffer, a backend.Attention, n, chunks int) {
	if chunks > 1 {
		b.record(combineOp, params{uint32(a.Heads), uint32(a.HeadDim), uint32(d.rows)},
			[]Binding{{Buffer: d.buf}, {Buffer: scratch}}, uint32(a.Heads), uint32(n), 1)
	}
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
	part   Buffer  // split-K partials, grown on demand
	counts []int32 // rows per sequence, scratch of survey
}

// survey returns, for the first n rows of batch, the number of positions
// the longest row attends over and the most rows of one sequence.
func (st *attnState) survey(batch backend.Batch, n int) (ctx, run int) {
	if cap(st.counts) < len(batch.Tables) {
		st.counts = make([]int32, len(batch.Tables))
	}
	counts := st.counts[:len(batch.Tables)]
	clear(counts)
	for i := range n {
		ctx = max(ctx, int(batch.Pos[i])+1)
		s := batch.Seq[i]
		counts[s]++
		run = max(run, int(counts[s]))
	}
	return ctx, run
}

// passes is the most sequences among the rows of one prefill tile of br
// rows: a workgroup makes one pass over the cache for each.
func (st *attnState) passes(batch backend.Batch, n, br int) int {
	most := 1
	for r0 := 0; r0 < n; r0 += br {
		rows := batch.Seq[r0:min(n, r0+br)]
		k := 0
		for i, s := range rows {
			if !slices.Contains(rows[:i], s) {
				k++
			}
		}
		most = max(most, k)
	}
	return most
}

// scratch returns a buffer for the partials of chunks chunks of n rows
// (none are written with one chunk), growing the one the backend has.
func (st *attnState) scratch(b *Backend, chunks, n int, a backend.Attention) (Buffer, error) {
	size := int64(4)
	if chunks > 1 {
		size = 4 * (1 + int64(chunks)*int64(n)*int64(a.Heads)*int64(a.HeadDim+2))
	}
	if st.part != nil && st.part.Size() >= size {
		return st.part, nil
	}
	if size > b.info.MaxStorageBufferBindingSize {
		return nil, fmt.Errorf("gpu: attention partials of %s exceed the storage binding limit", FormatBytes(size))
	}
	// Grow by half again, so that a context that grows step by step does
	// not allocate at every step.
	size = min(max(size, st.size()*3/2), b.info.MaxStorageBufferBindingSize)
	buf, err := b.buffer("attention partials", size, Storage)
	if err != nil {
		return nil, err
	}
	st.part = buf
	return buf, nil
}

func (st *attnState) size() int64 {
	if st.part == nil {
		return 0
	}
	return st.part.Size()
}

// states holds each backend's attnState; the entry goes when the backend
// is collected, its buffers are owned (and released) by the backend.
var states struct {
	sync.Mutex
	m map[weak.Pointer[Backend]]*attnState
}

// attention returns b's attnState, made on first use.
func (b *Backend) attention() *attnState {
	key := weak.Make(b)
	states.Lock()
	defer states.Unlock()
	if st, ok := states.m[key]; ok {
		return st
	}
	if states.m == nil {
		states.m = map[weak.Pointer[Backend]]*attnState{}
	}
	st := &attnState{}
	states.m[key] = st
	runtime.AddCleanup(b, func(k weak.Pointer[Backend]) {
		states.Lock()
		delete(states.m, k)
		states.Unlock()
	}, key)
	return st
}
