package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// BenchmarkExpertFFN times the feed-forward block of
// granite-3.1-1b-a400m (dim 1024, 32 experts of 512, 8 a token) through
// the experts (router product, Route, gate and up, down, Combine) against
// the dense block of its active parameters (one FFN of 8·512 = 4096: gate
// and up with the GLU, down with the residual add), int4: for one decode
// token, and for a prompt step of 64 rows with the expert products as
// GEMVs and as the grouped GEMM (Plan.Experts). Reported: ms per block
// and GB/s of the weight bytes a decode token reads (the experts': 8 of
// 32). Run with -count to alternate them.
//
//	go test ./runtime/gpu -run '^$' -bench ExpertFFN -count 4
func BenchmarkExpertFFN(b *testing.B) {
	const dim, ffn, e, k = 1024, 512, 32, 8
	dev := gputest.Open(b)
	for _, tc := range []struct {
		moe     bool
		rows    int
		experts string
	}{{false, 1, ""}, {true, 1, ""}, {false, 64, ""}, {true, 64, "gemv"}, {true, 64, "gemm"}} {
		name := "dense"
		if tc.moe {
			name = "experts" + tc.experts
		}
		rows := tc.rows
		b.Run(fmt.Sprintf("%s/rows%d_dim%d_ffn%d", name, rows, dim, ffn*k), func(b *testing.B) {
			g, err := gpu.NewBackend(dev, rows)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			g.SetPlan(gpu.Plan{Experts: tc.experts})
			rng := rand.New(rand.NewPCG(dim, ffn))
			tensor := func(name string, shape ...int) *models.Tensor {
				return f32Tensor(name, normal(rng, 0.03), shape...)
			}
			act := func(rows, cols int) backend.Tensor {
				t, err := g.NewTensor(rows, cols)
				if err != nil {
					b.Fatal(err)
				}
				return t
			}
			x, out := act(rows, dim), act(rows, dim)
			var op func()
			var bytes int64
			if tc.moe {
				router, err := g.Upload(tensor("router", e, dim))
				if err != nil {
					b.Fatal(err)
				}
				gateUp, err := g.UploadExperts([]*models.Tensor{tensor("gate", e, ffn, dim), tensor("up", e, ffn, dim)}, backend.Int4)
				if err != nil {
					b.Fatal(err)
				}
				down, err := g.UploadExperts([]*models.Tensor{tensor("down", e, dim, ffn)}, backend.Int4)
				if err != nil {
					b.Fatal(err)
				}
				r, err := g.NewRoutes(rows, k)
				if err != nil {
					b.Fatal(err)
				}
				logits, a, y := act(rows, e), act(rows*k, ffn), act(rows*k, dim)
				bytes = router.Bytes() + (gateUp.Bytes()+down.Bytes())*k/e
				op = func() {
					g.MatMul(logits, x, router)
					g.Route(r, logits, true)
					g.ExpertProject(backend.ExpertProjection{X: x, W: gateUp, R: r, Out: a, GLU: true})
					g.ExpertProject(backend.ExpertProjection{X: a, Slots: true, W: down, R: r, Out: y})
					g.Combine(backend.MoECombine{Dst: out, Y: y, R: r})
				}
			} else {
				gateUp, err := g.Fuse([]*models.Tensor{tensor("gate", ffn*k, dim), tensor("up", ffn*k, dim)}, backend.Int4, true)
				if err != nil {
					b.Fatal(err)
				}
				down, err := g.UploadAs(tensor("down", dim, ffn*k), backend.Int4)
				if err != nil {
					b.Fatal(err)
				}
				a := act(rows, ffn*k)
				bytes = gateUp.Bytes() + down.Bytes()
				op = func() {
					g.Project(backend.Projection{X: x, W: gateUp, Out: []backend.Tensor{a}, GLU: true})
					g.Project(backend.Projection{X: a, W: down, Out: []backend.Tensor{out}, Add: true})
				}
			}
			batch := backend.Batch{BlockSize: 16, Tables: [][]int32{{0, 1, 2, 3}}}
			for i := range rows {
				batch.Tokens, batch.Pos, batch.Seq = append(batch.Tokens, int32(i)), append(batch.Pos, int32(i)), append(batch.Seq, 0)
			}
			if err := g.Begin(batch); err != nil {
				b.Fatal(err)
			}
			step := func() {
				op()
				if _, err := g.Argmax(out, 1); err != nil {
					b.Fatal(err)
				}
			}
			step() // compiles the pipelines and builds the bind groups
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				step()
			}
			sec := time.Since(start).Seconds() / float64(b.N)
			b.ReportMetric(float64(bytes)/sec/1e9, "GB/s")
			b.ReportMetric(sec*1e3, "ms/op")
		})
	}
}
