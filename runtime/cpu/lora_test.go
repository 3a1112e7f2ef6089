package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
)

// TestAddLoRA: MatMul then AddLoRA computes x·(W_k + s·B·A)ᵀ for each
// weight k of a group sharing x and each row's own adapter (x·W_kᵀ for
// rows without one), on ranks 1, 8 and 64, groups of one and three weights
// whose slots adapt some of them and not others, slots out of range,
// widths that divide nothing, no row adapted, and products large enough
// to be shared by the team; each with values as drawn (kept in f32) and
// rounded to halves (kept in halves).
func TestAddLoRA(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 2*rng.Float32() - 1
		}
		return v
	}
	for _, tc := range []struct {
		ranks    [][]int // ranks[j][k]: slot j's rank for weight k
		in       int
		outs     []int
		adapters []int32
	}{
		{[][]int{{1}}, 1, []int{1}, []int32{0}},
		{[][]int{{8}}, 37, []int{129}, []int32{0, -1, 0}},
		{[][]int{{64}}, 65, []int{3}, []int32{-1, 0}},
		{[][]int{{8}, {0}, {64}, {1}}, 33, []int{17}, []int32{3, 2, 1, 0, -1, 2, 9}},
		{[][]int{{8, 8, 8}, {1, 0, 64}, {0, 0, 0}, {0, 4, 0}}, 24, []int{24, 12, 12}, []int32{0, 1, 2, 3, -1, 1, 0, 3, 1}},
		{[][]int{{2, 0}, {0, 0}}, 9, []int{5, 7}, []int32{0, 1, 0}}, // the second weight adapted by no slot
		{[][]int{{4}}, 16, []int{8}, []int32{-1, -1}},               // no row adapted
		// large enough that the shrink and the expand run on the team
		{[][]int{{64, 64, 64}, {8, 0, 64}, {16, 16, 16}}, 96, []int{200, 64, 72}, []int32{0, 1, 0, 2, -1, 1, 0, 0, 2, 1, 0}},
	} {
		for _, half := range []bool{false, true} {
			t.Run(fmt.Sprintf("r%v_%vx%d/halves=%v", tc.ranks, tc.outs, tc.in, half), func(t *testing.T) {
				rows := len(tc.adapters)
				slots := make([][]backend.LoRASlot, len(tc.ranks))
				values := func(n int) []float32 {
					v := random(n)
					if half { // an adapter stored in F16: the backend keeps it in halves
						for i := range v {
							v[i] = dtype.HalfValue(dtype.HalfBits(v[i]))
						}
					}
					return v
				}
				for j, rs := range tc.ranks {
					for k, r := range rs {
						slots[j] = append(slots[j], backend.LoRASlot{Rank: r, A: values(r * tc.in), B: values(tc.outs[k] * r), Scale: 0.25 * float32(j+k+1)})
					}
				}
				be := cpu.New(2)
				l, err := be.NewLoRA(tc.in, tc.outs...)
				if err != nil {
					t.Fatal(err)
				}
				before := be.Stats().Memory
				if err := be.SetLoRA(l, slots); err != nil {
					t.Fatal(err)
				}
				size := int64(4) // bytes a value: slots of halves are kept in halves
				if half {
					size = 2
				}
				var count int64
				for _, ws := range slots {
					for _, w := range ws {
						count += int64(len(w.A) + len(w.B))
					}
				}
				if got := be.Stats().Memory - before; got != size*count {
					t.Errorf("the adapters take %d bytes, want %d (%d values of %d bytes)", got, size*count, count, size)
				}
				xdata := random(rows * tc.in)
				x := cpu.NewTensor(rows, tc.in, xdata)
				b := backend.Batch{Tokens: make([]int32, rows), Pos: make([]int32, rows), Seq: make([]int32, rows), BlockSize: 1,
					Tables: [][]int32{make([]int32, rows)}, Adapter: tc.adapters, AdapterScale: make([]float32, rows)}
				for i := range rows {
					b.Pos[i], b.AdapterScale[i] = int32(i), 1.5
				}
				if err := be.Begin(b); err != nil {
					t.Fatal(err)
				}
				var ws [][]float32
				var ys []backend.Tensor
				for _, out := range tc.outs {
					w := random(out * tc.in)
					y := cpu.NewTensor(rows, out, make([]float32, rows*out))
					be.MatMul(y, x, cpu.NewWeight([]int{out, tc.in}, w))
					ws, ys = append(ws, w), append(ys, y)
				}
				be.AddLoRA(x, l, ys...)
				for k, out := range tc.outs {
					for i, j := range tc.adapters {
						w := append([]float32(nil), ws[k]...)
						if j >= 0 && int(j) < len(slots) {
							s := slots[j][k]
							for o := range out {
								for c := range tc.in {
									for r := range s.Rank {
										w[o*tc.in+c] += 1.5 * s.Scale * s.B[o*s.Rank+r] * s.A[r*tc.in+c]
									}
								}
							}
						}
						for o := range out {
							want := cpu.Dot(xdata[i*tc.in:(i+1)*tc.in], w[o*tc.in:(o+1)*tc.in])
							if got := ys[k].(*cpu.Tensor).Row(i)[o]; math.Abs(float64(got-want)) > 1e-4*(1+math.Abs(float64(want))) {
								t.Fatalf("weight %d row %d (adapter %d) col %d: %g, want %g", k, i, j, o, got, want)
							}
						}
					}
				}
			})
		}
	}
}

