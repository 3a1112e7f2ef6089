package gpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// encoderBatch is one step over whole sequences of the given lengths, rows
// interleaved in chunks so that sequences do not sit in one run each, with
// token types 0 for the first half of each sequence and 1 after.
func encoderBatch(lens []int, blockSize int) backend.Batch {
	b := backend.Batch{BlockSize: blockSize}
	next := 0
	for _, n := range lens {
		var table []int32
		for range (n + blockSize - 1) / blockSize {
			table = append(table, int32(next))
			next++
		}
		b.Tables = append(b.Tables, table)
	}
	done := make([]int, len(lens))
	for left := true; left; {
		left = false
		for s, n := range lens {
			for range min(5, n-done[s]) {
				b.Tokens = append(b.Tokens, int32(done[s]))
				b.Pos = append(b.Pos, int32(done[s]))
				b.Seq = append(b.Seq, int32(s))
				b.Types = append(b.Types, int32(min(1, 2*done[s]/n)))
				done[s]++
			}
			left = left || done[s] < n
		}
	}
	return b
}

func blocksOf(b backend.Batch) int {
	n := 0
	for _, t := range b.Tables {
		n += len(t)
	}
	return n
}

func TestLayerNormAndActivate(t *testing.T) {
	for _, shape := range []struct{ rows, batch, cols int }{
		{1, 1, 1}, {1, 1, 64}, {4, 3, 172}, {64, 64, 257}, {64, 17, 384}, {8, 8, 3072},
	} {
		t.Run(fmt.Sprintf("%dx%d_batch%d", shape.rows, shape.cols, shape.batch), func(t *testing.T) {
			w := newTwins(t, shape.rows)
			n := shape.rows * shape.cols
			// An offset mean, as residual streams have, tests the centring.
			x := w.random(n, 3)
			for i := range x {
				x[i] += 5
			}
			in := w.tensor(shape.rows, shape.cols, x)
			out := w.tensor(shape.rows, shape.cols, nil)
			gain := w.weight([]int{shape.cols}, w.random(shape.cols, 2))
			bias := w.weight([]int{shape.cols}, w.random(shape.cols, 1))
			acts := map[models.Activation]pair[backend.Tensor]{}
			for _, a := range []models.Activation{models.SiLU, models.GELUTanh, models.GELU, models.Tanh, models.GELUQuick} {
				acts[a] = w.tensor(shape.rows, shape.cols, w.random(n, 12))
			}
			w.begin(tokens(shape.batch, 10, w.rng), 0)
			w.each(func(b backend.Backend, i int) {
				b.LayerNorm(out[i], in[i], gain[i], bias[i], 1e-12)
				for a, x := range acts {
					b.Activate(x[i], a)
				}
			})
			w.compare("layernorm", out, shape.batch, 1e-5)
			for a, x := range acts {
				w.compare(a.String(), x, shape.batch, 1e-6)
			}
		})
	}
}

func TestLookupAndMeanPool(t *testing.T) {
	for _, lens := range [][]int{{1}, {7}, {3, 1, 20}, {64, 64}, {33, 2, 9, 1, 17, 100}} {
		t.Run(fmt.Sprint(lens), func(t *testing.T) {
			b := encoderBatch(lens, 16)
			w := newTwins(t, 256)
			const dim = 40
			posTable := w.weight([]int{128, dim}, w.random(128*dim, 1))
			typeTable := w.weight([]int{2, dim}, w.random(2*dim, 1))
			pos, types := w.tensor(256, dim, nil), w.tensor(256, dim, nil)
			x := w.tensor(256, dim, w.random(256*dim, 2))
			pooled := w.tensor(len(lens)+3, dim, w.random((len(lens)+3)*dim, 1))
			w.beginBatch(b)
			w.each(func(be backend.Backend, i int) {
				be.Lookup(pos[i], posTable[i], backend.ByPos)
				be.Lookup(types[i], typeTable[i], backend.ByType)
				be.MeanPool(pooled[i], x[i])
			})
			w.compare("positions", pos, len(b.Tokens), 0)
			w.compare("types", types, len(b.Tokens), 0)
			w.compare("mean", pooled, len(lens), 1e-6)
			// A batch without types looks up type 0 everywhere.
			b.Types = nil
			w.beginBatch(b)
			w.each(func(be backend.Backend, i int) { be.Lookup(types[i], typeTable[i], backend.ByType) })
			w.compare("no types", types, len(b.Tokens), 0)
		})
	}
}

func TestBidirectionalAttention(t *testing.T) {
	for _, tc := range []struct {
		heads, kvHeads, headDim, blockSize int
		lens                               []int
	}{
		{2, 2, 8, 16, []int{1}},
		{12, 12, 32, 16, []int{5, 3, 8}},     // all rows on the split-K path
		{12, 12, 64, 8, []int{33, 1, 70, 9}}, // both kernels in one step
		{12, 12, 64, 16, []int{128, 128}},    // BERT's head, long sequences
		{6, 2, 62, 7, []int{40, 11, 2}},      // GQA, a head not a multiple of 4
		{8, 8, 96, 16, repeat(32, 8)},        // 256 rows of 32 tokens
		{16, 4, 128, 16, []int{300, 20}},     // past one workgroup's tile
	} {
		t.Run(fmt.Sprintf("h%d_kv%d_d%d_%v", tc.heads, tc.kvHeads, tc.headDim, tc.lens), func(t *testing.T) {
			b := encoderBatch(tc.lens, tc.blockSize)
			rows := len(b.Tokens)
			w := newTwins(t, rows)
			kvDim, qDim := tc.kvHeads*tc.headDim, tc.heads*tc.headDim
			cache := w.kv(backend.KVShape{Layers: 1, Blocks: blocksOf(b), BlockSize: tc.blockSize, Heads: tc.kvHeads, HeadDim: tc.headDim})
			q := w.tensor(rows, qDim, w.random(rows*qDim, 2))
			k := w.tensor(rows, kvDim, w.random(rows*kvDim, 2))
			v := w.tensor(rows, kvDim, w.random(rows*kvDim, 2))
			out := w.tensor(rows, qDim, nil)
			a := backend.Attention{Heads: tc.heads, KVHeads: tc.kvHeads, HeadDim: tc.headDim,
				Scale: float32(1 / math.Sqrt(float64(tc.headDim))), Bidirectional: true}
			w.beginBatch(b)
			w.each(func(be backend.Backend, i int) {
				be.StoreKV(cache[i], 0, k[i], v[i])
				be.Attend(out[i], q[i], cache[i], 0, a)
			})
			w.compare("attention", out, rows, 2e-5)
		})
	}
}
