package gpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// TestAddLoRA: the lora_shrink/lora_expand pair against its Go twin, on
// awkward shapes: ranks 1, 8 and 64 alone and mixed with a slot that does
// not adapt this weight (rank 0); groups of weights sharing an input (one
// shrink, an expand per weight) whose slots adapt some weights and not
// others; rows of different adapters, rows of none and of a slot out of
// range; batch rows and output rows (whose adapters are those of the
// batch rows they come from); more rows than a block; widths of 1 and of
// odd sizes.
func TestAddLoRA(t *testing.T) {
	for _, tc := range []struct {
		ranks    [][]int // ranks[j][k]: slot j's rank for weight k
		in, rows int
		outs     []int
		adapters []int32
		outputs  []int32 // nil: batch-row tensors
	}{
		{[][]int{{1}}, 1, 1, []int{1}, []int32{0}, nil},
		{[][]int{{8}}, 37, 3, []int{129}, []int32{0, -1, 0}, nil},
		{[][]int{{64}}, 64, 5, []int{300}, []int32{-1, 0, 0, -1, 0}, nil},
		{[][]int{{8}, {1}, {64}, {0}}, 257, 9, []int{5}, []int32{0, 1, 2, 3, -1, 2, 1, 0, 7}, nil},
		{[][]int{{1}, {64}}, 96, 6, []int{1000}, []int32{1, 0, -1, 1, 1, 0}, []int32{5, 2, 0}},
		{[][]int{{8}, {8}, {8}}, 64, 64, []int{64}, []int32{2, 1, 0, -1}, nil}, // the first four rows' pattern, repeated
		{[][]int{{8, 8, 8}, {1, 0, 64}, {0, 0, 0}, {0, 4, 0}}, 48, 11, []int{48, 16, 16}, []int32{0, 1, 2, 3, -1, 1, 0, 3, 1, 1, 0}, nil},
		{[][]int{{40, 40}, {2, 0}}, 20, 17, []int{33, 7}, []int32{0, 1, 1, -1, 0}, nil}, // a slot of Σ rank 80: two column blocks
	} {
		t.Run(fmt.Sprintf("r%v_%vx%d_rows%d_outs%d", tc.ranks, tc.outs, tc.in, tc.rows, len(tc.outputs)), func(t *testing.T) {
			w := newTwins(t, tc.rows)
			slots := make([][]backend.LoRASlot, len(tc.ranks))
			for j, rs := range tc.ranks {
				for k, r := range rs {
					slots[j] = append(slots[j], backend.LoRASlot{Rank: r, A: w.random(r*tc.in, 1), B: w.random(tc.outs[k]*r, 1), Scale: 0.5 + float32(j+k)})
				}
			}
			var l [2]backend.LoRA
			w.each(func(b backend.Backend, i int) {
				var err error
				if l[i], err = b.NewLoRA(tc.in, tc.outs...); err != nil {
					t.Fatal(err)
				}
				if err := b.SetLoRA(l[i], slots); err != nil {
					t.Fatal(err)
				}
			})
			batch := backend.Batch{Tokens: tokens(tc.rows, 10, w.rng), Pos: make([]int32, tc.rows), Seq: make([]int32, tc.rows),
				BlockSize: 16, Tables: [][]int32{{0, 1, 2, 3}}, Out: tc.outputs}
			for i := range tc.rows {
				batch.Pos[i] = int32(i)
				batch.Adapter = append(batch.Adapter, tc.adapters[i%len(tc.adapters)])
				batch.AdapterScale = append(batch.AdapterScale, 1+float32(i%3))
			}
			rows := tc.rows
			tensor := w.tensor
			if tc.outputs != nil {
				rows, tensor = len(tc.outputs), w.outTensor
			}
			x := tensor(rows, tc.in, w.random(rows*tc.in, 1))
			ys := make([]pair[backend.Tensor], len(tc.outs))
			for k, out := range tc.outs {
				ys[k] = tensor(rows, out, w.random(rows*out, 1))
			}
			w.beginBatch(batch)
			w.each(func(b backend.Backend, i int) {
				dsts := make([]backend.Tensor, len(ys))
				for k := range ys {
					dsts[k] = ys[k][i]
				}
				b.AddLoRA(x[i], l[i], dsts...)
			})
			for k := range ys {
				w.compare(fmt.Sprint("lora weight ", k), ys[k], rows, 1e-6*math.Sqrt(float64(tc.in*64))*8)
			}
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
