package gpu_test

import (
	"flag"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// wantSubgroups makes TestSubgroupTwins fail, not skip, on a device
// without subgroups: web/e2e's TestBrowserSubgroups sets it when it runs
// this package's tests in Chromium, whose SwiftShader has them.
var wantSubgroups = flag.Bool("subgroups", false, "fail TestSubgroupTwins on a device without subgroups")

// reductions runs every op whose kernel has a subgroup variant on w's
// backends with the GPUs' plans (the GEMV of several invocations a column,
// attention_decode), checks the GPU against the CPU reference, and returns
// the GPU's results by name, for TestSubgroupTwins to compare the subgroup
// kernels with the plain ones. Both calls draw the same data from the
// twins' generators, seeded alike.
func reductions(t *testing.T, w *twins, plan gpu.Plan) map[string][]float32 {
	t.Helper()
	plan.MatMul, plan.Quant, plan.Attention = "gemv", "gemv-gpu", "group"
	w.gpu.SetPlan(plan)
	got := map[string][]float32{}
	read := func(what string, p pair[backend.Tensor], n int, tol float64) {
		t.Helper()
		w.compare(what, p, n, tol)
		v, err := w.gpu.Read(p[1], n)
		if err != nil {
			t.Fatal(err)
		}
		got[what] = v
	}
	const rows = 5
	for _, cols := range []int{64, 1000, 5632} {
		x := w.tensor(rows, cols, w.random(rows*cols, 3))
		y := w.tensor(rows, cols, nil)
		ln := w.tensor(rows, cols, nil)
		gain := w.weight([]int{cols}, w.random(cols, 2))
		bias := w.weight([]int{cols}, w.random(cols, 1))
		w.begin(tokens(rows, 10, w.rng), 0)
		w.each(func(b backend.Backend, i int) {
			b.RMSNorm(y[i], x[i], gain[i], 1e-5)
			b.LayerNorm(ln[i], x[i], gain[i], bias[i], 1e-5)
		})
		read(fmt.Sprintf("rmsnorm %d", cols), y, rows, 1e-5)
		read(fmt.Sprintf("layernorm %d", cols), ln, rows, 1e-5)
	}
	for _, hd := range []int{64, 128} {
		x := w.tensor(rows, 4*hd, w.random(rows*4*hd, 3))
		norm := w.weight([]int{hd}, w.random(hd, 2))
		w.begin(tokens(rows, 10, w.rng), 0)
		w.each(func(b backend.Backend, i int) { b.HeadNorm(x[i], norm[i], hd, 1e-6) })
		read(fmt.Sprintf("headnorm %d", hd), x, rows, 1e-5)
	}
	for _, cols := range []int{1, 7, 512, 32000} {
		data := w.random(4*cols, 5)
		if cols > 1 {
			data[cols+cols/2] = 100
			data[2*cols+3], data[2*cols+cols-1] = 50, 50 // a tie picks the lower index
		}
		for i := range min(cols, 3) {
			data[3*cols+i] = float32(math.Inf(-1)) // masked: of one column, a row of -Inf
		}
		x := w.tensor(4, cols, data)
		want, _ := w.ref.Argmax(x[0], 4)
		ids, err := w.gpu.Argmax(x[1], 4)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, want) {
			t.Errorf("argmax of %d columns: gpu %v, cpu %v", cols, ids, want)
		}
		k := min(cols, 40)
		if cols > 11 {
			data[5], data[9] = data[7], data[7] // ties keep the lower index first
			data[11] = float32(math.Copysign(0, -1))
		}
		x = w.tensor(1, cols, data[:cols])
		wantIDs, wantVals, _ := w.ref.TopK(x[0], 0, k)
		topIDs, topVals, err := w.gpu.TopK(x[1], 0, k)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(topIDs, bits(topVals)) != fmt.Sprint(wantIDs, bits(wantVals)) {
			t.Errorf("top-%d of %d:\n gpu %v %v\n cpu %v %v", k, cols, topIDs, topVals, wantIDs, wantVals)
		}
		got[fmt.Sprint("argmax ", cols)] = append(idsFloat(ids), idsFloat(topIDs)...)
	}
	for _, tc := range []struct{ m, k, n int }{{1, 2048, 300}, {3, 1000, 172}, {1, 64, 64}} {
		wt := w.weight([]int{tc.n, tc.k}, w.random(tc.n*tc.k, 1))
		x := w.tensor(rows, tc.k, w.random(rows*tc.k, 1))
		y := w.tensor(rows, tc.n, nil)
		w.begin(tokens(tc.m, 10, w.rng), 0)
		w.each(func(b backend.Backend, i int) { b.MatMul(y[i], x[i], wt[i]) })
		read(fmt.Sprintf("gemv %dx%dx%d", tc.m, tc.k, tc.n), y, tc.m, 1e-6*math.Sqrt(float64(tc.k))*4)
	}
	// The cache's type changes how records are read, not the reductions:
	// f32 only (on SwiftShader most of this test's time is compiling
	// pipelines, twice over).
	for _, tc := range []struct{ heads, kvHeads, headDim, prompt int }{{8, 2, 64, 70}, {4, 4, 128, 20}} {
		cache := w.kv(backend.KVShape{Layers: 1, Blocks: 16, BlockSize: 16, Heads: tc.kvHeads, HeadDim: tc.headDim})
		a := backend.Attention{Heads: tc.heads, KVHeads: tc.kvHeads, HeadDim: tc.headDim, Scale: float32(1 / math.Sqrt(float64(tc.headDim)))}
		qDim, kvDim := tc.heads*tc.headDim, tc.kvHeads*tc.headDim
		k := w.tensor(tc.prompt, kvDim, w.random(tc.prompt*kvDim, 2))
		v := w.tensor(tc.prompt, kvDim, w.random(tc.prompt*kvDim, 2))
		w.begin(tokens(tc.prompt, 10, w.rng), 0)
		w.each(func(b backend.Backend, i int) { b.StoreKV(cache[i], 0, k[i], v[i]) })
		// The decode row, attention_decode's: its scores span the blocks.
		q := w.tensor(1, qDim, w.random(qDim, 2))
		out := w.tensor(1, qDim, nil)
		w.begin(tokens(1, 10, w.rng), tc.prompt)
		w.each(func(b backend.Backend, i int) {
			b.StoreKV(cache[i], 0, k[i], v[i])
			b.Attend(out[i], q[i], cache[i], 0, a)
		})
		read(fmt.Sprintf("attention h%d kv%d d%d", tc.heads, tc.kvHeads, tc.headDim), out, 1, 2e-5)
	}
	return got
}

