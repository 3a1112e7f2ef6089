package cpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
)

// TestAddLoRA: MatMul then AddLoRA computes x·(W + s·B·A)ᵀ for each row's
// own adapter (and x·Wᵀ for rows without one), on ranks 1, 8 and 64 and
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
		ranks    []int
		in, out  int
		adapters []int32
	}{
		{[]int{1}, 1, 1, []int32{0}},
		{[]int{8}, 37, 129, []int32{0, -1, 0}},
		{[]int{64}, 65, 3, []int32{-1, 0}},
		{[]int{8, 0, 64, 1}, 33, 17, []int32{3, 2, 1, 0, -1, 2}},
	} {
		t.Run(fmt.Sprintf("r%v_%dx%d", tc.ranks, tc.out, tc.in), func(t *testing.T) {
			rows := len(tc.adapters)
			slots := make([]backend.LoRASlot, len(tc.ranks))
			for j, r := range tc.ranks {
				slots[j] = backend.LoRASlot{Rank: r, A: random(r * tc.in), B: random(tc.out * r), Scale: 0.25 * float32(j+1)}
			}
			wdata, xdata := random(tc.out*tc.in), random(rows*tc.in)
			be := cpu.New(1)
			l, _ := be.NewLoRA(tc.in, tc.out)
			if err := be.SetLoRA(l, slots); err != nil {
				t.Fatal(err)
			}
			x, y := cpu.NewTensor(rows, tc.in, xdata), cpu.NewTensor(rows, tc.out, make([]float32, rows*tc.out))
			b := backend.Batch{Tokens: make([]int32, rows), Pos: make([]int32, rows), Seq: make([]int32, rows), BlockSize: 1,
				Tables: [][]int32{make([]int32, rows)}, Adapter: tc.adapters, AdapterScale: make([]float32, rows)}
			for i := range rows {
				b.Pos[i], b.AdapterScale[i] = int32(i), 1.5
			}
			if err := be.Begin(b); err != nil {
				t.Fatal(err)
			}
			be.MatMul(y, x, cpu.NewWeight([]int{tc.out, tc.in}, wdata))
			be.AddLoRA(y, x, l)
			for i, j := range tc.adapters {
				w := append([]float32(nil), wdata...)
				if j >= 0 {
					s := slots[j]
					for o := range tc.out {
						for c := range tc.in {
							for r := range s.Rank {
								w[o*tc.in+c] += 1.5 * s.Scale * s.B[o*s.Rank+r] * s.A[r*tc.in+c]
							}
						}
					}
				}
				for o := range tc.out {
					want := cpu.Dot(xdata[i*tc.in:(i+1)*tc.in], w[o*tc.in:(o+1)*tc.in])
					if got := y.Row(i)[o]; math.Abs(float64(got-want)) > 1e-4*(1+math.Abs(float64(want))) {
						t.Fatalf("row %d (adapter %d) col %d: %g, want %g", i, j, o, got, want)
					}
				}
			}
		})
	}
}
