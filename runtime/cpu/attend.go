package cpu

import (
	"math"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
	"github.com/x448/float16"
)

// Attention as the backend runs it: AttendHead (ops.go) defines the
// result of one query head, and Attend computes exactly its bits, arranged
// for speed. A batched decode step attends once per row, layer and head
// over a few hundred positions of a head of 8 to 128 values, so per
// position the work is a short dot product, an exp and a short axpy:
// anything per position beyond the arithmetic (a call, a switch on the
// cache's type, an index looked up in a list) costs as much as the
// arithmetic. So Attend
//
//   - takes a job per row and kv head, not per query head: the query heads
//     of a GQA group are computed together, each key and value record read
//     once for all of them;
//   - walks the block table in runs of consecutive slots of one block,
//     whose records for a kv head are consecutive in the cache (see KV),
//     instead of a list of record indexes;
//   - switches on the cache's type once per job and, for f32 caches, makes
//     a run one vector kernel call per two query heads (kernel.AxpyRows2;
//     AxpyRows for an odd one): kernel.AxpyRows adds
//     the run's value records, weighted, to the head's output (its eight
//     outputs at a time staying in a register), and, for heads shorter than
//     kernel.Block, whose keys are stored by tile (see KVStore), computes
//     the run's scores as the sum over the head's dimensions of q_i times
//     row i of the tile: eight positions' dot products at once, each still
//     the sequential sum DotF32 is below Block values; longer f32 heads
//     take a run's scores in one kernel.DotF32Rows call per head.
//
// Every score, exp, sum and output element is computed by the same
// operations in the same order as AttendHead's, so the results do not
// change (TestAttendMatchesHead, to the bit).

// A run is a stretch of consecutive positions of a sequence that lie in
// one cache block: for one kv head their records are rec, rec+1, ….
type run struct{ rec, n int }

// runs appends the runs of positions first..last of the sequence whose
// block table is table (blocks of bs slots), for kv head h of layer l.
func (c *KV) runs(rs []run, table []int32, bs, l, first, last, h int) []run {
	cbs := c.shape.BlockSize
	if bs == cbs { // the table's blocks are the cache's: a run per entry
		base := (l*c.shape.Blocks*c.shape.Heads + h) * bs
		stride := c.shape.Heads * bs // records from one block to the next
		for b := first / bs; b <= last/bs; b++ {
			lo, hi := max(first-b*bs, 0), min(last-b*bs, bs-1)
			rs = append(rs, run{base + int(table[b])*stride + lo, hi - lo + 1})
		}
		return rs
	}
	for p := first; p <= last; {
		slot := int(table[p/bs])*bs + p%bs
		n := min(bs-p%bs, cbs-slot%cbs, last-p+1)
		rs = append(rs, run{c.record(l, slot, h), n})
		p += n
	}
	return rs
}

// attendWork is one worker's scratch, kept across its jobs.
type attendWork struct {
	runs   []run
	scores []float32 // query head h's scores at h·n…
	sums   []float32 // each query head's sum of weights
	sinks  []float32 // each query head's exp(sink - max), with sinks
	// warm says the job's records are in this core's cache already (see
	// Backend.Attend), so that asking for them ahead costs more than it
	// saves.
	warm bool
}

// warmBytes is the keys and values of a layer (every kv head of one
// sequence) that the jobs of a prompt's rows, one after the other on a
// worker, find in its cache from the row before: a core's L2 (1 MiB on
// Zen 4). Past it attention prefetches as for a decode step's rows.
// Prefetching what the cache holds cost a tenth of a 512-token prompt's
// attention (smollm2: 9.5-10.7 CPU ns a head and position with it, 8.4-9.3
// without).
const warmBytes = 1 << 20

