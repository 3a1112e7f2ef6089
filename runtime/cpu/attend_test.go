package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// records lists the records of kv head h at positions first to last of
// sequence seq in layer l, through the table: AttendHead's input.
func (c *KV) records(batch backend.Batch, seq, l, first, last, h int) []int {
	var recs []int
	for p := first; p <= last; p++ {
		recs = append(recs, c.record(l, batch.SlotOf(seq, p), h))
	}
	return recs
}

// TestAttendMatchesHead checks the backend's Attend against its
// definition, AttendHead for each query head over its list of records, to
// the bit: every cache type, head dims on both sides of the short-head
// path and not multiples of 8, GQA ratios 1 to 8, blocks of 1 to 16 slots
// with shuffled tables, several sequences of mixed lengths (one row
// each, as in decoding, and prompt rows), windows, soft caps,
// bidirectional rows, a table whose blocks are not the cache's, sinks
// (larger and smaller than the scores), and one worker or two.
func TestAttendMatchesHead(t *testing.T) {
	for _, tc := range []struct {
		heads, kvHeads, hd, bs int
		a                      backend.Attention
	}{
		{8, 4, 8, 8, backend.Attention{}}, // stories260K
		{6, 2, 12, 5, backend.Attention{Softcap: 3}},
		{4, 4, 1, 1, backend.Attention{}},
		{8, 1, 3, 16, backend.Attention{Window: 7}},
		{9, 3, 64, 8, backend.Attention{}}, // SmolLM2
		{4, 2, 40, 3, backend.Attention{Bidirectional: true}},
		{2, 1, 31, 4, backend.Attention{Window: 2, Softcap: 1}},
		{2, 2, 33, 7, backend.Attention{}},
		{16, 2, 128, 16, backend.Attention{}},
		{8, 4, 8, -4, backend.Attention{}}, // a table of 4-slot blocks over a cache of 8-slot ones
		{8, 2, 16, 4, backend.Attention{Window: 5, Sinks: NewWeight([]int{8}, []float32{-3, 0, 2, 9, 0.5, -20, 4, 1})}}, // gpt-oss
	} {
		for _, kt := range []backend.KVType{backend.KVF32, backend.KVF16, backend.KVInt8} {
			for _, workers := range []int{1, 2} {
				name := fmt.Sprintf("%dx%d/hd%d/bs%d/%v/workers=%d", tc.heads, tc.kvHeads, tc.hd, tc.bs, kt, workers)
				t.Run(name, func(t *testing.T) {
					checkAttend(t, tc.heads, tc.kvHeads, tc.hd, tc.bs, tc.a, kt, workers, nil, 0, false)
				})
			}
		}
	}
}

// checkAttend compares Attend with AttendHead for sequences of lens
// positions (nil: lengths around the block size), each a prompt's rows,
// or where tail > 0 the last tail of them (a prompt's later chunk, the
// positions before it in the cache); stored keeps attendSpans' f32 keys
// as stored (as past SpanKeysBytes), not transposed.
func checkAttend(t *testing.T, heads, kvHeads, hd, bs int, a backend.Attention, kt backend.KVType, workers int, lens []int, tail int, stored bool) {
	cacheBS := bs
	if bs < 0 { // the table's blocks are half the cache's
		bs, cacheBS = -bs, -2*bs
	}
	rng := rand.New(rand.NewPCG(uint64(hd), uint64(bs)))
	random := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 2)
		}
		return x
	}
	// Sequence lengths: one position, one short of a block, several blocks
	// and a partial one. Each sequence gets shuffled blocks of the pool.
	if lens == nil {
		lens = []int{1, max(1, bs-1), 3*bs + 2, 37, 2}
	}
	blocks := 0
	for _, n := range lens {
		blocks += (n + bs - 1) / bs
	}
	perm := rng.Perm(blocks)
	var batch backend.Batch
	batch.BlockSize = bs
	for s, n := range lens {
		var table []int32
		for range (n + bs - 1) / bs {
			table, perm = append(table, int32(perm[0])), perm[1:]
		}
		batch.Tables = append(batch.Tables, table)
		for p := range max(n, 1) {
			batch.Tokens, batch.Pos, batch.Seq = append(batch.Tokens, 0), append(batch.Pos, int32(p)), append(batch.Seq, int32(s))
		}
	}
	rows := batch.Len()
	b := New(workers)
	if stored {
		b.spanKeys = 0
	}
	kv, err := b.NewKV(backend.KVShape{Layers: 2, Blocks: (blocks*bs + cacheBS - 1) / cacheBS, BlockSize: cacheBS, Heads: kvHeads, HeadDim: hd, Type: kt})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Begin(batch); err != nil {
		t.Fatal(err)
	}
	c := kv.(*KV)
	b.StoreKV(c, 1, NewTensor(rows, kvHeads*hd, random(rows*kvHeads*hd)), NewTensor(rows, kvHeads*hd, random(rows*kvHeads*hd)))
	if tail > 0 {
		chunk := backend.Batch{BlockSize: bs, Tables: batch.Tables}
		for i := range rows {
			if s := batch.Seq[i]; int(batch.Pos[i]) >= lens[s]-tail {
				chunk.Tokens, chunk.Pos, chunk.Seq = append(chunk.Tokens, 0), append(chunk.Pos, batch.Pos[i]), append(chunk.Seq, s)
			}
		}
		if err := b.Begin(chunk); err != nil {
			t.Fatal(err)
		}
		batch, rows = chunk, chunk.Len()
	}
	a.Heads, a.KVHeads, a.HeadDim, a.Scale = heads, kvHeads, hd, 1/float32(math.Sqrt(float64(hd)))
	q := NewTensor(rows, heads*hd, random(rows*heads*hd))
	got := NewTensor(rows, heads*hd, make([]float32, rows*heads*hd))
	b.Attend(got, q, c, 1, a)

	ends := batch.Ends()
	for i := range rows {
		last := int(batch.Pos[i])
		if a.Bidirectional {
			last = int(ends[i])
		}
		for h := range heads {
			recs := c.records(batch, int(batch.Seq[i]), 1, a.First(int(batch.Pos[i])), last, h/(heads/kvHeads))
			want := make([]float32, hd)
			AttendHead(want, q.Row(i)[h*hd:(h+1)*hd], &c.K, &c.V, recs, a.Scale, a.Softcap, sinkOf(a, h), make([]float32, len(recs)))
			for x, w := range want {
				if g := got.Row(i)[h*hd+x]; math.Float32bits(g) != math.Float32bits(w) {
					t.Fatalf("row %d (position %d) head %d value %d: %g, AttendHead gives %g", i, batch.Pos[i], h, x, g, w)
				}
			}
		}
	}
}

