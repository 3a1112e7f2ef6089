package gpu_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"

	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// BenchmarkVisionMatMul times the f32 products of a vision tower's layer
// (SigLIP so400m's width, 1152) over many rows (an image's patches), with
// the CPU adapters' GEMV (gemv1: on such an adapter the plan MatMul picks,
// 32 rows × 8 columns an invocation for these row counts) and the tiled
// GEMM (the GPUs'). On lavapipe the GEMV wins by far (see
// docs/DECISIONS.md, "Many-row products and whole-image attention").
//
//	go test ./runtime/gpu -run '^$' -bench VisionMatMul -benchtime 2x
func BenchmarkVisionMatMul(b *testing.B) {
	dev := gputest.Open(b)
	for _, c := range []struct{ m, k, n int }{{1024, 1152, 1152}, {256, 1152, 1152}} {
		for _, kernel := range []string{"gemv1", "gemm"} {
			b.Run(fmt.Sprintf("%s/m%d_k%d_n%d", kernel, c.m, c.k, c.n), func(b *testing.B) {
				benchMatMul(b, dev, c.m, c.k, c.n, kernel)
			})
		}
	}
}

// BenchmarkVisionAttention times whole-image attention: 1024 rows of one
// sequence, bidirectional, 16 heads of 72 (SigLIP so400m's), with the
// adapter's plan ("": on a CPU adapter attention_lane_rows, laneRows rows an
// invocation) and with Plan.Attention "group" (attention_prefill's tiles,
// the GPUs' kernel, on any adapter). The cache's contents do not matter
// for the time.
//
//	go test ./runtime/gpu -run '^$' -bench VisionAttention -benchtime 1x
func BenchmarkVisionAttention(b *testing.B) {
	const heads, headDim, rows, blockSize = 16, 72, 1024, 16
	for _, plan := range []string{"", "group"} {
		b.Run("plan="+plan, func(b *testing.B) {
			g, err := gpu.NewBackend(gputest.Open(b), rows)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			g.SetPlan(gpu.Plan{Attention: plan})
			qDim := heads * headDim
			cache, err := g.NewKV(backend.KVShape{Layers: 1, Blocks: rows / blockSize, BlockSize: blockSize, Heads: heads, HeadDim: headDim})
			if err != nil {
				b.Fatal(err)
			}
			q, out := benchQuery(b, g, rows, qDim)
			table := make([]int32, rows/blockSize)
			for i := range table {
				table[i] = int32(i)
			}
			batch := backend.Batch{Tokens: make([]int32, rows), Pos: make([]int32, rows), Seq: make([]int32, rows),
				Tables: [][]int32{table}, BlockSize: blockSize}
			for i := range batch.Pos {
				batch.Pos[i] = int32(i)
			}
			a := backend.Attention{Heads: heads, KVHeads: heads, HeadDim: headDim, Scale: 0.1, Bidirectional: true}
			step := func() {
				if err := g.Begin(batch); err != nil {
					b.Fatal(err)
				}
				g.Attend(out, q, cache, 0, a)
				if _, err := g.Read(out, 1); err != nil {
					b.Fatal(err)
				}
			}
			step() // compile the pipelines, build the bind groups
			b.ResetTimer()
			start, cpu := time.Now(), gputest.CPUTime()
			for i := 0; i < b.N; i++ {
				step()
			}
			b.ReportMetric(float64(gputest.CPUTime()-cpu)/1e6/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/1e6, "ms/attend")
			b.ReportMetric(0, "ns/op")
		})
	}
}
