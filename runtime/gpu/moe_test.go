package gpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

func (w *twins) routes(rows, k int) pair[backend.Routes] {
	w.t.Helper()
	var p pair[backend.Routes]
	w.each(func(b backend.Backend, i int) {
		var err error
		if p[i], err = b.NewRoutes(rows, k); err != nil {
			w.t.Fatal(err)
		}
	})
	return p
}

// experts uploads stacked expert matrices [e, rows, in] (two of them,
// gate and up, for a GLU) through UploadExperts on both backends.
func (w *twins) experts(s backend.Storage, glu bool, e, rows, in int) pair[backend.Weight] {
	w.t.Helper()
	var ts []*models.Tensor
	for i := range 1 + boolInt(glu) {
		raw := make([]byte, 4*e*rows*in)
		for j, v := range w.random(e*rows*in, 1) {
			binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(v))
		}
		ts = append(ts, models.NewTensor(fmt.Sprintf("exps%d", i), []int{e, rows, in}, dtype.F32, func() ([]byte, error) { return raw, nil }))
	}
	var p pair[backend.Weight]
	w.each(func(b backend.Backend, i int) {
		var err error
		if p[i], err = b.UploadExperts(ts, s); err != nil {
			w.t.Fatal(err)
		}
	})
	return p
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRoute checks moe_route against runtime/cpu Route: the same experts
// in the same order (ties included: logits drawn from a few values tie
// often), weights to rounding, with and without normalisation, for expert
// counts that are not powers of two, k = 1 and k = E; and that the table
// the expert products read lists every pair once, grouped by expert in
// row order, in blocks of at most the step's block size (the GEMVs' up to
// 8, the grouped GEMM's tiles of 16, 32 or 64 pairs).
func TestRoute(t *testing.T) {
	for _, tc := range []struct {
		e, k, rows int
		ties, norm bool
		experts    string // Plan.Experts: "gemm" cuts tiles of the grouped GEMM
	}{
		{1, 1, 1, false, true, ""}, {3, 3, 4, false, false, ""}, {5, 2, 1, false, true, ""}, {5, 1, 9, true, false, ""},
		{7, 3, 17, true, true, ""}, {33, 8, 5, false, true, ""}, {128, 8, 64, false, true, ""}, {6, 2, 64, true, false, ""},
		{5, 3, 64, false, true, "gemm"}, {2, 2, 64, true, false, "gemm"}, {33, 8, 5, false, true, "gemm"},
		// Past 64 rows (a batch larger than a prompt chunk): the one
		// invocation's sort is serial, so any count of pairs is sorted.
		{9, 8, 300, false, true, ""}, {64, 8, 300, true, false, "gemm"},
	} {
		t.Run(fmt.Sprintf("e%d_k%d_rows%d_ties%v_norm%v%s", tc.e, tc.k, tc.rows, tc.ties, tc.norm, tc.experts), func(t *testing.T) {
			alloc := max(64, tc.rows)
			w := newTwins(t, alloc)
			w.gpu.SetPlan(gpu.Plan{Experts: tc.experts})
			vals := w.random(alloc*tc.e, 3)
			if tc.ties {
				for i := range vals {
					vals[i] = float32(w.rng.IntN(3))
				}
			}
			logits := w.tensor(alloc, tc.e, vals)
			r := w.routes(alloc, tc.k)
			w.begin(tokens(tc.rows, 10, w.rng), 0)
			w.each(func(b backend.Backend, i int) { b.Route(r[i], logits[i], tc.norm) })
			ids, wts, order, table, err := gpu.ReadRoutes(w.gpu, r[1])
			if err != nil {
				t.Fatal(err)
			}
			ref := r[0].(*cpu.Routes)
			n := tc.rows * tc.k
			if !slices.Equal(ids, ref.IDs[:n]) {
				t.Fatalf("experts %v, want %v", ids, ref.IDs[:n])
			}
			for i, v := range wts {
				if d := math.Abs(float64(v - ref.W[i])); d > 1e-6*(1+math.Abs(float64(ref.W[i]))) {
					t.Errorf("weight %d: %g, want %g", i, v, ref.W[i])
				}
			}
			// The table: blocks of one expert each, covering the pairs
			// that chose it in order.
			block := gpu.RouteBlock(r[1])
			var seen []uint32
			for _, entry := range table {
				e, first, count := entry[0], entry[1], entry[2]
				if count == 0 {
					continue
				}
				if int(count) > block {
					t.Errorf("block of %d pairs (at most %d)", count, block)
				}
				for _, p := range order[first : first+count] {
					if ids[p] != int32(e) {
						t.Errorf("pair %d (expert %d) in a block of expert %d", p, ids[p], e)
					}
					if len(seen) > 0 && ids[seen[len(seen)-1]] == int32(e) && seen[len(seen)-1] >= p {
						t.Errorf("pairs of expert %d out of order", e)
					}
					seen = append(seen, p)
				}
			}
			if len(seen) != n || len(slices.Compact(slices.Sorted(slices.Values(seen)))) != n {
				t.Errorf("the table covers %d pairs, %d distinct; want each of %d once", len(seen), len(slices.Compact(slices.Sorted(slices.Values(seen)))), n)
			}
		})
	}
}