// TestAttendSpansMatchHead checks Attend's path for rows that share
// their span (attendSpans: bidirectional sequences of at least spanMinRows
// rows) against AttendHead to the bit: spans longer than a chunk
// (spanChunk, for every head width here) and than a job's rows (spanRows), sequences of just
// spanMinRows rows and of one row more than a job's, every cache type,
// head dims above and at kernel.Block and not multiples of 8 (a tower's
// 72), GQA, soft caps, sinks, one worker or two.
func TestAttendSpansMatchHead(t *testing.T) {
	lens := []int{2*spanChunk(33) + 37, spanMinRows, spanRows + 1}
	for _, tc := range []struct {
		heads, kvHeads, hd, bs int
		a                      backend.Attention
	}{
		{2, 2, 72, 16, backend.Attention{}}, // a SigLIP tower's heads, the tower's blocks
		{4, 2, 40, 3, backend.Attention{Softcap: 3}},
		{2, 1, 32, 7, backend.Attention{}},
		{8, 2, 33, -4, backend.Attention{Sinks: NewWeight([]int{8}, []float32{-3, 0, 2, 9, 0.5, -20, 4, 1})}},
	} {
		tc.a.Bidirectional = true
		for _, kt := range []backend.KVType{backend.KVF32, backend.KVF16, backend.KVInt8} {
			for _, workers := range []int{1, 2} {
				name := fmt.Sprintf("%dx%d/hd%d/bs%d/%v/workers=%d", tc.heads, tc.kvHeads, tc.hd, tc.bs, kt, workers)
				t.Run(name, func(t *testing.T) {
					checkAttend(t, tc.heads, tc.kvHeads, tc.hd, tc.bs, tc.a, kt, workers, lens, 0, false)
				})
			}
		}
	}
}

// TestAttendPromptSpansMatchHead checks Attend's path for a prompt's rows
// (attendSpans over causal rows: each its own last position, a block's
// rows fewer positions than its last) against AttendHead to the bit: whole
// prompts and later chunks of them (the positions before in the cache),
// spans longer than a chunk and than a job's rows, sequences of just
// spanMinRows rows, every cache type, head dims above and at kernel.Block
// and not multiples of 8, GQA, soft caps, sinks, windows the prompt
// stays within and one it passes (its rows then take the path per row),
// f32 keys transposed and as stored, one worker or two.
func TestAttendPromptSpansMatchHead(t *testing.T) {
	lens := []int{2*spanChunk(33) + 37, spanMinRows, spanRows + 1}
	for _, tc := range []struct {
		heads, kvHeads, hd, bs int
		a                      backend.Attention
	}{
		{9, 3, 64, 8, backend.Attention{}}, // SmolLM2
		{4, 2, 40, 3, backend.Attention{Softcap: 3}},
		{2, 1, 32, 7, backend.Attention{Window: 4096}},
		{8, 2, 33, -4, backend.Attention{Window: 20, Sinks: NewWeight([]int{8}, []float32{-3, 0, 2, 9, 0.5, -20, 4, 1})}},
	} {
		for _, kt := range []backend.KVType{backend.KVF32, backend.KVF16, backend.KVInt8} {
			for _, workers := range []int{1, 2} {
				stores := []bool{false}
				if kt == backend.KVF32 {
					stores = append(stores, true)
				}
				for _, tail := range []int{0, spanMinRows} {
					for _, stored := range stores {
						name := fmt.Sprintf("%dx%d/hd%d/bs%d/%v/workers=%d/tail=%d/stored=%v", tc.heads, tc.kvHeads, tc.hd, tc.bs, kt, workers, tail, stored)
						t.Run(name, func(t *testing.T) {
							checkAttend(t, tc.heads, tc.kvHeads, tc.hd, tc.bs, tc.a, kt, workers, lens, tail, stored)
						})
					}
				}
			}
		}
	}
}

