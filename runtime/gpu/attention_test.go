package gpu_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
	"github.com/tessera-llm/tessera/runtime/gpu"
)

// The attention tests run sequences through a paged cache on both backends:
// each step stores the keys and values of its rows and (unless it only
// fills the cache) attends, and the GPU's output is compared with the CPU
// reference's.

// attnMaxRows is the batch capacity of the attention tests.
const attnMaxRows = 64

// attnRun is n consecutive rows of sequence seq, continuing where it stands.
type attnRun struct{ seq, n int }

// attnStep is one batch; fill steps only store.
type attnStep struct {
	runs []attnRun
	fill bool
}

type attnCase struct {
	heads, kvHeads, headDim int
	blockSize, seqLen, seqs int // each sequence has room for seqLen positions
	steps                   []attnStep
}

func (tc attnCase) name() string {
	return fmt.Sprintf("h%d_kv%d_d%d_bs%d_len%d_seqs%d", tc.heads, tc.kvHeads, tc.headDim, tc.blockSize, tc.seqLen, tc.seqs)
}

// attnAt returns steps that bring sequence 0 (alone) to position p by filling
// and then run the rows of check there, if any.
func attnAt(p int, check ...attnRun) []attnStep {
	var steps []attnStep
	for filled := 0; filled < p; filled += attnMaxRows {
		steps = append(steps, attnStep{runs: []attnRun{{0, min(attnMaxRows, p-filled)}}, fill: true})
	}
	if len(check) == 0 {
		return steps
	}
	return append(steps, attnStep{runs: check})
}

// attnRepeat is n copies of s.
func attnRepeat(s attnStep, n int) []attnStep {
	steps := make([]attnStep, n)
	for i := range steps {
		steps[i] = s
	}
	return steps
}

// attnDecodes checks one row of sequence 0 at each position, in order.
func attnDecodes(pos ...int) []attnStep {
	var steps []attnStep
	filled := 0
	for _, p := range pos {
		for filled < p {
			n := min(attnMaxRows, p-filled)
			steps = append(steps, attnStep{runs: []attnRun{{0, n}}, fill: true})
			filled += n
		}
		steps = append(steps, attnStep{runs: []attnRun{{0, 1}}})
		filled++
	}
	return steps
}

// attnChunks checks sequence 0 in prompt chunks of the given sizes.
func attnChunks(sizes ...int) []attnStep {
	var steps []attnStep
	for _, n := range sizes {
		steps = append(steps, attnStep{runs: []attnRun{{0, n}}})
	}
	return steps
}

func (tc attnCase) run(t *testing.T) { tc.runKV(t, backend.KVF32) }

// runKV runs the case over a cache of type kt, with each form of the
// decode kernel: attention_decode (GPUs') and attention_lane (CPU
// adapters').
func (tc attnCase) runKV(t *testing.T, kt backend.KVType) {
	for _, form := range []string{"group", "lane"} {
		t.Run(form, func(t *testing.T) { tc.runForm(t, kt, form) })
	}
}

func (tc attnCase) runForm(t *testing.T, kt backend.KVType, form string) {
	tc.runWith(t, kt, form, nil)
}

// runWith is runForm with the attention changed by with, when not nil.
func (tc attnCase) runWith(t *testing.T, kt backend.KVType, form string, with func(w *twins, a *backend.Attention)) {
	tc.runRope(t, kt, form, with, nil)
}

