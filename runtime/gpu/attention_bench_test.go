package gpu_test

import (
	"math"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// BenchmarkAttention times Attend alone, for heads 32, kv heads 8, head dim
// 64: decode (one row) at positions 512 and 2048, and prefill of 64 rows at
// positions 0 and 512. Each iteration records the op for every layer and
// submits once, so that the cost of a submission and a read-back is spread
// over the layers; ms/attend is the time per op. The cache holds 4096
// positions in blocks of 16, its blocks in order, in each cache type.
func BenchmarkAttention(b *testing.B) {
	for _, kt := range kvTypes {
		b.Run(kt.String(), func(b *testing.B) { benchAttention(b, kt) })
	}
}

func benchAttention(b *testing.B, kt backend.KVType) {
	const heads, kvHeads, headDim, context, blockSize, layers = 32, 8, 64, 4096, 16, 8
	for _, bc := range []struct {
		name      string
		rows, pos int
	}{
		{"decode_pos512", 1, 512},
		{"decode_pos2048", 1, 2048},
		{"prefill_64rows_pos0", 64, 0},
		{"prefill_64rows_pos512", 64, 512},
	} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := gpu.NewBackend(gputest.Open(b), 64)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			qDim := heads * headDim
			cache, err := g.NewKV(backend.KVShape{Layers: layers, Blocks: context / blockSize, BlockSize: blockSize, Heads: kvHeads, HeadDim: headDim, Type: kt})
			if err != nil {
				b.Fatal(err)
			}
			q, out := benchQuery(b, g, 64, qDim)
			table := make([]int32, context/blockSize)
			for i := range table {
				table[i] = int32(i)
			}
			batch := backend.Batch{Tokens: make([]int32, bc.rows), Pos: make([]int32, bc.rows), Seq: make([]int32, bc.rows),
				Tables: [][]int32{table}, BlockSize: blockSize}
			for i := range batch.Pos {
				batch.Pos[i] = int32(bc.pos + i)
			}
			a := backend.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: headDim, Scale: float32(1 / math.Sqrt(headDim))}
			step := func() {
				if err := g.Begin(batch); err != nil {
					b.Fatal(err)
				}
				for l := 0; l < layers; l++ {
					g.Attend(out, q, cache, l, a)
				}
				if _, err := g.Read(out, 1); err != nil {
					b.Fatal(err)
				}
			}
			step() // compile the pipelines, build the bind groups
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				step()
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*layers)/1e6, "ms/attend")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchQuery makes an attention benchmark's queries, rows × qDim of fixed
// values, and an output of the same shape.
func benchQuery(b *testing.B, g *gpu.Backend, rows, qDim int) (q, out backend.Tensor) {
	b.Helper()
	q, err := g.NewTensor(rows, qDim)
	if err != nil {
		b.Fatal(err)
	}
	if out, err = g.NewTensor(rows, qDim); err != nil {
		b.Fatal(err)
	}
	data := make([]float32, rows*qDim)
	for i := range data {
		data[i] = float32(math.Sin(float64(i)))
	}
	if err := g.Write(q, data); err != nil {
		b.Fatal(err)
	}
	return q, out
}
