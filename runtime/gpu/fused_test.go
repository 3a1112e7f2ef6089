package gpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// fused uploads matrices (or vectors) as one weight through Fuse on both
// backends.
func (w *twins) fused(s backend.Storage, glu bool, shapes [][]int, scale float32) pair[backend.Weight] {
	w.t.Helper()
	var ts []*models.Tensor
	for i, shape := range shapes {
		n := 1
		for _, d := range shape {
			n *= d
		}
		raw := make([]byte, 4*n)
		for j, v := range w.random(n, scale) {
			binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(v))
		}
		ts = append(ts, models.NewTensor(fmt.Sprintf("w%d", i), shape, dtype.F32, func() ([]byte, error) { return raw, nil }))
	}
	var p pair[backend.Weight]
	w.each(func(b backend.Backend, i int) {
		var err error
		if p[i], err = b.Fuse(ts, s, glu); err != nil {
			w.t.Fatal(err)
		}
	})
	return p
}

// TestProject checks every composition the forward pass asks for (q/k/v
// split with biases, GLU, gate/up split for adapters, residual add, a
// normalised head) against the CPU's, which is the plain ops in a row:
// with every storage, through the fused GEMVs and through the epilogue
// kernel behind the GEMMs, on widths that are not multiples of the tiles
// and groups (k % 4 != 0 takes the naive or tiled kernels).
func TestProject(t *testing.T) {
	type variant struct {
		name  string
		norm  bool
		parts []int // output widths
		bias  bool
		glu   bool
		pairs bool // weight fused for a GLU, split into gate and up
		add   bool
		// next: x comes from a residual projection (of a k×k weight) that
		// is told this projection's norm (Projection.Next); stale: x is
		// scaled between the two, which the prepared input must not miss.
		next, stale bool
	}
	variants := []variant{
		{name: "qkv", parts: []int{48, 16, 16}},
		{name: "qkv-norm-bias", norm: true, parts: []int{40, 24, 24}, bias: true},
		{name: "glu-norm", norm: true, parts: []int{36, 36}, glu: true},
		{name: "glu", parts: []int{50, 50}, glu: true},
		// As wide as the input (k 96): the norm's scratch and the up
		// product's are of one shape (a model whose FFN equals its Dim).
		{name: "glu-norm-square", norm: true, parts: []int{96, 96}, glu: true},
		{name: "gate-up-split-norm", norm: true, parts: []int{36, 36}, pairs: true},
		{name: "residual", parts: []int{33}, add: true},
		{name: "head-norm", norm: true, parts: []int{77}},
		{name: "qkv-norm-bias-next", norm: true, parts: []int{40, 24, 24}, bias: true, next: true},
		{name: "glu-norm-next", norm: true, parts: []int{36, 36}, glu: true, next: true},
		{name: "gate-up-split-norm-next", norm: true, parts: []int{36, 36}, pairs: true, next: true},
		{name: "head-norm-next", norm: true, parts: []int{77}, next: true},
		{name: "head-norm-next-stale", norm: true, parts: []int{77}, next: true, stale: true},
	}
	for _, tc := range []struct {
		storage backend.Storage
		kernel  string // "" for the plan, else Plan.Quant's (or Plan.MatMul's for f32), "prologue" or "narrow" (Plan.Workgroups)
		k, rows int
		binding int64 // a storage binding limit that splits the weights
	}{
		{backend.Int4, "", 96, 1, 0},
		{backend.Int4, "prologue", 96, 1, 0}, // the norm as the GEMV's prologue, as on GPUs
		{backend.F32, "prologue", 64, 2, 0},
		{backend.F16, "prologue", 96, 3, 0},
		{backend.Int4, "prologue", 70, 3, 0},
		{backend.Int4, "", 200, 3, 0},
		{backend.Int4, "gemv-gpu", 200, 5, 0},
		{backend.Int4, "gemm", 72, 17, 0},
		{backend.Int4, "", 70, 2, 0}, // k % 4 != 0
		{backend.F32, "", 64, 1, 0},
		{backend.F32, "gemv", 132, 4, 0},
		{backend.F32, "gemm", 64, 9, 0},
		{backend.F32, "", 66, 1, 0},
		{backend.F16, "", 96, 2, 0},
		{backend.F16, "gemv-gpu", 128, 1, 0},
		{backend.Int4, "", 64, 2, 8192},
		{backend.F32, "", 64, 3, 8192},
		{backend.Int8, "", 96, 1, 0},
		{backend.Int8, "prologue", 70, 3, 0},
		{backend.Int8, "gemv-gpu", 200, 5, 0},
		{backend.Int8, "gemm", 72, 17, 0},
		{backend.Int8, "", 70, 2, 0}, // k % 4 != 0
		{backend.Int8, "", 64, 2, 8192},
		{backend.F32, "narrow", 64, 2, 0},
		{backend.Int4, "narrow", 96, 3, 0},
		{backend.F16, "narrow", 200, 1, 0},
	} {
		for _, v := range variants {
			t.Run(fmt.Sprintf("%s_%s_k%d_rows%d_binding%d/%s", tc.storage, tc.kernel, tc.k, tc.rows, tc.binding, v.name), func(t *testing.T) {
				var plan gpu.Plan
				switch {
				case tc.kernel == "prologue":
					plan.NormPrologue = "on"
				case tc.kernel == "narrow":
					plan.Workgroups = "narrow"
				case tc.storage == backend.F32:
					plan.MatMul = tc.kernel
				default:
					plan.Quant = tc.kernel
				}
				// Under the lowered limit, weights four times as wide take
				// several parts while 4 rows of activations fit one binding.
				mult, alloc := 1, 32
				if tc.binding > 0 {
					mult, alloc = 4, 4
				}
				w := newTwins(t, alloc, webgpu.Options{MaxStorageBinding: tc.binding})
				w.gpu.SetPlan(plan)
				var shapes, bshapes [][]int
				width := 0
				for _, n := range v.parts {
					n *= mult
					shapes, bshapes = append(shapes, []int{n, tc.k}), append(bshapes, []int{n})
					width += n
				}
				wt := w.fused(tc.storage, v.glu || v.pairs, shapes, 1)
				if tc.binding > 0 && width >= 200 && gpu.Parts(wt[1]) < 2 {
					t.Fatalf("weight of %d rows in one part under a %d-byte limit", width, tc.binding)
				}
				x := w.tensor(alloc, tc.k, w.random(alloc*tc.k, 2))
				var norm, bias pair[backend.Weight]
				if v.norm {
					norm = w.weight([]int{tc.k}, w.random(tc.k, 1.5))
				}
				if v.bias {
					bias = w.fused(backend.F32, false, bshapes, 1)
				}
				var outs []pair[backend.Tensor]
				for i, n := range v.parts {
					if v.glu && i > 0 || v.add && i > 0 {
						break
					}
					outs = append(outs, w.tensor(alloc, n*mult, w.random(alloc*n*mult, 1)))
				}
				var wo pair[backend.Weight]
				var xo pair[backend.Tensor]
				if v.next {
					wo = w.fused(tc.storage, false, [][]int{{tc.k, tc.k}}, 1)
					xo = w.tensor(alloc, tc.k, w.random(alloc*tc.k, 2))
				}
				w.begin(tokens(tc.rows, 10, w.rng), 0)
				w.each(func(b backend.Backend, i int) {
					dispatches := b.Stats().Dispatches
					if v.next {
						b.Project(backend.Projection{X: xo[i], W: wo[i], Out: []backend.Tensor{x[i]}, Add: true, Next: norm[i]})
						if v.stale {
							b.Scale(x[i], 0.5)
						}
					}
					defer func() {
						// On a CPU adapter, the prepared input spares the
						// rmsnorm: one dispatch a weight part.
						fusable := tc.kernel == "" || strings.HasPrefix(tc.kernel, "gemv")
						if b, ok := b.(*gpu.Backend); ok && v.next && !v.stale && fusable && tc.k%4 == 0 && b.Device().Info().DeviceType == "cpu" {
							if got, want := b.Stats().Dispatches-dispatches, gpu.Parts(wo[1])+gpu.Parts(wt[1]); got != want {
								t.Errorf("%d dispatches, want %d: the norm's input was not prepared", got, want)
							}
						}
					}()
					p := backend.Projection{X: x[i], Eps: 1e-5, W: wt[i], Add: v.add, GLU: v.glu, Act: models.SiLU}
					if v.norm {
						p.Norm = norm[i]
					}
					if v.bias {
						p.Bias = bias[i]
					}
					for _, o := range outs {
						p.Out = append(p.Out, o[i])
					}
					b.Project(p)
				})
				// The CPU's int4 products meet activations quantized to
				// int16 per group of 32 (runtime/cpu MatMul), the GPU's f32.
				tol := 2e-4
				if tc.storage == backend.Int4 {
					tol = 2e-3
					if v.next {
						tol = 4e-3 // x after a residual int4 product of its own
					}
				}
				for i, o := range outs {
					w.compare(fmt.Sprintf("output %d", i), o, tc.rows, tol)
				}
				if v.next {
					w.compare("residual", x, tc.rows, tol)
				}
			})
		}
	}
}