// runRope is runWith where, with rope set, every step is RopeAttend with
// rope as q's rotation (and k's, over the kv heads): the keys are rotated,
// stored and attended to by one op.
func (tc attnCase) runRope(t *testing.T, kt backend.KVType, form string, with func(w *twins, a *backend.Attention), rope *backend.Rope) {
	w := newTwins(t, attnMaxRows)
	w.gpu.SetPlan(gpu.Plan{Attention: form, RopeAttend: "on"})
	kvDim := tc.kvHeads * tc.headDim
	qDim := tc.heads * tc.headDim
	perSeq := (tc.seqLen + tc.blockSize - 1) / tc.blockSize
	blocks := perSeq * tc.seqs
	// The sequences' blocks are spread over the pool in a shuffled order.
	order := w.rng.Perm(blocks)
	tables := make([][]int32, tc.seqs)
	for s := range tables {
		for _, b := range order[s*perSeq : (s+1)*perSeq] {
			tables[s] = append(tables[s], int32(b))
		}
	}
	var cache pair[backend.KV]
	w.each(func(b backend.Backend, i int) {
		var err error
		if cache[i], err = b.NewKV(backend.KVShape{Layers: 2, Blocks: blocks, BlockSize: tc.blockSize, Heads: tc.kvHeads, HeadDim: tc.headDim, Type: kt}); err != nil {
			t.Fatal(err)
		}
	})
	a := backend.Attention{Heads: tc.heads, KVHeads: tc.kvHeads, HeadDim: tc.headDim,
		Scale: float32(1 / math.Sqrt(float64(tc.headDim)))}
	q := w.tensor(attnMaxRows, qDim, nil)
	var sinks pair[backend.Weight] // each backend's, with sinks
	if with != nil {
		with(w, &a)
		if a.Sinks != nil {
			sinks = w.weight([]int{tc.heads}, w.random(tc.heads, 6))
		}
	}
	k := w.tensor(attnMaxRows, kvDim, nil)
	v := w.tensor(attnMaxRows, kvDim, nil)
	out := w.tensor(attnMaxRows, qDim, nil)
	write := func(p pair[backend.Tensor], data []float32) {
		w.each(func(b backend.Backend, i int) {
			if err := b.Write(p[i], data); err != nil {
				t.Fatal(err)
			}
		})
	}
	filled := make([]int, tc.seqs)
	for _, st := range tc.steps {
		batch := backend.Batch{Tables: tables, BlockSize: tc.blockSize}
		what := ""
		for _, r := range st.runs {
			for i := 0; i < r.n; i++ {
				batch.Tokens = append(batch.Tokens, 1)
				batch.Pos = append(batch.Pos, int32(filled[r.seq]+i))
				batch.Seq = append(batch.Seq, int32(r.seq))
			}
			what += fmt.Sprintf(" seq %d: %d rows at %d;", r.seq, r.n, filled[r.seq])
			filled[r.seq] += r.n
		}
		write(k, w.random(attnMaxRows*kvDim, 2))
		write(v, w.random(attnMaxRows*kvDim, 2))
		if !st.fill || rope != nil { // RopeAttend may rotate q in place
			write(q, w.random(attnMaxRows*qDim, 2))
		}
		w.each(func(b backend.Backend, i int) {
			if err := b.Begin(batch); err != nil {
				t.Fatal(err)
			}
			ai := a
			if a.Sinks != nil {
				ai.Sinks = sinks[i]
			}
			switch {
			case rope != nil:
				rk := *rope
				rk.Heads = tc.kvHeads
				b.RopeAttend(out[i], q[i], k[i], v[i], cache[i], 1, *rope, rk, ai)
			case st.fill:
				b.StoreKV(cache[i], 1, k[i], v[i])
			default:
				b.StoreKV(cache[i], 1, k[i], v[i])
				b.Attend(out[i], q[i], cache[i], 1, ai)
			}
		})
		if st.fill {
			// The GPU records ops until a read: run the store before
			// the next Write replaces its inputs.
			if _, err := w.gpu.Read(k[1], 1); err != nil {
				t.Fatal(err)
			}
			continue
		}
		tol := 2e-5
		if rope != nil {
			// The GPU's cos and sin (SwiftShader's in Chromium are off
			// by ~1e-4) move a rotated key by enough to round it to the
			// next half (2⁻¹¹ relative) or int8 code (1/127 of the
			// head's largest value) now and then.
			switch kt {
			case backend.KVF16:
				tol = 2e-3
			case backend.KVInt8:
				tol = 1e-2
			default:
				tol = 5e-4
			}
		}
		w.compare(what, out, batch.Len(), tol)
	}
	if rope != nil { // the fused form ran where it should, and only there
		lone := false
		for _, st := range tc.steps {
			one := true
			for _, r := range st.runs {
				one = one && r.n == 1
			}
			lone = lone || one
		}
		want := form == "lane" && tc.headDim%4 == 0 && lone
		if got := slices.ContainsFunc(w.gpu.Kernels(), func(k string) bool { return strings.HasPrefix(k, "attention_lane+rope") }); got != want {
			t.Errorf("attention_lane+rope ran: %v, want %v (kernels %v)", got, want, w.gpu.Kernels())
		}
	}
}

