package gpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// TestAddLoRA: the lora_shrink/lora_expand pair against its Go twin, on
// awkward shapes: ranks 1, 8 and 64 alone and mixed with a slot that does
// not adapt this weight (rank 0); rows of different adapters, rows of none
// and of a slot out of range; batch rows and output rows (whose adapters
// are those of the batch rows they come from); widths of 1 and of odd
// sizes.
func TestAddLoRA(t *testing.T) {
	for _, tc := range []struct {
		ranks         []int
		in, out, rows int
		adapters      []int32
		outs          []int32 // nil: a batch-row tensor
	}{
		{[]int{1}, 1, 1, 1, []int32{0}, nil},
		{[]int{8}, 37, 129, 3, []int32{0, -1, 0}, nil},
		{[]int{64}, 64, 300, 5, []int32{-1, 0, 0, -1, 0}, nil},
		{[]int{8, 1, 64, 0}, 257, 5, 9, []int32{0, 1, 2, 3, -1, 2, 1, 0, 7}, nil},
		{[]int{1, 64}, 96, 1000, 6, []int32{1, 0, -1, 1, 1, 0}, []int32{5, 2, 0}},
		{[]int{8, 8, 8}, 64, 64, 64, []int32{2, 1, 0, -1}, nil}, // the first four rows' pattern, repeated
	} {
		t.Run(fmt.Sprintf("r%v_%dx%d_rows%d_outs%d", tc.ranks, tc.out, tc.in, tc.rows, len(tc.outs)), func(t *testing.T) {
			w := newTwins(t, tc.rows)
			slots := make([]backend.LoRASlot, len(tc.ranks))
			for j, r := range tc.ranks {
				slots[j] = backend.LoRASlot{Rank: r, A: w.random(r*tc.in, 1), B: w.random(tc.out*r, 1), Scale: 0.5 + float32(j)}
			}
			var l [2]backend.LoRA
			w.each(func(b backend.Backend, i int) {
				var err error
				if l[i], err = b.NewLoRA(tc.in, tc.out); err != nil {
					t.Fatal(err)
				}
				if err := b.SetLoRA(l[i], slots); err != nil {
					t.Fatal(err)
				}
			})
			batch := backend.Batch{Tokens: tokens(tc.rows, 10, w.rng), Pos: make([]int32, tc.rows), Seq: make([]int32, tc.rows),
				BlockSize: 16, Tables: [][]int32{{0, 1, 2, 3}}, Out: tc.outs}
			for i := range tc.rows {
				batch.Pos[i] = int32(i)
				batch.Adapter = append(batch.Adapter, tc.adapters[i%len(tc.adapters)])
				batch.AdapterScale = append(batch.AdapterScale, 1+float32(i%3))
			}
			rows := tc.rows
			var x, y pair[backend.Tensor]
			if tc.outs != nil {
				rows = len(tc.outs)
				x, y = w.outTensor(rows, tc.in, w.random(rows*tc.in, 1)), w.outTensor(rows, tc.out, w.random(rows*tc.out, 1))
			} else {
				x, y = w.tensor(rows, tc.in, w.random(rows*tc.in, 1)), w.tensor(rows, tc.out, w.random(rows*tc.out, 1))
			}
			w.beginBatch(batch)
			w.each(func(b backend.Backend, i int) { b.AddLoRA(y[i], x[i], l[i]) })
			w.compare("lora", y, rows, 1e-6*math.Sqrt(float64(tc.in*64))*8)
		})
	}
}

// outTensor is tensor for an output tensor: one row per Batch.Out entry.
func (w *twins) outTensor(rows, cols int, data []float32) pair[backend.Tensor] {
	w.t.Helper()
	var p pair[backend.Tensor]
	w.each(func(b backend.Backend, i int) {
		t, err := b.NewOutputTensor(rows, cols)
		if err != nil {
			w.t.Fatal(err)
		}
		if err := b.Write(t, data); err != nil {
			w.t.Fatal(err)
		}
		p[i] = t
	})
	return p
}
