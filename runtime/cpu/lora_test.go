package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
)

// TestAddLoRA: MatMul then AddLoRA computes x·(W_k + s·B·A)ᵀ for each
// weight k of a group sharing x and each row's own adapter (x·W_kᵀ for
// rows without one), on ranks 1, 8 and 64, groups of one and three weights
// whose slots adapt some of them and not others, slots out of range, and
// widths that divide nothing.
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
	} {
		t.Run(fmt.Sprintf("r%v_%vx%d", tc.ranks, tc.outs, tc.in), func(t *testing.T) {
			rows := len(tc.adapters)
			slots := make([][]backend.LoRASlot, len(tc.ranks))
			for j, rs := range tc.ranks {
				for k, r := range rs {
					slots[j] = append(slots[j], backend.LoRASlot{Rank: r, A: random(r * tc.in), B: random(tc.outs[k] * r), Scale: 0.25 * float32(j+k+1)})
				}
			}
			be := cpu.New(2)
			l, err := be.NewLoRA(tc.in, tc.outs...)
			if err != nil {
				t.Fatal(err)
			}
			if err := be.SetLoRA(l, slots); err != nil {
				t.Fatal(err)
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
