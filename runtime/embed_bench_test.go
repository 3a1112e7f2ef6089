package runtime_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// BenchmarkEmbed embeds 64 texts of 32 tokens ([CLS], 30 word pieces,
// [SEP]) per iteration with a synthetic all-MiniLM-L6 (f32 weights) on
// each backend, in one call (one forward of 2,048 rows), and reports
// embeddings per second.
func BenchmarkEmbed(b *testing.B) {
	path := synthModel(b, "all-minilm-l6", dtype.F32)
	rng := rand.New(rand.NewPCG(1, 2))
	inputs := make([][]int32, 64)
	for i := range inputs {
		inputs[i] = []int32{101}
		for range 30 {
			inputs[i] = append(inputs[i], int32(1000+rng.IntN(29000)))
		}
		inputs[i] = append(inputs[i], 102)
	}
	for _, dev := range []string{"cpu", "webgpu"} {
		b.Run(dev, func(b *testing.B) {
			e, err := runtime.LoadEmbedder(path, runtime.Options{Device: dev, Quant: "f32"})
			if errors.Is(err, webgpu.ErrNoAdapter) {
				gputest.NoDevice(b, err)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			if _, err := e.EmbedTokens(ctx, inputs, true); err != nil { // compiles the pipelines
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := e.EmbedTokens(ctx, inputs, true); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(inputs)*b.N)/b.Elapsed().Seconds(), "embeddings/s")
		})
	}
}