// TestExpertProject checks the experts' GEMVs (the weight-indexing
// variant of each storage's GEMV, in both its CPU-adapter and GPU forms)
// against the CPU's products of each pair's expert: gate and up with the
// GLU from token rows, and down from rows per pair; with rows that put
// more pairs on one expert than a block holds, k = 1 and k = E, expert
// widths that are not a whole number of int4 groups, and a binding limit
// that spreads the experts over several parts.
func TestExpertProject(t *testing.T) {
	for _, tc := range []struct {
		storage    backend.Storage
		kernel     string
		e, k, rows int
		in, out    int
		binding    int64
		experts    string // Plan.Experts: "gemm" takes the grouped GEMM
	}{
		{backend.F32, "", 5, 2, 1, 64, 36, 0, ""},
		{backend.F32, "gemv", 5, 2, 3, 64, 36, 0, ""},
		{backend.F32, "", 3, 2, 20, 100, 20, 0, ""},
		{backend.F16, "", 6, 1, 7, 64, 36, 0, ""},
		{backend.F16, "gemv-gpu", 6, 6, 2, 96, 44, 0, ""},
		{backend.Int4, "", 5, 2, 1, 64, 36, 0, ""},
		{backend.Int4, "", 3, 3, 19, 100, 36, 0, ""},
		{backend.Int4, "gemv-gpu", 7, 3, 11, 200, 36, 0, ""},
		{backend.Int4, "", 8, 2, 5, 64, 36, 8192, ""},
		{backend.Int8, "", 5, 2, 1, 64, 36, 0, ""},
		{backend.Int8, "", 3, 3, 19, 100, 36, 0, ""},
		{backend.Int8, "gemv-gpu", 7, 3, 11, 200, 36, 0, ""},
		{backend.Int8, "", 8, 2, 5, 64, 36, 8192, ""},
		{backend.F32, "", 8, 2, 5, 64, 36, 32768, ""},
		// The grouped GEMM: experts of 0, 1 and many pairs (k = 1 of 9 over
		// 3 rows; 64 rows of k = 3 of 5: tiles of 64), pairs past a tile,
		// k not a multiple of the tile's 16 or 32 inputs (36, 20, 100).
		{backend.F32, "", 9, 1, 3, 64, 36, 0, "gemm"},
		{backend.F32, "", 5, 3, 64, 100, 20, 0, "gemm"},
		{backend.F32, "", 3, 2, 23, 36, 44, 0, "gemm"},
		{backend.F16, "", 9, 1, 3, 64, 36, 0, "gemm"},
		{backend.F16, "", 5, 3, 64, 100, 20, 0, "gemm"},
		{backend.Int4, "", 9, 1, 3, 64, 36, 0, "gemm"},
		{backend.Int4, "", 5, 3, 64, 100, 36, 0, "gemm"},
		{backend.Int4, "", 8, 2, 12, 64, 36, 8192, "gemm"},
		{backend.Int8, "", 9, 1, 3, 64, 36, 0, "gemm"},
		{backend.Int8, "", 5, 3, 64, 100, 36, 0, "gemm"},
		{backend.Int8, "", 7, 3, 40, 200, 36, 0, "gemm"},
		{backend.F32, "", 8, 2, 24, 64, 36, 32768, "gemm"},
	} {
		t.Run(fmt.Sprintf("%s_%s%s_e%d_k%d_rows%d_in%d_out%d_binding%d", tc.storage, tc.kernel, tc.experts, tc.e, tc.k, tc.rows, tc.in, tc.out, tc.binding), func(t *testing.T) {
			alloc := max(24, tc.rows)
			if tc.binding > 0 {
				alloc = max(8, tc.rows) // the activations still fit one binding
			}
			w := newTwins(t, alloc, webgpu.Options{MaxStorageBinding: tc.binding})
			if tc.storage == backend.F32 {
				w.gpu.SetPlan(gpu.Plan{MatMul: tc.kernel, Experts: tc.experts})
			} else {
				w.gpu.SetPlan(gpu.Plan{Quant: tc.kernel, Experts: tc.experts})
			}
			gateUp := w.experts(tc.storage, true, tc.e, tc.out, tc.in)
			down := w.experts(tc.storage, false, tc.e, tc.in, tc.out)
			if tc.binding > 0 && gpu.Parts(gateUp[1]) < 2 {
				t.Fatalf("experts in one part under a %d-byte limit", tc.binding)
			}
			x := w.tensor(alloc, tc.in, w.random(alloc*tc.in, 0.5))
			logits := w.tensor(alloc, tc.e, w.random(alloc*tc.e, 2))
			act := w.tensor(alloc*tc.k, tc.out, nil)
			y := w.tensor(alloc*tc.k, tc.in, nil)
			r := w.routes(alloc, tc.k)
			w.begin(tokens(tc.rows, 10, w.rng), 0)
			w.each(func(b backend.Backend, i int) {
				b.Route(r[i], logits[i], true)
				b.ExpertProject(backend.ExpertProjection{X: x[i], W: gateUp[i], R: r[i], Out: act[i], GLU: true, Act: models.SiLU})
				b.ExpertProject(backend.ExpertProjection{X: act[i], Slots: true, W: down[i], R: r[i], Out: y[i]})
			})
			// The CPU's int4 products meet activations quantized to int16
			// per group of 32 (runtime/cpu MatMul), the GPU's f32.
			tol := 2e-4
			if tc.storage == backend.Int4 {
				tol = 3e-3
			}
			w.compare("gate and up", act, tc.rows*tc.k, tol)
			w.compare("down", y, tc.rows*tc.k, tol)
		})
	}
}