// TestAttentionDecodeBoundaries decodes at positions around the decode
// kernel's blocks (64 positions), chunk lengths (128 and up) and cache
// blocks, up to the last position a sequence holds, with GQA groups from 1
// to 16 (split into slices of at most 8 heads).
func TestAttentionDecodeBoundaries(t *testing.T) {
	edges := attnDecodes(0, 1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
		383, 384, 511, 512, 513, 1000, 1023, 1024, 1025, 2047)
	for _, tc := range []attnCase{
		{8, 8, 64, 16, 2048, 1, edges},
		{32, 8, 64, 16, 2048, 1, edges},
		{8, 1, 128, 32, 2048, 1, edges},
		{32, 2, 16, 7, 2048, 1, edges},
		{12, 1, 8, 64, 2048, 1, edges},
		{10, 1, 32, 16, 600, 1, attnDecodes(0, 63, 64, 200, 599)},
		{4, 2, 256, 16, 600, 1, attnDecodes(0, 64, 65, 300, 599)},
		{5, 5, 40, 5, 300, 1, attnDecodes(0, 64, 299)},
		// Gemma 4's global heads: 512 wide, a group of 8 in slices of 4.
		{16, 2, 512, 16, 600, 1, attnDecodes(0, 1, 63, 64, 65, 128, 129, 300, 599)},
		{6, 1, 512, 5, 200, 1, attnDecodes(0, 64, 199)},
	} {
		t.Run(tc.name(), tc.run)
	}
}

// TestAttentionPrefillTiles runs prompt chunks whose first row starts inside
// a tile and whose last row lands before, on and after tile boundaries (16,
// 32 and 64 rows or positions, depending on the head dim), up to a chunk
// that fills the sequence to its last position, for head dims 8 to 128 and
// a few odd ones.
func TestAttentionPrefillTiles(t *testing.T) {
	steps := attnChunks(15, 2, 14, 2, 30, 2, 64, 35, 64, 28, 9, 44, 62, 64, 48, 15, 1, 3, 10)
	for _, hd := range []int{8, 16, 32, 64, 128} {
		for _, gqa := range []int{1, 4} {
			tc := attnCase{8, 8 / gqa, hd, 16, 512, 1, steps}
			t.Run(tc.name(), tc.run)
		}
	}
	for _, tc := range []attnCase{
		{4, 1, 256, 16, 160, 1, attnChunks(7, 33, 64, 56)},
		{8, 2, 512, 16, 160, 1, attnChunks(7, 3, 33, 64, 1, 52)},
		{6, 3, 24, 8, 96, 1, attnChunks(64, 32)},
		{6, 3, 6, 8, 96, 1, attnChunks(64, 31, 1)}, // head dim not a multiple of 4: tiled kernel for every row
		{4, 2, 13, 5, 100, 1, attnChunks(17, 1, 64)},
		{12, 2, 64, 32, 129, 1, attnChunks(64, 64, 1)},
		{2, 1, 64, 16, 1024, 1, attnAt(960, attnRun{0, 64})},
		{2, 1, 64, 16, 1024, 1, attnAt(1000, attnRun{0, 5})},
	} {
		t.Run(tc.name(), tc.run)
	}
}

