package cpu

import (
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
)

// Attention of many rows over one span of positions: a vision tower's
// patches, or an image's tokens in a language model, attend to each other
// both ways, so every row of a sequence reads the same keys and values;
// a prompt's rows attend to the same positions but for their own last
// ones (the row before's and one more). Attend's job per row and kv head
// then reads all of them once per row: for a 4096-patch tower that is
// 2.4 MB a row and head, past a core's L2, and attention ran at memory's
// speed (over 80% of a real Gemma 3 tower's encode; half of a 2,048-token
// prompt's time for smollm2-135m). attendSpans instead gives a job a
// block of rows of one span and one kv head, so that the span's records
// are read from memory once a block:
//
//   - f32 keys, put in kernel.DotF32Keys' layout once a layer (transposed,
//     sixteen keys a tile), meet all of the block's queries a tile at a
//     time: a register of sixteen keys' scores a row, so that DotF32's
//     fold and tail, most of a 72-value head's work key by key, are
//     sixteen keys' at once (where the CPU has that kernel, AVX-512);
//   - the values go a chunk of positions (spanChunk) at a time for all the
//     block's rows, a chunk staying in L1 while the rows pass, f32 values
//     four rows' sums a record read (kernel.AxpyRows4); other caches'
//     keys (and f32 keys without the kernel) go so too, through
//     attendGroup's dots.
//
// A block's span is its last row's; a row with fewer positions (a
// prompt's) takes only its own: its scores past them are computed with
// the tile's others but neither softmaxed nor summed, and its weighted
// sums stop at its last position. Each row's scores, softmax, weighted
// sum and division are AttendHead's, in its order (DotF32's scores, then
// the same softmaxHeads, axpys' sums and normalizeHeads attendGroup runs,
// on the same runs): the bits do not change.

// spanRows is how many rows of a span a job takes at most: its scores
// (rows · span · group heads floats) stay within a core's L2 for spans of
// a few thousand positions, and a span's keys and values are read once
// for all of them.
const spanRows = 32

// spanScoreBytes bounds a job's scores, which spanBlockRows keeps there by
// taking fewer rows a job for longer spans: a prompt late in a long
// context would otherwise hold tens of megabytes of them a worker.
const spanScoreBytes = 4 << 20

// SpanKeysBytes bounds the transposed keys attendSpans keeps (b.spanKT)
// for the spans of one op (Backend.spanKeys, which tests lower): 8,192
// positions of 8 kv heads of 128 values. Memory estimates count it
// (runtime/eval).
const SpanKeysBytes = 32 << 20

// spanBlockRows is how many rows a job takes for a span of n positions
// and heads query heads a kv head: spanRows, fewer where their scores
// would pass spanScoreBytes (below spanMinRows the span's rows take
// Attend's path per row).
func spanBlockRows(n, heads int) int {
	return min(spanRows, spanScoreBytes/(4*heads*max(n, 1)))
}

// spanChunkBytes bounds the records of a chunk, the positions of the span
// a job's rows meet before the next: a chunk's values (keys, for caches
// other than f32) of a kv head stay in the core's L1 (32 KiB on Zen 4)
// while the rows pass. 256 positions of a 72-value head, 73 KiB, were
// read from L2 for every row: the weighted sums waited on it.
const spanChunkBytes = 20 << 10

// spanChunk is how many positions of hd values make a chunk: at least one
// run, at most spanChunkBytes.
func spanChunk(hd int) int { return spanChunkBytes / (4 * hd) }

// spanMinRows is the fewest rows of a span worth a job of their own: below
// it the job per row reads about as much and waits less.
const spanMinRows = 8

// rowSpan is rows lo..hi-1 of a batch, of one sequence, attending to
// positions from first, the last of them to last at most.
type rowSpan struct{ lo, hi, first, last int }