// TestRopeStore checks rope_kv against Rope, Rope and StoreKV: q as
// rotated, and what attention reads from the cache, for both layouts,
// partial rotary dimensions and GQA.
func TestRopeStore(t *testing.T) {
	for _, tc := range []struct {
		heads, kvHeads, headDim, dim, pos0, batch int
		layout                                    models.RopeLayout
		scale                                     float32
	}{
		{8, 8, 8, 8, 0, 1, models.RopePairs, 0},
		{4, 2, 16, 16, 37, 3, models.RopeHalves, 0},
		{6, 2, 32, 16, 100, 17, models.RopeHalves, 0}, // partial rotary
		{4, 1, 12, 8, 5, 2, models.RopePairs, 0},
		{4, 2, 16, 12, 70, 5, models.RopeHalves, 1.3}, // LongRoPE's attention factor on a partial rotation
		{4, 2, 16, 0, 9, 3, models.RopeHalves, 0},     // no rotation (NoPE layers)
	} {
		for _, kt := range kvTypes {
			t.Run(fmt.Sprintf("%v_%s_h%d_kv%d_d%d_rot%d_batch%d", kt, tc.layout, tc.heads, tc.kvHeads, tc.headDim, tc.dim, tc.batch), func(t *testing.T) {
				w := newTwins(t, 32)
				qDim, kvDim := tc.heads*tc.headDim, tc.kvHeads*tc.headDim
				q := w.tensor(32, qDim, w.random(32*qDim, 2))
				k := w.tensor(32, kvDim, w.random(32*kvDim, 2))
				v := w.tensor(32, kvDim, w.random(32*kvDim, 2))
				out := w.tensor(32, qDim, nil)
				cache := w.kv(backend.KVShape{Layers: 2, Blocks: 16, BlockSize: 16, Heads: tc.kvHeads, HeadDim: tc.headDim, Type: kt})
				rq := backend.Rope{Heads: tc.heads, HeadDim: tc.headDim, Dim: tc.dim, Theta: 10000, Layout: tc.layout, Scale: tc.scale}
				rk := rq
				rk.Heads = tc.kvHeads
				a := backend.Attention{Heads: tc.heads, KVHeads: tc.kvHeads, HeadDim: tc.headDim, Scale: 0.3}
				w.begin(tokens(tc.batch, 10, w.rng), tc.pos0)
				w.each(func(b backend.Backend, i int) {
					b.RopeStore(q[i], k[i], v[i], cache[i], 1, rq, rk)
					b.Attend(out[i], q[i], cache[i], 1, a)
				})
				w.compare("q", q, tc.batch, 5e-4)
				w.compare("attention over the stored keys and values", out, tc.batch, 5e-4)
			})
		}
	}
}