// attendGroup sets out (heads·hd values) to the attention of the heads
// query heads in q (one GQA group, laid out as out is) over the n
// positions of w.runs, each score scaled and, for softcap > 0,
// soft-capped, with the heads' sink logits where sinks is not nil:
// AttendHead for each head, reading each record once.
func (c *KV) attendGroup(out, q []float32, heads, n int, scale, softcap float32, sinks []float32, w *attendWork) {
	hd := c.shape.HeadDim
	w.scores = grow(w.scores, heads*n)
	w.sums = grow(w.sums, heads)
	if !w.warm {
		for _, r := range w.runs[:min(prefetchAhead, len(w.runs))] {
			c.K.prefetch(r)
			c.V.prefetch(r)
		}
	}
	c.K.dots(w.scores, n, q, heads, w.runs, &c.V, !w.warm)
	w.sinks = softmaxHeads(w.scores, w.sinks, heads, n, n, scale, softcap, sinks)
	clear(out)
	clear(w.sums)
	c.V.axpys(out, w.scores, n, heads, w.runs, w.sums)
	normalizeHeads(out, w.sums[:heads], w.sinks, hd, sinks != nil)
}

// normalizeHeads divides each head's hd values of out by its sum of
// weights (plus its sink's exp, where sinks is set), as AttendHead does.
func normalizeHeads(out, sums, sinkExps []float32, hd int, sinks bool) {
	for h, sum := range sums {
		if sinks {
			sum += sinkExps[h]
		}
		inv := 1 / sum
		o := out[h*hd : (h+1)*hd]
		for i := range o {
			o[i] *= inv
		}
	}
}

// softmaxHeads turns the scores of heads query heads (n each, head h's at
// s[h·stride:]) into their unnormalised softmax weights as AttendHead
// does: scaled, soft-capped where softcap > 0, shifted by the maximum (and
// the head's sink logit, whose exp it returns in exps[h] where sinks is
// not nil) and exponentiated.
func softmaxHeads(s, exps []float32, heads, stride, n int, scale, softcap float32, sinks []float32) []float32 {
	for h := range heads {
		s := s[h*stride : h*stride+n]
		// The maximum only shifts the exps' arguments: where it may differ
		// from AttendHead's (NaN, ±0), every output is NaN anyway, or the
		// shifted scores are the same.
		var mx float32
		if softcap > 0 {
			mx = float32(math.Inf(-1))
			for t, v := range s {
				s[t] = Softcap(v*scale, softcap)
				mx = max(mx, s[t])
			}
		} else {
			mx = kernel.ScaleMax(s, scale)
		}
		if sinks != nil { // the sink joins the softmax: its exp is added to the sum below
			mx = max(mx, sinks[h])
			exps = append(exps[:h], expf(sinks[h]-mx))
		}
		kernel.ExpShift(s, mx)
	}
	return exps
}

// prefetchAhead is how many runs ahead of the one it reads attention asks
// for the records of the next: a sequence's blocks lie anywhere in the
// pool, so without it each run waits on memory (a batched decode step
// reads every sequence's keys and values once, megabytes beyond the
// caches), and too far ahead the lines would wait for room in flight.
const prefetchAhead = 4

// prefetch asks for the records of run r (f32 stores; the narrower ones
// read less and are not prefetched).
func (s *KVStore) prefetch(r run) {
	if s.typ != backend.KVF32 {
		return
	}
	at, end := r.rec*s.hd, (r.rec+r.n)*s.hd
	if s.tile > 0 {
		at = (r.rec - r.rec%s.tile) * s.hd
		end = at + s.tile*s.hd
	}
	kernel.Prefetch(s.f32[at:end])
}