// TestSpanGroups checks which rows take attendSpans: a sequence's rows
// over the same first position and last positions in order, every run of
// at least spanMinRows rows, and a span short enough for that many rows'
// scores.
func TestSpanGroups(t *testing.T) {
	prompt := func(lens ...int) (seq []int32, pos []int) {
		for s, n := range lens {
			for p := range n {
				seq, pos = append(seq, int32(s)), append(pos, p)
			}
		}
		return seq, pos
	}
	for _, tc := range []struct {
		name   string
		lens   []int
		window int
		want   []rowSpan
	}{
		{"one prompt", []int{10}, 0, []rowSpan{{0, 10, 0, 9}}},
		{"two prompts", []int{8, 9}, 0, []rowSpan{{0, 8, 0, 7}, {8, 17, 0, 8}}},
		{"a decode row beside a prompt", []int{12, 1}, 0, []rowSpan{{0, 12, 0, 11}}},
		{"short prompts", []int{7, 1, 3}, 0, nil},
		{"a window the prompt passes", []int{12}, 6, nil},
		{"a window a prompt passes beside one it does not", []int{12, 9}, 10, []rowSpan{{0, 10, 0, 9}, {12, 21, 0, 8}}},
		{"a window it stays within", []int{12}, 12, []rowSpan{{0, 12, 0, 11}}},
	} {
		seq, pos := prompt(tc.lens...)
		a := backend.Attention{Window: tc.window}
		got := spanGroups(len(seq), 4, seq, func(i int) (int, int) { return a.First(pos[i]), pos[i] })
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// A span too long for spanMinRows rows' scores.
	long := spanScoreBytes/(4*4*spanMinRows) + 1
	if got := spanGroups(spanMinRows, 4, make([]int32, spanMinRows), func(i int) (int, int) { return 0, long - spanMinRows + i }); got != nil {
		t.Errorf("a span of %d positions: %v, want the path per row", long, got)
	}
}

// BenchmarkAttendDecode times one layer's attention of a decode step: rows
// sequences of ctx cached positions each (one row each), stories260K's
// heads (8 over 4 kv heads of 8) and the same heads 64 wide, in an f32
// cache of 8-slot blocks, on one goroutine.
func BenchmarkAttendDecode(b *testing.B) {
	for _, hd := range []int{8, 64} {
		for _, ctx := range []int{64, 512} {
			for _, rows := range []int{1, 32} {
				b.Run(fmt.Sprintf("hd=%d/ctx=%d/rows=%d", hd, ctx, rows), func(b *testing.B) {
					benchAttend(b, 8, 4, hd, ctx, rows)
				})
			}
		}
	}
}

func benchAttend(b *testing.B, heads, kvHeads, hd, ctx, rows int) {
	const bs = 8
	be := New(1)
	per := (ctx + bs - 1) / bs
	kv, err := be.NewKV(backend.KVShape{Layers: 1, Blocks: rows * per, BlockSize: bs, Heads: kvHeads, HeadDim: hd})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	c := kv.(*KV)
	for i := range c.K.f32 {
		c.K.f32[i], c.V.f32[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	batch := backend.Batch{BlockSize: bs}
	perm := rng.Perm(rows * per) // sequences' blocks scattered over the pool
	for s := range rows {
		table := make([]int32, per)
		for j := range table {
			table[j] = int32(perm[s*per+j])
		}
		batch.Tables = append(batch.Tables, table)
		batch.Tokens, batch.Pos, batch.Seq = append(batch.Tokens, 0), append(batch.Pos, int32(ctx-1)), append(batch.Seq, int32(s))
	}
	if err := be.Begin(batch); err != nil {
		b.Fatal(err)
	}
	x := make([]float32, rows*heads*hd)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	q, out := NewTensor(rows, heads*hd, x), NewTensor(rows, heads*hd, make([]float32, rows*heads*hd))
	a := backend.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 1 / float32(math.Sqrt(float64(hd)))}
	for b.Loop() {
		be.Attend(out, q, c, 0, a)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows*heads*ctx), "ns/head-position")
}