// TestAttentionSequences batches rows of several sequences: decode rows of
// many sequences at different lengths (the split-K kernel, one sequence per
// row), prompt chunks of two sequences in one batch, and a prompt chunk
// with decode rows of other sequences, so that tiles straddle sequences.
func TestAttentionSequences(t *testing.T) {
	prefill := func(seqs, n int) attnStep {
		s := attnStep{}
		for i := range seqs {
			s.runs = append(s.runs, attnRun{i, n})
		}
		return s
	}
	decode := func(seqs ...int) attnStep {
		s := attnStep{}
		for _, i := range seqs {
			s.runs = append(s.runs, attnRun{i, 1})
		}
		return s
	}
	for _, tc := range []attnCase{
		{8, 2, 64, 16, 600, 8, []attnStep{
			prefill(8, 8), decode(0, 1, 2, 3, 4, 5, 6, 7),
			{runs: []attnRun{{0, 64}}}, {runs: []attnRun{{1, 40}, {2, 24}}},
			decode(7, 0, 1, 2, 3), decode(0, 1),
			{runs: []attnRun{{3, 50}, {0, 1}, {1, 1}, {4, 3}, {5, 2}, {6, 7}}},
			{runs: []attnRun{{7, 9}, {6, 9}, {5, 9}, {4, 9}, {3, 9}, {2, 9}, {1, 9}}},
			{runs: []attnRun{{0, 64}}, fill: true}, {runs: []attnRun{{0, 64}}, fill: true}, {runs: []attnRun{{0, 64}}, fill: true},
			decode(0, 1, 2, 3, 4, 5, 6, 7), {runs: []attnRun{{0, 2}, {1, 2}, {2, 2}}},
			{runs: []attnRun{{4, 8}, {5, 9}, {6, 1}, {7, 8}}}, // 8 rows of a sequence decode, 9 take tiles
		}},
		{4, 4, 32, 8, 200, 3, []attnStep{
			{runs: []attnRun{{0, 20}, {1, 20}, {2, 20}}}, {runs: []attnRun{{2, 4}, {1, 4}, {0, 4}}}, decode(1, 2, 0),
		}},
		{8, 8, 6, 4, 100, 2, []attnStep{
			{runs: []attnRun{{0, 10}, {1, 3}}}, decode(0, 1), {runs: []attnRun{{1, 30}, {0, 2}}},
		}},
	} {
		t.Run(tc.name(), tc.run)
	}
}

// TestAttentionLongPrefill reaches contexts that the tiled kernel splits
// over the positions (its workgroups' loop budget) and merges with the
// combine kernel, alone and with a tile that straddles two sequences, and
// contexts just short of a split, where a workgroup runs the most loop
// iterations it may (llvmpipe would cut them short past 65535).
func TestAttentionLongPrefill(t *testing.T) {
	for _, tc := range []attnCase{
		{2, 1, 128, 16, 5300, 1, attnAt(5180, attnRun{0, 16})},  // span 5208
		{2, 1, 64, 16, 10500, 1, attnAt(10440, attnRun{0, 16})}, // span 10464
		{4, 2, 256, 16, 4000, 1, attnAt(3900, attnRun{0, 64})},
		{4, 2, 256, 16, 2100, 2, append(attnAt(2000, attnRun{0, 20}), attnStep{runs: []attnRun{{1, 12}, {0, 10}}})},
		// attention_lane's prompt rows at a context just short of a
		// split: 64 rows × 16 heads are enough invocations for one chunk
		// (laneChunks), of laneSpan positions at most.
		{16, 16, 8, 16, 6500, 1, attnAt(6360, attnRun{0, 64})}, // span 6430
		{16, 4, 72, 16, 800, 1, attnAt(700, attnRun{0, 64})},   // span 778
		// Both kernels split, in one batch: sequence 0's rows take
		// tiles, sequence 1's decode, and each kernel's partials are
		// combined before the other's are written.
		{4, 2, 256, 16, 2100, 2, append(append(attnAt(1900), attnRepeat(attnStep{runs: []attnRun{{1, 50}}, fill: true}, 20)...),
			attnStep{runs: []attnRun{{0, 30}, {1, 2}}}, attnStep{runs: []attnRun{{1, 3}, {0, 40}}})},
	} {
		t.Run(tc.name(), tc.run)
	}
}