// TestCombine checks moe_combine against runtime/cpu Combine, with and
// without a shared expert and a residual scale, and with the experts'
// own scales written over dst (Gemma 4).
func TestCombine(t *testing.T) {
	for _, tc := range []struct {
		k, rows, cols int
		shared        bool
		scale         float32
		set           bool
	}{{1, 1, 64, false, 0, false}, {2, 5, 100, true, 0, false}, {8, 17, 36, false, 0.22, false}, {3, 64, 257, true, 2, false},
		{3, 7, 64, false, 0, true}, {8, 33, 100, false, 0, true}} {
		t.Run(fmt.Sprintf("k%d_rows%d_cols%d_shared%v_scale%g_set%v", tc.k, tc.rows, tc.cols, tc.shared, tc.scale, tc.set), func(t *testing.T) {
			const e = 9
			w := newTwins(t, 64)
			logits := w.tensor(64, e, w.random(64*e, 2))
			y := w.tensor(64*tc.k, tc.cols, w.random(64*tc.k*tc.cols, 2))
			dst := w.tensor(64, tc.cols, w.random(64*tc.cols, 1))
			sh := w.tensor(64, tc.cols, w.random(64*tc.cols, 1))
			g := w.tensor(64, 1, w.random(64, 4))
			r := w.routes(64, tc.k)
			es := w.weight([]int{e}, w.random(e, 2))
			w.begin(tokens(tc.rows, 10, w.rng), 0)
			w.each(func(b backend.Backend, i int) {
				b.Route(r[i], logits[i], false)
				c := backend.MoECombine{Dst: dst[i], Y: y[i], R: r[i], Scale: tc.scale}
				if tc.shared {
					c.Shared, c.SharedGate = sh[i], g[i]
				}
				if tc.set {
					c.ExpertScale, c.Set = es[i], true
				}
				b.Combine(c)
			})
			w.compare("combined", dst, tc.rows, 1e-5)
		})
	}
}