// dots sets dst[h·n + t] to the dot product of query head h of q (heads
// heads of s.hd values) with the record of position t of runs: what dot
// gives, record by record. Where prefetch is set it prefetches the
// records of s and v prefetchAhead runs ahead of the one it reads (the
// value pass follows).
func (s *KVStore) dots(dst []float32, n int, q []float32, heads int, runs []run, v *KVStore, prefetch bool) {
	hd, t := s.hd, 0
	ahead := func(j int) {
		if j += prefetchAhead; prefetch && j < len(runs) {
			s.prefetch(runs[j])
			v.prefetch(runs[j])
		}
	}
	switch {
	case s.tile > 0:
		clear(dst)
		for j, r := range runs {
			ahead(j)
			kt := s.f32[(r.rec-r.rec%s.tile)*hd+r.rec%s.tile:]
			h := 0
			for ; h+2 <= heads; h += 2 {
				kernel.AxpyRows2(dst[h*n+t:h*n+t+r.n], dst[(h+1)*n+t:], q[h*hd:(h+1)*hd], q[(h+1)*hd:], kt, s.tile)
			}
			if h < heads {
				kernel.AxpyRows(dst[h*n+t:h*n+t+r.n], q[h*hd:(h+1)*hd], kt, s.tile)
			}
			t += r.n
		}
	case s.typ == backend.KVF16:
		for _, r := range runs {
			for rec := r.rec; rec < r.rec+r.n; rec++ {
				k := s.f16[rec*hd : (rec+1)*hd]
				for h := range heads {
					dst[h*n+t] = kernel.DotF16(q[h*hd:(h+1)*hd], k)
				}
				t++
			}
		}
	case s.typ == backend.KVInt8:
		for _, r := range runs {
			for rec := r.rec; rec < r.rec+r.n; rec++ {
				k, sc := s.i8[rec*hd:(rec+1)*hd], s.scale[rec]
				for h := range heads {
					qh := q[h*hd : (h+1)*hd]
					qh = qh[:len(k)]
					var sum float32
					for i, c := range k {
						sum += float32(qh[i] * float32(c))
					}
					dst[h*n+t] = sc * sum
				}
				t++
			}
		}
	default: // a run's records are consecutive rows of hd values
		for j, r := range runs {
			ahead(j)
			k := s.f32[r.rec*hd : (r.rec+r.n)*hd]
			for h := range heads {
				kernel.DotF32Rows(dst[h*n+t:], 1, q[h*hd:(h+1)*hd], k, r.n)
			}
			t += r.n
		}
	}
}

// axpys adds p[h·n + t]·(the record of position t of runs) to query head
// h's hd values of out, position by position in order: what axpy gives,
// record by record. It adds head h's weights to sums[h], in
// order: a chain of dependent additions, which, run by run beside the
// values' own, costs no time of its own. It adds to what out and sums
// hold, so that a span's runs may come in several calls.
func (s *KVStore) axpys(out, p []float32, n, heads int, runs []run, sums []float32) {
	hd, t := s.hd, 0
	for _, r := range runs {
		for h := range heads {
			sum := sums[h]
			for _, v := range p[h*n+t : h*n+t+r.n] {
				sum += v
			}
			sums[h] = sum
		}
		switch s.typ {
		case backend.KVF32:
			v := s.f32[r.rec*hd:]
			h := 0
			for ; h+2 <= heads; h += 2 {
				kernel.AxpyRows2(out[h*hd:(h+1)*hd], out[(h+1)*hd:], p[h*n+t:h*n+t+r.n], p[(h+1)*n+t:], v, hd)
			}
			if h < heads {
				kernel.AxpyRows(out[h*hd:(h+1)*hd], p[h*n+t:h*n+t+r.n], v, hd)
			}
		case backend.KVF16:
			for j := range r.n {
				v := s.f16[(r.rec+j)*hd : (r.rec+j+1)*hd]
				for h := range heads {
					o, a := out[h*hd:(h+1)*hd], p[h*n+t+j]
					o = o[:len(v)]
					for i, x := range v {
						o[i] += float32(a * float16.Frombits(x).Float32())
					}
				}
			}
		case backend.KVInt8:
			for j := range r.n {
				rec := r.rec + j
				v, sc := s.i8[rec*hd:(rec+1)*hd], s.scale[rec]
				for h := range heads {
					o, as := out[h*hd:(h+1)*hd], p[h*n+t+j]*sc
					o = o[:len(v)]
					for i, c := range v {
						o[i] += float32(as * float32(c))
					}
				}
			}
		}
		t += r.n
	}
}