// spanGroups returns the runs of consecutive rows of one sequence (of the
// batch's n) that attend from the same first position (span(i)) and to
// last positions in order (equal for bidirectional rows, a prompt's one
// more a row), the run's last being its last row's, of at least
// spanMinRows rows and a span for which a job takes as many
// (spanBlockRows, heads query heads a kv head). The other rows (a decode
// step's, a short prompt's) take Attend's path per row, and so do the
// rows of a windowed layer's prompt past its window, which start one
// later each.
func spanGroups(n, heads int, seq []int32, span func(i int) (int, int)) []rowSpan {
	var gs []rowSpan
	for i := 0; i < n; {
		first, last := span(i)
		j := i + 1
		for ; j < n && seq[j] == seq[i]; j++ {
			f, l := span(j)
			if f != first || l < last {
				break
			}
			last = l
		}
		if j-i >= spanMinRows && spanBlockRows(last-first+1, heads) >= spanMinRows {
			gs = append(gs, rowSpan{i, j, first, last})
		}
		i = j
	}
	return gs
}

// spanWork is one worker's scratch for attendSpan, kept across its jobs.
type spanWork struct {
	runs   []run
	clip   []run       // a row's part of a chunk's runs (clipRuns)
	ns     []int       // row r's positions, ≤ the block's n
	scores []float32   // row r's query head h's scores at (r·heads + h)·n…
	sums   []float32   // row r's head h's sum of weights at r·heads + h
	exps   [][]float32 // row r's heads' exp(sink - max), with sinks
}

// clipRuns returns the runs of the first m positions of runs (none for m
// ≤ 0), in w.clip where the last must be cut short.
func (w *spanWork) clipRuns(runs []run, m int) []run {
	for i, r := range runs {
		if m <= r.n {
			if m <= 0 {
				return runs[:i]
			}
			if m == r.n {
				return runs[:i+1]
			}
			w.clip = append(append(w.clip[:0], runs[:i]...), run{r.rec, m})
			return w.clip
		}
		m -= r.n
	}
	return runs
}

// attendSpans is Attend for rows cut into spans (spanGroups, span(i) row
// i's): a job per block of spanBlockRows rows of a span and kv head. f32
// keys are first put in kernel.DotF32Keys' layout, each span's and kv
// head's once for all its blocks (b.spanKT, sixteen positions a tile, of
// which a block's are the first): transposed by every job, they cost more
// than the scores.
func (b *Backend) attendSpans(d, qs *Tensor, c *KV, l int, a backend.Attention, groups []rowSpan, tables [][]int32, span func(i int) (int, int)) {
	type block struct {
		rowSpan
		g int
	}
	var blocks []block
	var work int
	heads := a.Heads / a.KVHeads
	for gi, g := range groups {
		rows := spanBlockRows(g.last-g.first+1, heads)
		for lo := g.lo; lo < g.hi; lo += rows {
			hi := min(lo+rows, g.hi)
			_, last := span(hi - 1)
			blocks = append(blocks, block{rowSpan{lo, hi, g.first, last}, gi})
		}
		for i := g.lo; i < g.hi; i++ {
			_, last := span(i)
			work += (last - g.first + 1) * a.Heads * (2*a.HeadDim + 16)
		}
	}
	runs := func(rs []run, s rowSpan, h int) []run {
		return c.runs(rs, tables[b.batch.Seq[s.lo]], b.batch.BlockSize, l, s.first, s.last, h)
	}
	// kts[g] is where span g's transposed keys start in b.spanKT, kv head
	// h's at kts[g] + h·(its size)/KVHeads: tiles of KeysTile positions,
	// filled across the runs (a run is a cache block, often 8 slots: a
	// tile a run would leave half of each register's keys empty). Past
	// b.spanKeys bytes of them (SpanKeysBytes; a prompt late in a long
	// context: a layer's keys of the sequence), the keys stay as they
	// are, read by dots.
	var kts []int
	if c.K.typ == backend.KVF32 && kernel.KeysKernel() {
		hd := a.HeadDim
		tile := kernel.KeysTile * hd
		kts = make([]int, len(groups)+1)
		for gi, g := range groups {
			tiles := (g.last - g.first + kernel.KeysTile) / kernel.KeysTile
			kts[gi+1] = kts[gi] + tiles*tile*a.KVHeads
		}
		if 4*kts[len(groups)] > b.spanKeys {
			kts = nil
		}
	}
	if kts != nil {
		hd := a.HeadDim
		tile := kernel.KeysTile * hd
		b.spanKT = grow(b.spanKT, kts[len(groups)])
		b.team.over(kts[len(groups)], len(groups)*a.KVHeads, func(lo, hi int) {
			var rs []run
			for job := lo; job < hi; job++ {
				gi, h := job/a.KVHeads, job%a.KVHeads
				at := kts[gi] + h*(kts[gi+1]-kts[gi])/a.KVHeads
				fill := 0 // keys in the tile at at
				for _, r := range runs(rs[:0], groups[gi], h) {
					for j := 0; j < r.n; {
						m := min(kernel.KeysTile-fill, r.n-j)
						kernel.TransposeKeys(b.spanKT[at:at+tile], c.K.f32[(r.rec+j)*hd:], fill, m, hd)
						if fill, j = fill+m, j+m; fill == kernel.KeysTile {
							at, fill = at+tile, 0
						}
					}
				}
			}
		})
	}
	b.team.over(work, len(blocks)*a.KVHeads, func(lo, hi int) {
		w, _ := b.spanWork.Get().(*spanWork)
		if w == nil {
			w = new(spanWork)
		}
		defer b.spanWork.Put(w)
		for job := lo; job < hi; job++ {
			s, h := blocks[job/a.KVHeads], job%a.KVHeads
			w.ns = w.ns[:0]
			for i := s.lo; i < s.hi; i++ {
				_, last := span(i)
				w.ns = append(w.ns, last-s.first+1)
			}
			var sinks, kt []float32
			if a.Sinks != nil {
				sinks = a.Sinks.(*Weight).Data[h*heads : (h+1)*heads]
			}
			if kts != nil {
				size := (kts[s.g+1] - kts[s.g]) / a.KVHeads
				kt = b.spanKT[kts[s.g]+h*size : kts[s.g]+(h+1)*size]
			}
			w.runs = runs(w.runs[:0], s.rowSpan, h)
			c.attendSpan(d, qs, s.rowSpan, h, heads, a.Scale, a.Softcap, sinks, kt, w)
		}
	})
}

