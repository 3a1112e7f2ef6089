package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// BenchmarkFusion times each fusion of the forward pass against the plain
// ops it replaces, at the shapes of a decoding layer of smollm2-135m (one
// row, int4 weights: dim 576, 9 heads of 64 over 3 kv heads, FFN 1536):
//
//   - qkv: RMSNorm and three MatMuls (and three dispatches of their own
//     weights) against one Project with the norm as prologue;
//   - gate+up: RMSNorm, two MatMuls and the GLU against one Project;
//   - residual: MatMul and Add against one Project with Add;
//   - rope+kv: Rope, Rope and StoreKV against one RopeStore;
//   - head: RMSNorm and the output head's MatMul (49152 × 576) against one
//     Project with the norm as prologue.
//
// Each iteration records the ops and an Argmax of one row, whose read back
// waits for them: a step's per-op cost, submission included. The norms are
// fused as on GPUs (on CPU adapters Project runs them as rmsnorm
// dispatches: see normPrologue).
//
//	go test ./runtime/gpu -run '^$' -bench Fusion
func BenchmarkFusion(b *testing.B) {
	const dim, qDim, kvDim, ffn, headDim = 576, 576, 192, 1536, 64
	dev := gputest.Open(b)
	g, err := gpu.NewBackend(dev, 1)
	if err != nil {
		b.Fatal(err)
	}
	g.SetPlan(gpu.Plan{NormPrologue: "on"}) // the fused figures are the GPU's composition
	defer g.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	tensor := func(name string, shape ...int) *models.Tensor {
		return f32Tensor(name, uniform(rng), shape...)
	}
	must := func(w backend.Weight, err error) backend.Weight {
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	act := func(cols int) backend.Tensor {
		t, err := g.NewTensor(1, cols)
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Write(t, make([]float32, cols)); err != nil {
			b.Fatal(err)
		}
		return t
	}
	wq, wk, wv := tensor("q", qDim, dim), tensor("k", kvDim, dim), tensor("v", kvDim, dim)
	wg, wu, wo, wd := tensor("gate", ffn, dim), tensor("up", ffn, dim), tensor("o", dim, qDim), tensor("down", dim, ffn)
	norm := must(g.Upload(tensor("norm", dim)))
	sq, sk, sv := must(g.UploadAs(wq, backend.Int4)), must(g.UploadAs(wk, backend.Int4)), must(g.UploadAs(wv, backend.Int4))
	sg, su := must(g.UploadAs(wg, backend.Int4)), must(g.UploadAs(wu, backend.Int4))
	so, sd := must(g.UploadAs(wo, backend.Int4)), must(g.UploadAs(wd, backend.Int4))
	sh := must(g.UploadAs(tensor("head", 49152, dim), backend.Int4))
	logits := act(49152)
	qkv := must(g.Fuse([]*models.Tensor{wq, wk, wv}, backend.Int4, false))
	gateUp := must(g.Fuse([]*models.Tensor{wg, wu}, backend.Int4, true))
	x, xb, q, k, v := act(dim), act(dim), act(qDim), act(kvDim), act(kvDim)
	gate, up, att, hidden := act(ffn), act(ffn), act(qDim), act(ffn)
	kv, err := g.NewKV(backend.KVShape{Layers: 1, Blocks: 4, BlockSize: 16, Heads: kvDim / headDim, HeadDim: headDim})
	if err != nil {
		b.Fatal(err)
	}
	rq := backend.Rope{Heads: qDim / headDim, HeadDim: headDim, Dim: headDim, Theta: 10000, Layout: models.RopeHalves}
	rk := rq
	rk.Heads = kvDim / headDim
	batch := backend.Batch{Tokens: []int32{0}, Pos: []int32{20}, Seq: []int32{0}, Tables: [][]int32{{0, 1}}, BlockSize: 16, Out: []int32{0}}
	for _, c := range []struct {
		name         string
		plain, fused func()
	}{
		{"qkv", func() {
			g.RMSNorm(xb, x, norm, 1e-5)
			g.MatMul(q, xb, sq)
			g.MatMul(k, xb, sk)
			g.MatMul(v, xb, sv)
		}, func() {
			g.Project(backend.Projection{X: x, Norm: norm, Eps: 1e-5, W: qkv, Out: []backend.Tensor{q, k, v}})
		}},
		{"qkv-split-only", func() {
			g.RMSNorm(xb, x, norm, 1e-5)
			g.MatMul(q, xb, sq)
			g.MatMul(k, xb, sk)
			g.MatMul(v, xb, sv)
		}, func() {
			g.RMSNorm(xb, x, norm, 1e-5)
			g.Project(backend.Projection{X: xb, W: qkv, Out: []backend.Tensor{q, k, v}})
		}},
		{"gate+up", func() {
			g.RMSNorm(xb, x, norm, 1e-5)
			g.MatMul(gate, xb, sg)
			g.MatMul(up, xb, su)
			g.GLU(gate, up, models.SiLU)
		}, func() {
			g.Project(backend.Projection{X: x, Norm: norm, Eps: 1e-5, W: gateUp, Out: []backend.Tensor{gate}, GLU: true, Act: models.SiLU})
		}},
		{"residual-o", func() {
			g.MatMul(xb, att, so)
			g.Add(x, xb)
		}, func() {
			g.Project(backend.Projection{X: att, W: so, Out: []backend.Tensor{x}, Add: true})
		}},
		{"residual-down", func() {
			g.MatMul(xb, hidden, sd)
			g.Add(x, xb)
		}, func() {
			g.Project(backend.Projection{X: hidden, W: sd, Out: []backend.Tensor{x}, Add: true})
		}},
		{"head", func() {
			g.RMSNorm(xb, x, norm, 1e-5)
			g.MatMul(logits, xb, sh)
		}, func() {
			g.Project(backend.Projection{X: x, Norm: norm, Eps: 1e-5, W: sh, Out: []backend.Tensor{logits}})
		}},
		// The CPU adapters' composition (Plan.NormPrologue "off"): o's
		// residual add prepares gate+up's normalised input (Next), against
		// an rmsnorm dispatch between them.
		{"o+gate+up", func() {
			g.SetPlan(gpu.Plan{NormPrologue: "off"})
			g.Project(backend.Projection{X: att, W: so, Out: []backend.Tensor{x}, Add: true})
			g.Project(backend.Projection{X: x, Norm: norm, Eps: 1e-5, W: gateUp, Out: []backend.Tensor{gate}, GLU: true, Act: models.SiLU})
			g.SetPlan(gpu.Plan{NormPrologue: "on"})
		}, func() {
			g.SetPlan(gpu.Plan{NormPrologue: "off"})
			g.Project(backend.Projection{X: att, W: so, Out: []backend.Tensor{x}, Add: true, Next: norm})
			g.Project(backend.Projection{X: x, Norm: norm, Eps: 1e-5, W: gateUp, Out: []backend.Tensor{gate}, GLU: true, Act: models.SiLU})
			g.SetPlan(gpu.Plan{NormPrologue: "on"})
		}},
		{"rope+kv", func() {
			g.Rope(q, rq)
			g.Rope(k, rk)
			g.StoreKV(kv, 0, k, v)
		}, func() {
			g.RopeStore(q, k, v, kv, 0, rq, rk)
		}},
	} {
		for _, variant := range []struct {
			name string
			ops  func()
		}{{"plain", c.plain}, {"fused", c.fused}} {
			b.Run(fmt.Sprintf("%s/%s", c.name, variant.name), func(b *testing.B) {
				step := func() {
					if err := g.Begin(batch); err != nil {
						b.Fatal(err)
					}
					variant.ops()
					if _, err := g.Argmax(x, 1); err != nil {
						b.Fatal(err)
					}
				}
				benchSteps(b, step)
			})
		}
	}
}

// benchSteps times step, a step's ops and a read back that waits for
// them, after one untimed run that compiles their pipelines, and reports
// the process's CPU time per step beside the wall time.
func benchSteps(b *testing.B, step func()) {
	step()
	b.ResetTimer()
	cpu0 := gputest.CPUTime()
	for range b.N {
		step()
	}
	if cpu := gputest.CPUTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
