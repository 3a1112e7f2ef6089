package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// BenchmarkLoRAProject times one adapted projection of 8 decoding rows
// over 4 adapters (two rows each) in each of Plan.LoRA's forms: fused
// (lora_shrink, then the GEMV with the adapters in its epilogue) and
// unfused (lora_shrink, the product, a lora_expand per weight), against
// the product without adapter rows, and the fused form and that product
// again as planned for a GPU (gpu-: several invocations a column, whose
// epilogue splits the rank among them, and a shrink whose invocations
// split the width; on a CPU adapter a proxy only), at
// the q/k/v and gate+up shapes of stories260K (64 wide, f32) and
// smollm2-135m (576 wide, int4), ranks 8 and 64, and 64 in halves (r64-f16:
// an F16 adapter's values, which the backend keeps so). Each iteration records
// the projection and a read back that waits for it.
//
//	go test ./runtime/gpu -run '^$' -bench LoRAProject
func BenchmarkLoRAProject(b *testing.B) {
	dev := gputest.Open(b)
	g, err := gpu.NewBackend(dev, 8)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const rows = 8
	for _, shape := range []struct {
		name    string
		storage backend.Storage
		in      int
		parts   []int
		glu     bool
	}{
		{"stories260K/qkv", backend.F32, 64, []int{64, 32, 32}, false},
		{"stories260K/gate+up", backend.F32, 64, []int{172, 172}, true},
		{"smollm2/qkv", backend.Int4, 576, []int{576, 192, 192}, false},
		{"smollm2/gate+up", backend.Int4, 576, []int{1536, 1536}, true},
	} {
		var ts []*models.Tensor
		for i, n := range shape.parts {
			ts = append(ts, f32Tensor(fmt.Sprint("w", i), uniform(rng), n, shape.in))
		}
		w, err := g.Fuse(ts, shape.storage, shape.glu)
		if err != nil {
			b.Fatal(err)
		}
		tensor := func(cols int) backend.Tensor {
			t, err := g.NewTensor(rows, cols)
			if err != nil {
				b.Fatal(err)
			}
			data := make([]float32, rows*cols)
			for i := range data {
				data[i] = rng.Float32() - 0.5
			}
			if err := g.Write(t, data); err != nil {
				b.Fatal(err)
			}
			return t
		}
		x := tensor(shape.in)
		outs := []backend.Tensor{}
		for _, n := range shape.parts {
			if shape.glu && len(outs) == 1 {
				break
			}
			outs = append(outs, tensor(n))
		}
		for _, rv := range []struct {
			rank int
			half bool // the adapters' values are halves (an F16 file's)
		}{{8, false}, {64, false}, {64, true}} {
			rank := rv.rank
			l, err := g.NewLoRA(shape.in, shape.parts...)
			if err != nil {
				b.Fatal(err)
			}
			slots := make([][]backend.LoRASlot, 4)
			for j := range slots {
				for _, n := range shape.parts {
					a, bw := make([]float32, rank*shape.in), make([]float32, n*rank)
					for _, v := range [][]float32{a, bw} {
						for i := range v {
							v[i] = rng.Float32() - 0.5
							if rv.half {
								v[i] = dtype.HalfValue(dtype.HalfBits(v[i]))
							}
						}
					}
					slots[j] = append(slots[j], backend.LoRASlot{Rank: rank, A: a, B: bw, Scale: 0.5})
				}
			}
			if err := g.SetLoRA(l, slots); err != nil {
				b.Fatal(err)
			}
			for _, mode := range []string{"none", "fused", "unfused", "inline", "gpu-none", "gpu-fused", "gpu-inline"} {
				name := fmt.Sprintf("%s/r%d/%s", shape.name, rank, mode)
				if rv.half {
					name = fmt.Sprintf("%s/r%d-f16/%s", shape.name, rank, mode)
				}
				b.Run(name, func(b *testing.B) {
					batch := backend.Batch{Tokens: make([]int32, rows), Pos: make([]int32, rows), Seq: make([]int32, rows),
						Tables: [][]int32{{0}}, BlockSize: 16, Out: []int32{0}}
					plan, form := gpu.Plan{}, mode
					if f, ok := strings.CutPrefix(mode, "gpu-"); ok {
						plan, form = gpu.Plan{MatMul: "gemv", Quant: "gemv-gpu", Shrink: "split"}, f
					}
					if form != "none" {
						for i := range rows {
							batch.Adapter = append(batch.Adapter, int32(i%4))
							batch.AdapterScale = append(batch.AdapterScale, 1)
						}
						plan.LoRA = form
					}
					g.SetPlan(plan)
					defer g.SetPlan(gpu.Plan{})
					step := func() {
						if err := g.Begin(batch); err != nil {
							b.Fatal(err)
						}
						g.Project(backend.Projection{X: x, W: w, Out: outs, GLU: shape.glu, Act: models.SiLU, LoRA: l})
						if _, err := g.Argmax(outs[0], 1); err != nil {
							b.Fatal(err)
						}
					}
					benchSteps(b, step)
				})
			}
		}
	}
}