// attendSpan sets kv head h's group of heads query heads in rows s.lo..
// s.hi-1 of d to their attention over w.runs (positions s.first..s.last),
// row r over its first w.ns[r] positions (in order: a later row has as
// many or more): attendGroup's arithmetic for each row, the runs taken
// spanChunk positions at a time for all the rows. kt holds kv head h's
// keys in kernel.DotF32Keys' layout for an f32 cache (attendSpans), else
// nil.
func (c *KV) attendSpan(d, qs *Tensor, s rowSpan, h, heads int, scale, softcap float32, sinks, kt []float32, w *spanWork) {
	hd := c.shape.HeadDim
	cols := heads * hd
	rows, n, ns := s.hi-s.lo, s.last-s.first+1, w.ns
	w.scores = grow(w.scores, rows*heads*n)
	w.sums = grow(w.sums, rows*heads)
	if len(w.exps) < rows {
		w.exps = append(w.exps, make([][]float32, rows-len(w.exps))...)
	}
	chunk := spanChunk(hd)
	chunks := func(f func(t0 int, runs []run)) {
		for r0, t0 := 0, 0; r0 < len(w.runs); {
			r1, t1 := r0, t0
			for r1 < len(w.runs) && (r1 == r0 || t1+w.runs[r1].n-t0 <= chunk) {
				t1 += w.runs[r1].n
				r1++
			}
			f(t0, w.runs[r0:r1])
			r0, t0 = r1, t1
		}
	}
	if kt != nil { // sixteen positions' keys against every row: one kernel.DotF32Keys per head
		for t := 0; t < n; t += kernel.KeysTile {
			for g := range heads {
				q := qs.Data[s.lo*qs.cols+h*cols+g*hd:]
				kernel.DotF32Keys(w.scores[g*n+t:], heads*n, kt, min(kernel.KeysTile, n-t), hd, q, qs.cols, rows)
			}
			kt = kt[kernel.KeysTile*hd:]
		}
	} else {
		chunks(func(t0 int, runs []run) {
			for r := range rows {
				if rs := w.clipRuns(runs, ns[r]-t0); len(rs) > 0 {
					q := qs.Row(s.lo + r)[h*cols : (h+1)*cols]
					c.K.dots(w.scores[r*heads*n+t0:], n, q, heads, rs, &c.V, false)
				}
			}
		})
	}
	for r := range rows {
		w.exps[r] = softmaxHeads(w.scores[r*heads*n:(r+1)*heads*n], w.exps[r], heads, n, ns[r], scale, softcap, sinks)
		clear(d.Row(s.lo + r)[h*cols : (h+1)*cols])
	}
	clear(w.sums)
	chunks(func(t0 int, runs []run) {
		if c.V.typ != backend.KVF32 {
			for r := range rows {
				if rs := w.clipRuns(runs, ns[r]-t0); len(rs) > 0 {
					out := d.Row(s.lo + r)[h*cols : (h+1)*cols]
					c.V.axpys(out, w.scores[r*heads*n+t0:], n, heads, rs, w.sums[r*heads:(r+1)*heads])
				}
			}
			return
		}
		// f32 values: four (row, head) sums a record, kernel.AxpyRows4;
		// each sum of weights is its own chain, in order, as in axpys.
		pairs := rows * heads
		out := func(p int) []float32 {
			return d.Row(s.lo + p/heads)[h*cols+p%heads*hd : h*cols+(p%heads+1)*hd]
		}
		m := 0
		for _, r := range runs {
			m += r.n
		}
		// Row p/heads's weights of k records from position t: all of
		// them, or its first, or none (past its last position).
		weights := func(p, t, k int) []float32 {
			return w.scores[p*n+t : p*n+t+max(0, min(k, ns[p/heads]-t))]
		}
		addWeights(w.sums[:pairs], func(p int) []float32 { return weights(p, t0, m) })
		// Four pairs at a time over the runs all four take whole, then
		// each pair on alone: each sum takes its records in order.
		values := func(r run) []float32 { return c.V.f32[r.rec*hd : (r.rec+r.n)*hd] }
		for p := 0; p < pairs; p += 4 {
			j, t := 0, t0
			if p+4 <= pairs {
				dst := [4][]float32{out(p), out(p + 1), out(p + 2), out(p + 3)}
				for ; j < len(runs) && ns[p/heads] >= t+runs[j].n; j++ {
					k := runs[j].n
					a := [4][]float32{w.scores[p*n+t : p*n+t+k], w.scores[(p+1)*n+t:], w.scores[(p+2)*n+t:], w.scores[(p+3)*n+t:]}
					kernel.AxpyRows4(&dst, &a, values(runs[j]), hd)
					t += k
				}
			}
			for q := p; q < min(p+4, pairs); q++ {
				t := t
				for _, r := range runs[j:] {
					if a := weights(q, t, r.n); len(a) > 0 {
						kernel.AxpyRows(out(q), a, values(r), hd)
					}
					t += r.n
				}
			}
		}
	})
	for r := range rows {
		normalizeHeads(d.Row(s.lo + r)[h*cols:(h+1)*cols], w.sums[r*heads:(r+1)*heads], w.exps[r], hd, sinks != nil)
	}
}

// addWeights adds to each sums[p] the weights of p, in order, where
// weights(p) is never shorter than weights(p-1): each sum is its own
// chain of additions, taken four at a time side by side over their
// common length (one chain alone waits on each addition), then each on
// to its end.
func addWeights(sums []float32, weights func(p int) []float32) {
	p := 0
	for ; p+4 <= len(sums); p += 4 {
		a0, a1, a2, a3 := weights(p), weights(p+1), weights(p+2), weights(p+3)
		k := len(a0)
		a1, a2, a3 = a1[:k], a2[:k], a3[:k]
		s0, s1, s2, s3 := sums[p], sums[p+1], sums[p+2], sums[p+3]
		for i, v := range a0 {
			s0 += v
			s1 += a1[i]
			s2 += a2[i]
			s3 += a3[i]
		}
		sums[p], sums[p+1], sums[p+2], sums[p+3] = s0, s1, s2, s3
		for q := p + 1; q < p+4; q++ {
			for _, v := range weights(q)[k:] {
				sums[q] += v
			}
		}
	}
	for ; p < len(sums); p++ {
		sum := sums[p]
		for _, v := range weights(p) {
			sum += v
		}
		sums[p] = sum
	}
}