// TestRopeAttend checks RopeAttend against the CPU's RopeStore then Attend,
// in both decode forms: attention_lane composed with Rope where every row
// of a step is its sequence's only one (rows of several sequences at
// positions across cache blocks, the first position, contexts split into
// chunks, some empty, with sinks), and RopeStore then Attend where not
// (prompt chunks, two rows of a sequence, head dims not a multiple of 4,
// the group form), for odd head counts, GQA, both layouts, partial and no
// rotation, soft caps and sliding windows, on every cache type. Later
// steps read what earlier ones stored.
func TestRopeAttend(t *testing.T) {
	lone := func(seqs ...int) attnStep {
		s := attnStep{}
		for _, q := range seqs {
			s.runs = append(s.runs, attnRun{q, 1})
		}
		return s
	}
	blocks := []attnStep{{runs: []attnRun{{0, 15}}}, lone(0, 1, 2), lone(0, 1), lone(2, 0), {runs: []attnRun{{0, 2}, {1, 1}}}, lone(1, 0, 2), lone(0)}
	long := append(attnAt(300), lone(0), lone(0), attnStep{runs: []attnRun{{1, 40}}}, lone(1, 0), lone(0, 1))
	for _, tc := range []struct {
		c       attnCase
		rot     int
		layout  models.RopeLayout
		window  int
		softcap float32
		sinks   bool
	}{
		{attnCase{8, 4, 8, 16, 64, 3, blocks}, 8, models.RopePairs, 0, 0, false},
		{attnCase{5, 5, 12, 7, 64, 3, blocks}, 8, models.RopeHalves, 0, 0, false}, // odd heads, partial rotation
		{attnCase{3, 1, 16, 16, 64, 3, blocks}, 16, models.RopeHalves, 5, 0, false},
		{attnCase{4, 2, 16, 16, 64, 3, blocks}, 16, models.RopePairs, 0, 0, true}, // sinks: 2 chunks of 1 position, one empty
		{attnCase{6, 2, 16, 16, 400, 2, long}, 16, models.RopePairs, 0, 0, true},  // chunks, sinks
		{attnCase{8, 1, 64, 16, 400, 2, long}, 64, models.RopePairs, 20, 30, false},
		{attnCase{4, 2, 32, 8, 200, 1, attnDecodes(0, 1, 7, 8, 9, 130)}, 0, models.RopeHalves, 0, 0, false}, // no rotation
		{attnCase{2, 2, 6, 4, 64, 3, blocks}, 6, models.RopePairs, 0, 0, false},                             // head dim 6: the tiled kernel
	} {
		for _, kt := range kvTypes {
			for _, form := range []string{"lane", "group"} {
				t.Run(fmt.Sprintf("%s_rot%d_%v_win%d_cap%g_sinks%v/%v/%s", tc.c.name(), tc.rot, tc.layout, tc.window, tc.softcap, tc.sinks, kt, form), func(t *testing.T) {
					r := backend.Rope{Heads: tc.c.heads, HeadDim: tc.c.headDim, Dim: tc.rot, Theta: 10000, Layout: tc.layout}
					tc.c.runRope(t, kt, form, func(w *twins, a *backend.Attention) {
						a.Window, a.Softcap = tc.window, tc.softcap
						if tc.softcap > 0 {
							a.Scale *= 8
						}
						if tc.sinks {
							a.Sinks = cpu.NewWeight([]int{a.Heads}, nil) // replaced by each backend's
						}
					}, &r)
				})
			}
		}
	}
}
