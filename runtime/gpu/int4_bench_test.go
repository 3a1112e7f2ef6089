package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// BenchmarkGEMVStorage times a decode matmul (one row of x against an n×k
// weight) with the weight stored as f32, f16 and int4, at the shapes of a
// 1B model's FFN (2048×5632) and a 7B model's attention (4096×4096).
//
// Reported: GB/s of the weight bytes as stored (int4: 20 bytes per 32
// values, codes and scales) per second, the figure of merit of a
// bandwidth-bound GEMV; "copy" is webgpu.CopyBandwidth on the same device, the
// roof it aims at. A lower GB/s for int4 than for f32 with a shorter time
// per op means the kernel is bound by the expansion arithmetic, not memory
// (the case on a CPU adapter like lavapipe).
//
// Each iteration records one MatMul and an Argmax of one row, whose 4-byte
// read-back waits for the dispatch to finish.
//
//	go test ./runtime/gpu -run '^$' -bench GEMVStorage
func BenchmarkGEMVStorage(b *testing.B) {
	dev := gputest.Open(b)
	b.Run("copy/64MiB", func(b *testing.B) {
		var gbps float64
		for b.Loop() {
			var err error
			if gbps, err = webgpu.CopyBandwidth(dev, 64<<20, 4); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(gbps, "GB/s")
	})
	for _, shape := range []struct{ k, n int }{{2048, 5632}, {4096, 4096}} {
		for _, s := range []backend.Storage{backend.F32, backend.F16, backend.Int8, backend.Int4} {
			b.Run(fmt.Sprintf("%v/k%d_n%d", s, shape.k, shape.n), func(b *testing.B) {
				benchGEMV(b, dev, s, shape.k, shape.n)
			})
		}
	}
}

func benchGEMV(b *testing.B, dev webgpu.Device, s backend.Storage, k, n int) {
	g, err := gpu.NewBackend(dev, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	rng := rand.New(rand.NewPCG(uint64(k), uint64(n)))
	w, err := g.UploadAs(f32Tensor("w", normal(rng, 0.02), n, k), s)
	if err != nil {
		b.Fatal(err)
	}
	x, err := g.NewTensor(1, k)
	if err != nil {
		b.Fatal(err)
	}
	xdata := make([]float32, k)
	for i := range xdata {
		xdata[i] = rng.Float32()*2 - 1
	}
	if err := g.Write(x, xdata); err != nil {
		b.Fatal(err)
	}
	y, err := g.NewTensor(1, n)
	if err != nil {
		b.Fatal(err)
	}
	sec := secondsPerMatMul(b, g, oneRow(), y, x, w)
	b.ReportMetric(float64(w.Bytes())/sec/1e9, "GB/s")
	b.ReportMetric(sec*1e3, "ms/op")
}

// oneRow is a batch of one token at position 0 of one sequence.
func oneRow() backend.Batch {
	return backend.Batch{Tokens: []int32{0}, Pos: []int32{0}, Seq: []int32{0}, Tables: [][]int32{{0}}, BlockSize: 16}
}
