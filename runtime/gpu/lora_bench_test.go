package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// BenchmarkAddLoRA times the adapters of SmolLM2-135M's q, k and v (one
// 576-wide input, outputs 576, 192 and 192) for a decode step of 8 rows
// spread over 1 or 4 adapters of rank 8 or 64, against no adapter (the
// step's other work: an argmax, which every case pays):
//
//	go test ./runtime/gpu -run '^$' -bench AddLoRA
func BenchmarkAddLoRA(b *testing.B) {
	dev := gputest.Open(b)
	const rows, in = 8, 576
	outs := []int{576, 192, 192}
	for _, c := range []struct{ slots, rank int }{{0, 0}, {1, 8}, {4, 8}, {1, 64}, {4, 64}} {
		b.Run(fmt.Sprintf("adapters%d/r%d", c.slots, c.rank), func(b *testing.B) {
			g, err := gpu.NewBackend(dev, rows)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			rng := rand.New(rand.NewPCG(1, 2))
			random := func(n int) []float32 {
				v := make([]float32, n)
				for i := range v {
					v[i] = rng.Float32()*2 - 1
				}
				return v
			}
			slots := make([][]backend.LoRASlot, c.slots)
			for j := range slots {
				for _, o := range outs {
					slots[j] = append(slots[j], backend.LoRASlot{Rank: c.rank, A: random(c.rank * in), B: random(o * c.rank), Scale: 1})
				}
			}
			l, err := g.NewLoRA(in, outs...)
			if err != nil {
				b.Fatal(err)
			}
			if err := g.SetLoRA(l, slots); err != nil {
				b.Fatal(err)
			}
			x, err := g.NewTensor(rows, in)
			if err != nil {
				b.Fatal(err)
			}
			g.Write(x, random(rows*in))
			var ys []backend.Tensor
			for _, o := range outs {
				y, err := g.NewTensor(rows, o)
				if err != nil {
					b.Fatal(err)
				}
				ys = append(ys, y)
			}
			batch := matmulBatch(rows)
			batch.Adapter, batch.AdapterScale = make([]int32, rows), make([]float32, rows)
			for i := range rows {
				batch.Adapter[i], batch.AdapterScale[i] = int32(i%max(c.slots, 1)), 1
				if c.slots == 0 {
					batch.Adapter[i] = -1
				}
			}
			if err := g.Begin(batch); err != nil {
				b.Fatal(err)
			}
			op := func() {
				for range 8 { // a step's worth: several layers
					g.AddLoRA(x, l, ys...)
				}
				if _, err := g.Argmax(ys[0], 1); err != nil {
					b.Fatal(err)
				}
			}
			op() // compiles the pipelines and builds the bind groups
			b.ResetTimer()
			for range b.N {
				op()
			}
		})
	}
}
