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
				t.Run(name, func(t *testing.T) { checkAttend(t, tc.heads, tc.kvHeads, tc.hd, tc.bs, tc.a, kt, workers, nil) })
			}
		}
	}
}

// checkAttend compares Attend with AttendHead for sequences of lens
// positions (nil: lengths around the block size), each a prompt's rows.
func checkAttend(t *testing.T, heads, kvHeads, hd, bs int, a backend.Attention, kt backend.KVType, workers int, lens []int) {
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
	kv, err := b.NewKV(backend.KVShape{Layers: 2, Blocks: (blocks*bs + cacheBS - 1) / cacheBS, BlockSize: cacheBS, Heads: kvHeads, HeadDim: hd, Type: kt})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Begin(batch); err != nil {
		t.Fatal(err)
	}
	c := kv.(*KV)
	b.StoreKV(c, 1, NewTensor(rows, kvHeads*hd, random(rows*kvHeads*hd)), NewTensor(rows, kvHeads*hd, random(rows*kvHeads*hd)))
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
				t.Run(name, func(t *testing.T) { checkAttend(t, tc.heads, tc.kvHeads, tc.hd, tc.bs, tc.a, kt, workers, lens) })
			}
		}
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
