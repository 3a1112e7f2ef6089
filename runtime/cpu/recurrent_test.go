package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// TestDeltaChunksMatchOneStep: the chunked form of the gated delta rule
// (DeltaChunks) gives the one-step form's outputs and final state (DeltaRow
// row after row) within 5e-6 + 5e-5·|value| (the largest difference seen
// is 15 % of that), from a zero state and from one that earlier rows left,
// for prompts of 1, chunk−1, chunk, chunk+1 and several chunks and a tail;
// heads of 1 to 128 (not multiples of 4 or of the vector kernels' blocks),
// more value than key heads, and gates near 0 (the state forgotten: e^(γ)
// underflows to 0), near 1 (with β near 1: the rule at its least damped),
// in between, and jumping between 0 and 1 row by row. (A 0.05 % error in
// A's decay fails it.)
func TestDeltaChunksMatchOneStep(t *testing.T) {
	shapes := []struct{ kheads, vheads, d int }{{1, 1, 1}, {1, 3, 5}, {2, 4, 16}, {2, 2, 33}, {1, 2, 128}}
	gates := []string{"mid", "near0", "near1", "jumps"}
	for _, s := range shapes {
		for _, chunk := range []int{DeltaChunk, 7} {
			for _, n := range []int{1, chunk - 1, chunk, chunk + 1, 3*chunk + 5} {
				for _, g := range gates {
					for _, warm := range []bool{false, true} {
						name := fmt.Sprintf("k%d_v%d_d%d/chunk%d/rows%d/%s/warm%v", s.kheads, s.vheads, s.d, chunk, n, g, warm)
						t.Run(name, func(t *testing.T) {
							testDeltaChunks(t, backend.DeltaNet{KHeads: s.kheads, VHeads: s.vheads, HeadDim: s.d, Eps: 1e-6}, chunk, n, g, warm)
						})
					}
				}
			}
		}
	}
}

func testDeltaChunks(t *testing.T, dn backend.DeltaNet, chunk, n int, gate string, warm bool) {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(dn.HeadDim)))
	uniform := func(lo, hi float32) float32 { return lo + (hi-lo)*rng.Float32() }
	D, H := dn.HeadDim, dn.VHeads
	width := (2*dn.KHeads + H) * D
	decay := make([]float32, 2*H) // dt, then a
	for h := range H {
		decay[h] = uniform(0, 1)
		switch gate {
		case "mid":
			decay[H+h] = uniform(-1.5, -0.1)
		case "near0":
			decay[H+h] = -30
		case "near1":
			decay[H+h] = -1e-4
		case "jumps":
			decay[H+h] = -5
		}
	}
	// rows makes k rows of qkv and gates.
	rows := func(k int) (*Tensor, *Tensor) {
		x, g := NewTensor(k, width, make([]float32, k*width)), NewTensor(k, 2*H, make([]float32, k*2*H))
		for i := range x.Data {
			x.Data[i] = uniform(-1, 1)
		}
		for i := range k {
			for h := range H {
				beta, alpha := uniform(-3, 3), uniform(-2, 2)
				switch gate {
				case "near0":
					alpha = 10
				case "near1":
					beta = uniform(4, 8)
				case "jumps":
					alpha = [2]float32{-20, 20}[rng.IntN(2)]
				}
				g.Data[i*2*H+h], g.Data[i*2*H+H+h] = beta, alpha
			}
		}
		return x, g
	}
	state := make([]float32, H*D*D)
	if warm {
		x, g := rows(5)
		out := make([]float32, H*D)
		for i := range 5 {
			DeltaRow(out, x.Row(i), g.Row(i), decay, state, dn)
		}
	}
	x, g := rows(n)
	want, wantState := NewTensor(n, H*D, make([]float32, n*H*D)), append([]float32(nil), state...)
	for i := range n {
		DeltaRow(want.Row(i), x.Row(i), g.Row(i), decay, wantState, dn)
	}
	got := NewTensor(n, H*D, make([]float32, n*H*D))
	DeltaChunks(got, x, g, decay, state, dn, chunk)
	near := func(what string, got, want []float32) {
		t.Helper()
		for i := range want {
			if d := math.Abs(float64(got[i] - want[i])); !(d <= 5e-6+5e-5*math.Abs(float64(want[i]))) {
				t.Fatalf("%s[%d] = %g, the one-step form's %g (Δ %.3g)", what, i, got[i], want[i], d)
			}
		}
	}
	near("output", got.Data, want.Data)
	near("state", state, wantState)
}

