package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
)

// BenchmarkMatMulInt4Decode times one decode row against smollm2-135m's
// matrix shapes with one and two workers: how much of the second core a
// single product gets (a team kept between products, as a backend keeps it).
func BenchmarkMatMulInt4Decode(b *testing.B) {
	for _, s := range []struct{ n, k int }{{576, 576}, {192, 576}, {1536, 576}, {576, 1536}} {
		w := dtype.NewInt4(s.n, s.k)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range w.Codes {
			w.Codes[i] = r.Uint32()
		}
		for i := range w.Scales {
			w.Scales[i] = r.Uint32() & 0x3bff3bff
		}
		x := make([]float32, s.k)
		for i := range x {
			x[i] = r.Float32() - 0.5
		}
		q := make([]kernel.QRow, 1)
		q[0].Quantize(x)
		dst := make([]float32, s.n)
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%dx%d/workers=%d", s.n, s.k, workers), func(b *testing.B) {
				t := newTeam(workers)
				b.SetBytes(w.Bytes())
				for b.Loop() {
					matMulInt4(dst, q, w, s.n, t)
				}
			})
		}
	}
}

// BenchmarkMatMulF32Decode times f32 products at stories260K's shapes
// (q|k|v, gate|up, down, the head) for one decode row and for a batch of
// 32, on one goroutine: the batched decode step's short dot products.
func BenchmarkMatMulF32Decode(b *testing.B) {
	for _, s := range []struct{ k, n int }{{64, 128}, {64, 344}, {172, 64}, {64, 512}} {
		for _, m := range []int{1, 32} {
			x, w, dst := make([]float32, m*s.k), make([]float32, s.n*s.k), make([]float32, m*s.n)
			for i := range x {
				x[i] = float32(i%7) - 3
			}
			for i := range w {
				w[i] = float32(i%5) - 2
			}
			b.Run(fmt.Sprintf("%dx%d/rows=%d", s.n, s.k, m), func(b *testing.B) {
				for b.Loop() {
					matMul(dst, x, w, m, s.k, s.n, nil)
				}
			})
		}
	}
}

// BenchmarkMatMulPrompt times products of many rows on one goroutine at a
// vision tower's shapes (SigLIP's 1024 patches of 768, its MLP's 3072)
// and a prompt's, with f32 and f16 weights: the regime where the input
// rows, not the weights, would stream from memory without rowBlock.
func BenchmarkMatMulPrompt(b *testing.B) {
	for _, s := range []struct{ m, k, n int }{{1024, 768, 768}, {1024, 768, 3072}, {512, 2048, 2048}} {
		r := rand.New(rand.NewPCG(3, 4))
		x, w, dst := make([]float32, s.m*s.k), make([]float32, s.n*s.k), make([]float32, s.m*s.n)
		for i := range x {
			x[i] = r.Float32() - 0.5
		}
		for i := range w {
			w[i] = r.Float32() - 0.5
		}
		q := &QWeight{F16: make([]uint16, len(w))}
		for i, v := range w {
			q.F16[i] = dtype.HalfBits(v)
		}
		flops := float64(2 * s.m * s.k * s.n)
		b.Run(fmt.Sprintf("f32/%dx%dx%d", s.m, s.k, s.n), func(b *testing.B) {
			for b.Loop() {
				matMul(dst, x, w, s.m, s.k, s.n, nil)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("f16/%dx%dx%d", s.m, s.k, s.n), func(b *testing.B) {
			for b.Loop() {
				matMulQ(dst, x, q, s.m, s.k, s.n, nil)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