// TestAttentionKVTypes runs both kernels over f16 and int8 caches: decode
// rows around the decode kernel's blocks and cache blocks, prompt chunks
// over tile boundaries, head dims not a multiple of 4 (padded records),
// GQA groups of 1 to 8, one-row steps and a batch mixing sequences. Both
// backends store the same inputs, so they read (nearly) the same values:
// what is compared is the kernels' reading of the records.
func TestAttentionKVTypes(t *testing.T) {
	for _, tc := range []attnCase{
		{8, 1, 64, 16, 600, 1, attnDecodes(0, 1, 15, 16, 17, 63, 64, 65, 128, 129, 599)},
		{32, 4, 128, 7, 300, 1, attnDecodes(0, 6, 7, 8, 200, 299)},
		{8, 8, 8, 5, 200, 1, attnChunks(1, 15, 2, 30, 64, 1, 35, 1)},
		{6, 3, 6, 8, 96, 1, attnChunks(64, 31, 1)},
		{4, 2, 13, 5, 100, 1, attnChunks(17, 1, 64)},
		{4, 1, 256, 16, 160, 1, attnChunks(7, 33, 64, 1)},
		{8, 1, 512, 16, 160, 1, attnChunks(7, 2, 64, 1, 1)},
		{4, 4, 32, 8, 200, 3, []attnStep{
			{runs: []attnRun{{0, 20}, {1, 20}, {2, 20}}}, {runs: []attnRun{{2, 4}, {1, 4}, {0, 4}}},
			{runs: []attnRun{{1, 1}, {2, 1}, {0, 1}}},
		}},
	} {
		for _, kt := range kvTypes[1:] {
			t.Run(kt.String()+"_"+tc.name(), func(t *testing.T) { tc.runKV(t, kt) })
		}
	}
}

// TestAttentionSinks: gpt-oss's sink logits join the softmax of decode
// rows (both forms), prompt tiles and long contexts split over positions,
// with a sliding window, on every cache type.
func TestAttentionSinks(t *testing.T) {
	steps := []attnStep{{runs: []attnRun{{0, 37}}}, {runs: []attnRun{{0, 1}}}, {runs: []attnRun{{0, 64}}}, {runs: []attnRun{{0, 1}}},
		{runs: []attnRun{{0, 3}}}}
	for _, tc := range []attnCase{{8, 2, 64, 16, 200, 1, steps}, {4, 4, 16, 8, 600, 1, attnDecodes(0, 1, 300, 599)}} {
		for _, window := range []int{0, 20} {
			for _, kt := range []backend.KVType{backend.KVF32, backend.KVInt8} {
				for _, form := range []string{"group", "lane"} {
					t.Run(fmt.Sprintf("%s/window%d/%v/%s", tc.name(), window, kt, form), func(t *testing.T) {
						tc.runWith(t, kt, form, func(w *twins, a *backend.Attention) {
							a.Window, a.Sinks = window, cpu.NewWeight([]int{a.Heads}, nil) // replaced by each backend's
						})
					})
				}
			}
		}
	}
}

// TestAttentionBidirectionalWindow: steps of one sequence whose rows see
// every row of the step (a Gemma 3 image's) on sliding-window layers,
// where each row's window still starts from its own position, after a
// prefix longer than the window; awkward head dims, GQA, blocks that the
// step straddles.
func TestAttentionBidirectionalWindow(t *testing.T) {
	for _, tc := range []attnCase{
		{4, 1, 16, 8, 200, 1, attnAt(21, attnRun{0, 16})},
		{8, 2, 72, 16, 300, 1, append(attnAt(37, attnRun{0, 64}), attnStep{runs: []attnRun{{0, 5}}})},
		{2, 2, 6, 4, 100, 1, attnAt(3, attnRun{0, 29})},
	} {
		for _, window := range []int{0, 9, 20} {
			t.Run(fmt.Sprintf("%s/window%d", tc.name(), window), func(t *testing.T) {
				tc.runWith(t, backend.KVF32, "group", func(w *twins, a *backend.Attention) {
					a.Window, a.Bidirectional = window, true
				})
			})
		}
	}
}