// TestDeltaNetSequences: the backend's DeltaNet over a batch of two
// sequences whose rows interleave — a prompt of more than a chunk in the
// chunked form (heads of 64, the narrowest it takes) beside another
// sequence's short prompt, then a decoding row beside a prompt that goes on
// from a kept state — against DeltaRow row after row on each sequence's own
// state, within TestDeltaChunksMatchOneStep's tolerance.
func TestDeltaNetSequences(t *testing.T) {
	dn := backend.DeltaNet{KHeads: 1, VHeads: 3, HeadDim: deltaChunkMinDim, Eps: 1e-6}
	D, H := dn.HeadDim, dn.VHeads
	width := (2*dn.KHeads + H) * D
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(n int, lo, hi float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float32()
		}
		return v
	}
	b := New(2)
	st, err := b.NewRecurrent(backend.RecurrentShape{Layers: 1, Slots: 3, Conv: 4, Channels: width, Heads: H, HeadDim: D})
	if err != nil {
		t.Fatal(err)
	}
	decay := &Weight{shape: []int{2 * H}, Data: append(fill(H, 0, 1), fill(H, -0.3, -0.02)...)}
	slots := []int32{2, 0}
	want := [2][]float32{make([]float32, H*D*D), make([]float32, H*D*D)} // each sequence's state, one step at a time
	tables := [][]int32{{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3, 4, 5, 6, 7}}
	for k, step := range []struct{ seq, pos []int32 }{
		// 70 rows of sequence 0 from 0, sequence 1's 5 from 0 among them.
		func() (s struct{ seq, pos []int32 }) {
			p := [2]int32{}
			for i := range 75 {
				q := int32(0)
				if i%9 == 4 && p[1] < 5 {
					q = 1
				}
				s.seq, s.pos = append(s.seq, q), append(s.pos, p[q])
				p[q]++
			}
			return s
		}(),
		{seq: []int32{1, 0, 1, 1}, pos: []int32{5, 70, 6, 7}},
	} {
		n := len(step.seq)
		if err := b.Begin(backend.Batch{Tokens: make([]int32, n), Pos: step.pos, Seq: step.seq, Tables: tables, BlockSize: 16, States: slots}); err != nil {
			t.Fatal(err)
		}
		x, g := NewTensor(n, width, fill(n*width, -1, 1)), NewTensor(n, 2*H, fill(n*2*H, -3, 3))
		out := NewTensor(n, H*D, make([]float32, n*H*D))
		b.DeltaNet(out, x, g, decay, st, 0, dn)
		ref := make([]float32, H*D)
		for i, s := range step.seq {
			DeltaRow(ref, x.Row(i), g.Row(i), decay.Data, want[s], dn)
			for j, v := range ref {
				if got := out.Row(i)[j]; !(math.Abs(float64(got-v)) <= 5e-6+5e-5*math.Abs(float64(v))) {
					t.Fatalf("step %d, row %d (sequence %d, position %d), value %d: %g, the one-step form's %g", k, i, s, step.pos[i], j, got, v)
				}
			}
		}
	}
}

// BenchmarkDeltaForms: a 128-row prompt of one sequence through the gated
// delta rule, on one goroutine, in the one-step form (DeltaRow row after
// row: the CPU's prompt path before the chunked form) and the chunked form
// (DeltaChunks) in chunks of 8 to 64 rows, at Qwen3.5-0.8B's linear layer
// (16 key and 16 value heads of 128) and at tiny-qwen35's (2 and 4 of 16).
func BenchmarkDeltaForms(b *testing.B) {
	for _, dn := range []backend.DeltaNet{{KHeads: 16, VHeads: 16, HeadDim: 128, Eps: 1e-6}, {KHeads: 2, VHeads: 4, HeadDim: 16, Eps: 1e-6}} {
		b.Run(fmt.Sprintf("d%d", dn.HeadDim), func(b *testing.B) { benchDeltaForms(b, dn) })
	}
}

func benchDeltaForms(b *testing.B, dn backend.DeltaNet) {
	const rows = 128
	width := (2*dn.KHeads + dn.VHeads) * dn.HeadDim
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(n int, lo, hi float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float32()
		}
		return v
	}
	x := NewTensor(rows, width, fill(rows*width, -1, 1))
	g := NewTensor(rows, 2*dn.VHeads, fill(rows*2*dn.VHeads, -3, 3))
	decay := append(fill(dn.VHeads, 0, 1), fill(dn.VHeads, -1.5, -0.1)...)
	out := NewTensor(rows, dn.VHeads*dn.HeadDim, make([]float32, rows*dn.VHeads*dn.HeadDim))
	state := make([]float32, dn.VHeads*dn.HeadDim*dn.HeadDim)
	b.Run("onestep", func(b *testing.B) {
		for range b.N {
			for i := range rows {
				DeltaRow(out.Row(i), x.Row(i), g.Row(i), decay, state, dn)
			}
		}
		b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	for _, chunk := range []int{64, 32, 16, 8} {
		b.Run(fmt.Sprintf("chunk%d", chunk), func(b *testing.B) {
			for range b.N {
				DeltaChunks(out, x, g, decay, state, dn, chunk)
			}
			b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
