package gpu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
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
		{[][]int{{64, 8}, {4, 60}}, 1030, 7, []int{19, 40}, []int32{1, 0, -1}, nil},     // split 16 ways, some inputs short
	} {
		t.Run(fmt.Sprintf("r%v_%vx%d_rows%d_outs%d", tc.ranks, tc.outs, tc.in, tc.rows, len(tc.outputs)), func(t *testing.T) {
			for _, v := range []struct {
				shrink string
				half   bool
			}{{"whole", false}, {"split", false}, {"whole", true}, {"split", true}} {
				t.Run(fmt.Sprintf("%s/halves=%v", v.shrink, v.half), func(t *testing.T) {
					w := newTwins(t, tc.rows)
					w.gpu.SetPlan(gpu.Plan{Shrink: v.shrink})
					slots := make([][]backend.LoRASlot, len(tc.ranks))
					for j, rs := range tc.ranks {
						for k, r := range rs {
							a, b := w.random(r*tc.in, 1), w.random(tc.outs[k]*r, 1)
							if v.half {
								a, b = w.halves(a), w.halves(b)
							}
							slots[j] = append(slots[j], backend.LoRASlot{Rank: r, A: a, B: b, Scale: 0.5 + float32(j+k)})
						}
					}
					l := w.lora(tc.in, tc.outs, slots, v.half)
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
		})
	}
}

// TestEmbedLoRA: lora_gather and lora_expand add the token-embedding
// adapters' terms as the CPU's EmbedLoRA does, for vocabularies, ranks and
// rows of awkward sizes, slots of rank 0 and rows of no slot or of a slot
// out of range.
func TestEmbedLoRA(t *testing.T) {
	for _, tc := range []struct {
		ranks    []int // slot j's rank
		vocab    int
		dim      int
		rows     int
		adapters []int32
	}{
		{[]int{1}, 3, 1, 1, []int32{0}},
		{[]int{1}, 3, 4, 1, []int32{0}},
		{[]int{4}, 3, 1, 2, []int32{0}},
		{[]int{8}, 37, 10, 5, []int32{0, -1, 0}},
		{[]int{8, 1, 64, 0}, 300, 33, 9, []int32{0, 1, 2, 3, -1, 2, 1, 0, 7}},
		{[]int{5, 12}, 1000, 96, 64, []int32{1, 0, -1, 1}},
	} {
		for _, half := range []bool{false, true} {
			t.Run(fmt.Sprintf("r%v_vocab%d_dim%d_rows%d/halves=%v", tc.ranks, tc.vocab, tc.dim, tc.rows, half), func(t *testing.T) {
				w := newTwins(t, tc.rows)
				slots := make([][]backend.LoRASlot, len(tc.ranks))
				for j, r := range tc.ranks {
					a, b := w.random(r*tc.vocab, 1), w.random(tc.dim*r, 1)
					if half {
						a, b = w.halves(a), w.halves(b)
					}
					slots[j] = []backend.LoRASlot{{Rank: r, A: a, B: b, Scale: 0.5 + float32(j)}}
				}
				l := w.lora(tc.vocab, []int{tc.dim}, slots, half)
				batch := backend.Batch{Tokens: tokens(tc.rows, tc.vocab, w.rng), Pos: make([]int32, tc.rows), Seq: make([]int32, tc.rows),
					BlockSize: 16, Tables: [][]int32{{0, 1, 2, 3}}}
				for i := range tc.rows {
					batch.Pos[i] = int32(i)
					batch.Adapter = append(batch.Adapter, tc.adapters[i%len(tc.adapters)])
					batch.AdapterScale = append(batch.AdapterScale, 1+float32(i%3))
				}
				x := w.tensor(tc.rows, tc.dim, w.random(tc.rows*tc.dim, 1))
				w.beginBatch(batch)
				w.each(func(b backend.Backend, i int) { b.EmbedLoRA(x[i], l[i]) })
				w.compare("embedding lora", x, tc.rows, 1e-5)
			})
		}
	}
}

// lora makes the LoRA of slots on both backends, for weights of widths
// outs over inputs of width in; the GPU's must keep its values in halves
// where half says every value is one (and a slot has a rank).
func (w *twins) lora(in int, outs []int, slots [][]backend.LoRASlot, half bool) pair[backend.LoRA] {
	w.t.Helper()
	var l pair[backend.LoRA]
	w.each(func(b backend.Backend, i int) {
		var err error
		if l[i], err = b.NewLoRA(in, outs...); err != nil {
			w.t.Fatal(err)
		}
		if err := b.SetLoRA(l[i], slots); err != nil {
			w.t.Fatal(err)
		}
	})
	if got := gpu.LoRAHalves(l[1]); got != half {
		w.t.Fatalf("the GPU keeps the adapters in halves: %v, want %v", got, half)
	}
	return l
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

// TestProjectLoRA: projections with adapters (backend.Projection.LoRA)
// against the CPU's, which is the plain ops in a row (AddLoRA on the
// products before the epilogue), for every composition the forward pass
// asks for: with the adapters' expand in the product's epilogue
// (Fusion.LoRA, through the GEMVs or fuse_epilogue behind the tiled and
// naive kernels) and through the fallback of a lora_expand per weight
// after the plain product. Ranks not multiples of 4 and of several
// weights; widths not multiples of the workgroups; one row and rows of
// several slots, of none and of a slot out of range; output rows; every
// storage; the GPUs' forms of the GEMVs (several invocations a column,
// which split the rank of the adapters' terms) and of the shrink (split
// across the width) as well as the CPU adapters'. The fused path must record fewer dispatches than the fallback
// and at most one more than a step without adapter rows, which records
// no LoRA dispatch.
func TestProjectLoRA(t *testing.T) {
	type variant struct {
		name  string
		norm  bool
		parts []int // output widths
		ranks [][]int
		bias  bool
		glu   bool
		pairs bool
		add   bool
		head  bool // output rows
		// next: x comes from a residual projection with adapters of its
		// own (a k×k weight) that is told this projection's norm
		// (Projection.Next): on CPU adapters its epilogue prepares the
		// input of this one, which needs no rmsnorm then.
		next bool
	}
	variants := []variant{
		{name: "qkv-norm", norm: true, parts: []int{48, 16, 16}, ranks: [][]int{{3, 5, 2}, {8, 0, 1}, {0, 0, 0}}},
		{name: "qkv-bias", parts: []int{40, 24, 24}, ranks: [][]int{{1, 1, 7}, {6, 6, 6}}, bias: true},
		{name: "qkv-odd", parts: []int{30, 10, 10}, ranks: [][]int{{2, 5, 3}, {4, 0, 1}}}, // widths not multiples of 4: a CPU invocation's columns straddle q and k
		{name: "glu-norm", norm: true, parts: []int{36, 36}, ranks: [][]int{{5, 3}, {0, 9}}, glu: true},
		{name: "gate-up-split", parts: []int{50, 50}, ranks: [][]int{{2, 0}, {7, 7}}, pairs: true},
		{name: "residual", parts: []int{33}, ranks: [][]int{{5}, {1}, {13}}, add: true},
		{name: "plain", parts: []int{300}, ranks: [][]int{{64}, {3}}},
		{name: "head-norm", norm: true, parts: []int{77}, ranks: [][]int{{6}, {2}}, head: true},
		{name: "qkv-norm-next", norm: true, parts: []int{48, 16, 16}, ranks: [][]int{{3, 5, 2}, {8, 0, 1}, {0, 0, 0}}, next: true},
		{name: "glu-norm-next", norm: true, parts: []int{36, 36}, ranks: [][]int{{5, 3}, {0, 9}}, glu: true, next: true},
	}
	for _, tc := range []struct {
		storage backend.Storage
		kernel  string // Plan.Quant's (Plan.MatMul's for f32)
		k, rows int
		slots   []int32 // the rows' adapters, repeated
		half    bool    // the adapters' values are halves
	}{
		{backend.F32, "", 64, 1, []int32{1}, false},
		{backend.Int4, "", 96, 5, []int32{0, -1, 1, 0, 7}, false},
		{backend.F16, "", 96, 3, []int32{1, 1, 0}, false},
		{backend.Int8, "", 64, 9, []int32{2, 2, -1, 2, 2, 2, 1, 2, 0}, true}, // six rows of slot 2: a block of 8
		{backend.Int4, "gemv-gpu", 200, 9, []int32{1, 0, 0, -1, 0, 0, 2, 0, 0}, false},
		{backend.Int4, "gemv-gpu", 200, 9, []int32{1, 0, 0, -1, 0, 0, 2, 0, 0}, true},
		{backend.F32, "gemv", 96, 4, []int32{0, 1, -1, 1}, false},
		{backend.F16, "gemv-gpu", 136, 3, []int32{1, 0, 0}, false},
		{backend.F32, "gemm", 64, 17, []int32{0, 1, -1, 2}, false},
		{backend.F32, "gemm", 64, 17, []int32{0, 1, -1, 2}, true},
		{backend.F32, "", 70, 3, []int32{1, -1, 0}, false}, // k % 4 != 0: the naive kernel or GEMM
	} {
		for _, v := range variants {
			t.Run(fmt.Sprintf("%s_%s_k%d_rows%d_halves=%v/%s", tc.storage, tc.kernel, tc.k, tc.rows, tc.half, v.name), func(t *testing.T) {
				testProjectLoRA(t, tc.storage, tc.kernel, tc.k, tc.rows, tc.slots, tc.half, v.norm, v.parts, v.ranks, v.bias, v.glu, v.pairs, v.add, v.head, v.next)
			})
		}
	}
}

func testProjectLoRA(t *testing.T, storage backend.Storage, kernel string, k, rows int, adapters []int32, half,
	norm bool, parts []int, ranks [][]int, bias, glu, pairs, add, head, next bool) {
	const alloc = 32
	w := newTwins(t, alloc)
	plan := gpu.Plan{}
	if storage == backend.F32 {
		plan.MatMul = kernel
	} else {
		plan.Quant = kernel
	}
	if kernel == "gemv-gpu" || kernel == "gemv" { // the GPUs' forms of the product and the shrink
		plan.Shrink = "split"
	}
	var shapes, bshapes [][]int
	for _, n := range parts {
		shapes, bshapes = append(shapes, []int{n, k}), append(bshapes, []int{n})
	}
	wt := w.fused(storage, glu || pairs, shapes, 1)
	values := func(n int) []float32 {
		if half {
			return w.halves(w.random(n, 1))
		}
		return w.random(n, 1)
	}
	slots := make([][]backend.LoRASlot, len(ranks))
	adapted := false
	for j, rs := range ranks {
		for i, r := range rs {
			slots[j] = append(slots[j], backend.LoRASlot{Rank: r, A: values(r * k), B: values(parts[i] * r), Scale: 0.25 + float32(j+i)/4})
			adapted = adapted || r > 0
		}
	}
	l := w.lora(k, parts, slots, half && adapted)
	// The residual projection before (next): a k×k weight, with adapters.
	var wo pair[backend.Weight]
	var xo pair[backend.Tensor]
	var lo pair[backend.LoRA]
	if next {
		wo = w.fused(storage, false, [][]int{{k, k}}, 1)
		xo = w.tensor(alloc, k, w.random(alloc*k, 2))
		oslots := make([][]backend.LoRASlot, len(ranks))
		for j := range oslots {
			r := 1 + 3*j
			oslots[j] = []backend.LoRASlot{{Rank: r, A: values(r * k), B: values(k * r), Scale: 0.5}}
		}
		lo = w.lora(k, []int{k}, oslots, half)
	}
	var nw, bw pair[backend.Weight]
	if norm {
		nw = w.weight([]int{k}, w.random(k, 1.5))
	}
	if bias {
		bw = w.fused(backend.F32, false, bshapes, 1)
	}
	tensor, outRows := w.tensor, rows
	var out []int32
	if head { // scores every other row, as a prompt step's head does
		tensor = w.outTensor
		for r := 0; r < rows; r += 2 {
			out = append(out, int32(r))
		}
		outRows = len(out)
	}
	x := tensor(alloc, k, w.random(alloc*k, 2)) // as the head's input is the step's output rows
	var outs []pair[backend.Tensor]
	for i, n := range parts {
		if (glu || add) && i > 0 {
			break
		}
		outs = append(outs, tensor(outRows, n, w.random(outRows*n, 1)))
	}
	project := func(adapted bool) int {
		batch := backend.Batch{Tokens: tokens(rows, 10, w.rng), Pos: make([]int32, rows), Seq: make([]int32, rows),
			BlockSize: 16, Tables: [][]int32{{0, 1}}, Out: out}
		for i := range rows {
			batch.Pos[i] = int32(i)
			if adapted {
				batch.Adapter = append(batch.Adapter, adapters[i%len(adapters)])
				batch.AdapterScale = append(batch.AdapterScale, 1+float32(i%3)/2)
			}
		}
		w.beginBatch(batch)
		before := w.gpu.Stats().Dispatches
		w.each(func(b backend.Backend, i int) {
			xi := x[i]
			p := backend.Projection{X: xi, Eps: 1e-5, W: wt[i], Add: add, GLU: glu, Act: models.SiLU, LoRA: l[i]}
			if norm {
				p.Norm = nw[i]
			}
			if next {
				b.Project(backend.Projection{X: xo[i], W: wo[i], Out: []backend.Tensor{xi}, Add: true, Next: p.Norm, LoRA: lo[i]})
			}
			if bias {
				p.Bias = bw[i]
			}
			for _, o := range outs {
				p.Out = append(p.Out, o[i])
			}
			b.Project(p)
		})
		return w.gpu.Stats().Dispatches - before
	}
	// The CPU's int4 products meet activations quantized to int16 per
	// group of 32 (runtime/cpu MatMul), the GPU's f32.
	tol := 2e-4
	if storage == backend.Int4 {
		tol = 4e-3
		if next {
			tol = 8e-3 // x after a residual int4 product of its own
		}
	}
	// Whether some row (of the outputs) runs a slot of the LoRA.
	live := false
	for i := range outRows {
		r := i
		if head {
			r = int(out[i])
		}
		j := adapters[r%len(adapters)]
		live = live || j >= 0 && int(j) < len(ranks)
	}
	// Each twice: with the norm as the GEMVs' prologue (GPUs: there the
	// shrink applies the norm itself) and as a dispatch of its own (CPU
	// adapters).
	for _, prologue := range []string{"on", "off"} {
		plan.NormPrologue = prologue
		dispatches := map[string]int{}
		for _, mode := range []string{"fused", "unfused", "inline"} {
			plan.LoRA = mode
			w.gpu.SetPlan(plan)
			plain := project(false)
			for i, o := range outs {
				w.compare(fmt.Sprintf("%s, prologue %s, no adapter rows: output %d", mode, prologue, i), o, outRows, tol)
			}
			dispatches[mode] = project(true)
			for i, o := range outs {
				w.compare(fmt.Sprintf("%s, prologue %s: output %d", mode, prologue, i), o, outRows, tol)
			}
			if next {
				w.compare(fmt.Sprintf("%s, prologue %s: the residual", mode, prologue), x, rows, tol)
			}
			t.Logf("%s, prologue %s: %d dispatches, %d without adapter rows", mode, prologue, dispatches[mode], plain)
			if d := dispatches[mode]; !live && d != plain || live && d < plain {
				t.Errorf("%s, prologue %s: %d dispatches with adapter rows, %d without", mode, prologue, d, plain)
			}
			// Fused into a GEMV, the adapters cost the shrink alone, and
			// the norm where the GEMV takes no prologue, unless the
			// residual projection before prepared its input (next: a
			// shrink each, and no rmsnorm on either path).
			extra := 1
			if next {
				extra = 2
			} else if norm && prologue == "off" {
				extra = 2
			}
			if d := dispatches[mode]; mode == "fused" && live && kernel != "gemm" && k%4 == 0 && d > plain+extra {
				t.Errorf("fused, prologue %s: %d dispatches with adapter rows, %d without", prologue, d, plain)
			}
			// Inline, a GEMV computes h itself: no dispatch for the
			// adapters at all.
			if d := dispatches[mode]; mode == "inline" && kernel != "gemm" && k%4 == 0 && d != plain {
				t.Errorf("inline, prologue %s: %d dispatches with adapter rows, %d without", prologue, d, plain)
			}
		}
		// Fused, the expand costs no dispatch where the kernel composes (or
		// with an epilogue already: a split, a GLU, an add), else it moves
		// into fuse_epilogue.
		composes := kernel != "gemm" && k%4 == 0
		strict := live && (composes || len(parts) > 1 || add)
		if f, u := dispatches["fused"], dispatches["unfused"]; f > u || strict && f == u {
			t.Errorf("prologue %s: %d dispatches fused, %d unfused", prologue, f, u)
		}
	}
}