func bits(v []float32) []uint32 {
	out := make([]uint32, len(v))
	for i, x := range v {
		out[i] = math.Float32bits(x)
	}
	return out
}

func idsFloat(ids []int32) []float32 {
	out := make([]float32, len(ids))
	for i, id := range ids {
		out[i] = float32(id)
	}
	return out
}

// TestSubgroupTwins runs the subgroup variants of the reductions (the
// norms, argmax and top-k, attention_decode's running maximum and sum, the
// GEMV's column sums) against the CPU reference and against the plain f32
// kernels on the same inputs: sums to the plain kernels' tolerances
// against the CPU (they add in another order), argmax and top-k exactly.
// It needs a device with subgroups, which only the browser's has (the
// native binding exposes none): web/e2e's TestBrowserSubgroups runs it in
// Chromium.
func TestSubgroupTwins(t *testing.T) {
	sub := newTwins(t, 160)
	info := sub.gpu.Device().Info()
	if !info.Subgroups {
		why := "the adapter has none"
		if info.SubgroupsNote != "" {
			why = info.SubgroupsNote
		}
		// The plain kernels against the CPU, on the GPUs' plans, as the
		// comparison below runs them.
		reductions(t, sub, gpu.Plan{})
		if *wantSubgroups {
			t.Fatalf("%s: no subgroups (%s), and -subgroups wants them", info.Adapter, why)
		}
		t.Skipf("%s: no subgroups (%s); web/e2e's TestBrowserSubgroups runs this test in Chromium", info.Adapter, why)
	}
	plain := newTwins(t, 160, webgpu.Options{DisableSubgroups: true})
	if plain.gpu.Device().Info().Subgroups {
		t.Fatal("DisableSubgroups left the device's subgroups on")
	}
	t.Logf("%s: subgroup sizes %d to %d", info.Adapter, info.SubgroupMinSize, info.SubgroupMaxSize)
	want := reductions(t, plain, gpu.Plan{})
	got := reductions(t, sub, gpu.Plan{})
	for name, g := range got {
		p := want[name]
		worst, at := 0.0, 0
		for i := range p {
			d := math.Abs(float64(g[i]-p[i])) / (1 + math.Abs(float64(p[i])))
			if d > worst || math.IsNaN(float64(g[i])) {
				worst, at = d, i
			}
		}
		tol := 2e-5
		if strings.HasPrefix(name, "argmax") {
			tol = 0
		}
		if worst > tol || math.IsNaN(worst) {
			t.Errorf("%s: subgroups %g, plain %g at %d: relative difference %.3g > %.3g", name, g[at], p[at], at, worst, tol)
		}
	}
	// The subgroup backend ran every kernel's subgroup variant, the plain
	// one none.
	ran := sub.gpu.Kernels()
	for _, k := range []string{"rmsnorm", "rmsnorm_heads", "layernorm", "argmax", "topk", "attention_decode", "matmul_gemv"} {
		if !slices.ContainsFunc(ran, func(v string) bool { return strings.HasPrefix(v, k+"+") && strings.Contains(v, "+sg") }) {
			t.Errorf("the subgroup backend ran no subgroup variant of %s: %v", k, ran)
		}
	}
	if p := strings.Join(plain.gpu.Kernels(), " "); strings.Contains(p, "+sg") {
		t.Errorf("the plain backend ran subgroup variants: %s", p)
	}
	if got := sub.gpu.KernelPath(); got != "f32+subgroups" {
		t.Errorf("KernelPath = %q, want f32+subgroups", got)
	}
}
