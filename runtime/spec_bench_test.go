package runtime

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// BenchmarkVerifyRows measures what speculation's policy weighs: a
// decode step of r rows, each an output row with its argmax read back
// (a verification of r-1 drafts), on stories260K at position 100, on the
// CPU backend and WebGPU. Every size runs once before the measurement
// (a GPU compiles a pipeline the first time it meets a shape), and the
// sizes take turns so that a machine's drift reaches them all alike;
// each reports its median step and its ratio to the one-row step's
// median (lavapipe, 2026-12-06: 1.1 for 2 rows, 1.3 for 4, 1.7 for 8,
// 6–8 for 9, where another path takes over; the CPU: 1.8, 2.7, —, 5.5).
func BenchmarkVerifyRows(b *testing.B) {
	sizes := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12}
	for _, dev := range []string{"cpu", "webgpu"} {
		b.Run(dev, func(b *testing.B) {
			e, err := Load(filepath.Join("..", "..", "shared", "models", "stories260K.gguf"), Options{Device: dev, Context: 512, NoSelfCheck: true})
			if errors.Is(err, webgpu.ErrNoAdapter) {
				gputest.NoDevice(b, err)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			seq := e.pool.NewSeq()
			const at = 100
			if _, err := seq.Reserve(at + sizes[len(sizes)-1]); err != nil {
				b.Fatal(err)
			}
			step := func(n int) time.Duration {
				bt := backend.Batch{BlockSize: e.pool.BlockSize(), Tables: [][]int32{seq.Table()}}
				for i := range n {
					bt.Tokens = append(bt.Tokens, int32(5+i))
					bt.Pos = append(bt.Pos, int32(at+i))
					bt.Seq = append(bt.Seq, 0)
					bt.Out = append(bt.Out, int32(i))
				}
				start := time.Now()
				if err := e.net.forward(bt); err != nil {
					b.Fatal(err)
				}
				if _, err := e.be.Argmax(e.net.logits, n); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			for _, n := range sizes {
				step(n)
			}
			times := map[int][]time.Duration{}
			b.ResetTimer()
			for range b.N {
				for _, n := range sizes {
					times[n] = append(times[n], step(n))
				}
			}
			b.StopTimer()
			median := func(n int) time.Duration {
				slices.Sort(times[n])
				return times[n][len(times[n])/2]
			}
			for _, n := range sizes {
				b.ReportMetric(float64(median(n).Microseconds()), fmt.Sprintf("µs/%d-rows", n))
				b.ReportMetric(float64(median(n))/float64(median(1)), fmt.Sprintf("x/%d-rows", n))
			}
		})
	}
}