// BenchmarkAddLoRA times the adapters of one decode step of 8 rows on
// SmolLM2-135M's shapes (30 layers; per layer the q/k/v group, o, the
// gate/up group and down) and on stories260K's (5 layers, 64 wide), with 1 or 4 distinct adapters of rank 8 or
// 64 among the rows, their values f32 or halves (kept in halves). The 30
// layers' adapters (312 MB at 4×r64 in f32) stream from memory as in a
// real step, and GB/s is the adapter bytes read a step over its time: the
// bound is the machine's read bandwidth.
func BenchmarkAddLoRA(b *testing.B) {
	const rows = 8
	type group struct {
		in   int
		outs []int
	}
	shapes := []struct {
		name   string
		layers int
		groups []group
	}{
		{"smollm2-135m", 30, []group{{576, []int{576, 192, 192}}, {576, []int{576}}, {576, []int{1536, 1536}}, {1536, []int{576}}}},
		{"stories260K", 5, []group{{64, []int{64, 32, 32}}, {64, []int{64}}, {64, []int{172, 172}}, {172, []int{64}}}},
	}
	rng := rand.New(rand.NewPCG(8, 8))
	random := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 0.1 * (2*rng.Float32() - 1)
		}
		return v
	}
	for _, shape := range shapes {
		layers, groups := shape.layers, shape.groups
		for _, size := range []int{4, 2} {
			for _, rank := range []int{8, 64} {
				for _, distinct := range []int{1, 4} {
					b.Run(fmt.Sprintf("%s/%s/r%d/adapters%d", shape.name, map[int]string{4: "f32", 2: "f16"}[size], rank, distinct), func(b *testing.B) {
						be := cpu.New(0)
						adapters := make([]int32, rows)
						scales := make([]float32, rows)
						for i := range rows {
							adapters[i], scales[i] = int32(i%distinct), 1
						}
						batch := backend.Batch{Tokens: make([]int32, rows), Pos: make([]int32, rows), Seq: make([]int32, rows), BlockSize: 1,
							Tables: [][]int32{make([]int32, rows)}, Adapter: adapters, AdapterScale: scales}
						type op struct {
							l  backend.LoRA
							x  backend.Tensor
							ys []backend.Tensor
						}
						var ops []op
						bytes := 0
						for range layers {
							for _, g := range groups {
								l, err := be.NewLoRA(g.in, g.outs...)
								if err != nil {
									b.Fatal(err)
								}
								slots := make([][]backend.LoRASlot, distinct)
								o := op{l: l, x: cpu.NewTensor(rows, g.in, random(rows*g.in))}
								for _, out := range g.outs {
									for j := range slots {
										a, bv := random(rank*g.in), random(out*rank)
										if size == 2 {
											for _, v := range [][]float32{a, bv} {
												for i := range v {
													v[i] = dtype.HalfValue(dtype.HalfBits(v[i]))
												}
											}
										}
										slots[j] = append(slots[j], backend.LoRASlot{Rank: rank, A: a, B: bv, Scale: 0.5})
									}
									bytes += size * distinct * rank * (g.in + out)
									o.ys = append(o.ys, cpu.NewTensor(rows, out, make([]float32, rows*out)))
								}
								if err := be.SetLoRA(l, slots); err != nil {
									b.Fatal(err)
								}
								ops = append(ops, o)
							}
						}
						if err := be.Begin(batch); err != nil {
							b.Fatal(err)
						}
						for b.Loop() {
							for _, o := range ops {
								be.AddLoRA(o.x, o.l, o.ys...)
							}
						}
						b.ReportMetric(float64(bytes)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
					})
				}
			}
		}
	}
}
