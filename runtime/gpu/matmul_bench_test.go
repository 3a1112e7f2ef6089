package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// BenchmarkMatMul times dst = x · wᵀ for f32 weights, at decode shapes
// (GEMV: one token, or a few, over n×k weights) and a prompt chunk (GEMM:
// 64 tokens), with the plan MatMul picks for the adapter ("auto") and with
// each plan forced: "naive" (one invocation per output, the baseline),
// "gemv" (the GPU's: a few dozen invocations per column, a tree sum), "gemv1"
// (the CPU adapter's: one invocation per column) and "gemm" (tiled).
//
// Each iteration records one MatMul and an Argmax of one row, whose 4-byte
// read-back waits for the dispatch to finish. Reported: GB/s of weights read
// (the figure of merit of bandwidth-bound GEMV) and GFLOP/s (2·m·n·k per
// op, that of GEMM). "copy" times a plain buffer copy of the 4096×4096
// weight size, the bandwidth roof GEMV aims at.
//
//	go test ./runtime/gpu -run '^$' -bench MatMul
func BenchmarkMatMul(b *testing.B) {
	dev := gputest.Open(b)
	b.Logf("adapter %s (%s)", dev.Info().Adapter, dev.Info().DeviceType)
	b.Run("copy/64MiB", func(b *testing.B) { benchCopy(b, dev, 64<<20) })
	for _, c := range []struct{ m, k, n int }{
		{1, 2048, 5632}, {1, 4096, 4096}, {64, 2048, 2048}, // the figures asked for
		{4, 2048, 2048}, {8, 2048, 2048}, {16, 2048, 2048}, // around the GEMV threshold
	} {
		for _, kernel := range []string{"naive", "auto", "gemv", "gemv1", "gemm"} {
			b.Run(fmt.Sprintf("%s/m%d_k%d_n%d", kernel, c.m, c.k, c.n), func(b *testing.B) {
				forced := kernel
				if kernel == "auto" {
					forced = ""
				}
				benchMatMul(b, dev, c.m, c.k, c.n, forced)
			})
		}
	}
}

// benchMatMul times an m×k by k×n product with the f32 kernel forced
// ("" for the backend's plan).
func benchMatMul(b *testing.B, dev webgpu.Device, m, k, n int, kernel string) {
	g, err := gpu.NewBackend(dev, m)
	if err != nil {
		b.Fatal(err)
	}
	g.SetPlan(gpu.Plan{MatMul: kernel})
	defer g.Close()
	rng := rand.New(rand.NewPCG(uint64(k), uint64(n)))
	w, err := g.Upload(f32Tensor("w", uniform(rng), n, k))
	if err != nil {
		b.Fatal(err)
	}
	x, err := g.NewTensor(m, k)
	if err != nil {
		b.Fatal(err)
	}
	xdata := make([]float32, m*k)
	for i := range xdata {
		xdata[i] = rng.Float32()*2 - 1
	}
	if err := g.Write(x, xdata); err != nil {
		b.Fatal(err)
	}
	y, err := g.NewTensor(m, n)
	if err != nil {
		b.Fatal(err)
	}
	sec := secondsPerMatMul(b, g, matmulBatch(m), y, x, w)
	b.ReportMetric(float64(4*n*k)/sec/1e9, "GB/s")
	b.ReportMetric(float64(2*m*n*k)/sec/1e9, "GFLOP/s")
}

// benchCopy times a buffer-to-buffer copy of size bytes, reporting the bytes
// read per second.
func benchCopy(b *testing.B, dev webgpu.Device, size int64) {
	src, err := dev.NewBuffer("copy src", size, webgpu.Storage|webgpu.CopySrc|webgpu.CopyDst)
	if err != nil {
		b.Fatal(err)
	}
	defer src.Release()
	dst, err := dev.NewBuffer("copy dst", size, webgpu.Storage|webgpu.CopySrc|webgpu.CopyDst)
	if err != nil {
		b.Fatal(err)
	}
	defer dst.Release()
	rec := dev.Recorder()
	op := func() {
		rec.Copy(src, 0, dst, 0, size)
		if err := rec.Submit(); err != nil {
			b.Fatal(err)
		}
		if _, err := dev.Read(dst, 0, 4); err != nil {
			b.Fatal(err)
		}
	}
	op()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		op()
	}
	sec := time.Since(start).Seconds() / float64(b.N)
	b.ReportMetric(float64(size)/sec/1e9, "GB/s")
}

// matmulBatch is a step of m tokens of one sequence at positions 0..m-1.
func matmulBatch(m int) backend.Batch {
	b := backend.Batch{Tokens: make([]int32, m), Pos: make([]int32, m), Seq: make([]int32, m), BlockSize: 16}
	for i := range b.Pos {
		b.Pos[i] = int32(i)
	}
	table := make([]int32, (m+15)/16)
	for i := range table {
		table[i] = int32(i)
	}
	b.Tables = [][]int32{table}
	return b
}

// secondsPerMatMul times y = x·wᵀ on g for the batch, with an argmax read
// back after each so that every product is waited for; the first, which
// compiles the pipelines and builds the bind groups, is not counted.
func secondsPerMatMul(b *testing.B, g *gpu.Backend, batch backend.Batch, y, x backend.Tensor, w backend.Weight) float64 {
	if err := g.Begin(batch); err != nil {
		b.Fatal(err)
	}
	op := func() {
		g.MatMul(y, x, w)
		if _, err := g.Argmax(y, 1); err != nil {
			b.Fatal(err)
		}
	}
	op()
	b.ResetTimer()
	start, cpu := time.Now(), gputest.CPUTime()
	for i := 0; i < b.N; i++ {
		op()
	}
	// CPU time per op: on a CPU adapter (lavapipe) the driver's threads
	// do the work, and their CPU time is steadier than wall time on cores
	// other processes share.
	b.ReportMetric(float64(gputest.CPUTime()-cpu)/1e6/float64(b.N), "cpu-ms/op")
	return time.Since(start).Seconds() / float64(b.N)
}
