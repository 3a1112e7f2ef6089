package gpu_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/shaders"
)

// f16Ops runs the ops whose kernels have f16 forms (shaders.F16Kernels)
// on w's GPU with plan: f16 weights' GEMV and GEMM, and an f16 cache's
// store and attention (decode and prefill kernels). It returns the GPU's
// results by name, and for the GEMVs Σ|x·w| of each output (the scale of
// shaders.F16GEMVTolerance).
func f16Ops(t *testing.T, w *twins, plan gpu.Plan) (got, scale map[string][]float32) {
	t.Helper()
	got, scale = map[string][]float32{}, map[string][]float32{}
	read := func(what string, p pair[backend.Tensor], n int) {
		t.Helper()
		v, err := w.gpu.Read(p[1], n)
		if err != nil {
			t.Fatal(err)
		}
		got[what] = v
	}
	for _, kernel := range []string{"gemv-gpu", "gemv", "gemm"} {
		plan.Quant = kernel
		w.gpu.SetPlan(plan)
		for _, tc := range []struct{ m, k, n int }{{1, 2048, 300}, {3, 1000, 172}, {17, 96, 129}} {
			data := w.random(tc.n*tc.k, 0.1)
			wt := w.weightAs([]int{tc.n, tc.k}, data, backend.F16)
			xs := w.random(tc.m*tc.k, 3)
			x := w.tensor(tc.m, tc.k, xs)
			y := w.tensor(tc.m, tc.n, nil)
			w.begin(tokens(tc.m, 10, w.rng), 0)
			w.each(func(b backend.Backend, i int) { b.MatMul(y[i], x[i], wt[i]) })
			name := fmt.Sprintf("%s %dx%dx%d", kernel, tc.m, tc.k, tc.n)
			read(name, y, tc.m)
			s := make([]float32, tc.m*tc.n)
			for r := range tc.m {
				for j := range tc.n {
					for c := range tc.k {
						s[r*tc.n+j] += float32(math.Abs(float64(xs[r*tc.k+c]) * float64(data[j*tc.k+c])))
					}
				}
			}
			scale[name] = s
		}
	}
	for _, attn := range []string{"group", "lane"} {
		plan.Attention = attn
		w.gpu.SetPlan(plan)
		hd, heads, kvHeads, prompt := 64, 8, 2, 40
		cache := w.kv(backend.KVShape{Layers: 1, Blocks: 8, BlockSize: 16, Heads: kvHeads, HeadDim: hd, Type: backend.KVF16})
		a := backend.Attention{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Scale: 0.125}
		for _, st := range []struct{ pos, n int }{{0, prompt}, {prompt, 1}} {
			q := w.tensor(prompt, heads*hd, w.random(prompt*heads*hd, 2))
			k := w.tensor(prompt, kvHeads*hd, w.random(prompt*kvHeads*hd, 2))
			v := w.tensor(prompt, kvHeads*hd, w.random(prompt*kvHeads*hd, 2))
			out := w.tensor(prompt, heads*hd, nil)
			w.begin(tokens(st.n, 10, w.rng), st.pos)
			w.each(func(b backend.Backend, i int) {
				b.StoreKV(cache[i], 0, k[i], v[i])
				b.Attend(out[i], q[i], cache[i], 0, a)
			})
			read(fmt.Sprintf("attention %s %d rows", attn, st.n), out, st.n)
		}
	}
	return got, scale
}

// TestF16Twins runs the f16 forms of the kernels (shaders.Fusion.F16) and
// their f32 twins on the same device and inputs: the GEMM of f16 weights
// bit for bit (its f16 tile holds the same values), the GEMV within
// shaders.F16GEMVTolerance of Σ|x·w| (TestF16GEMVTolerance derives it),
// and attention over an f16 cache within 1e-3 (reads convert exactly; a
// store may round a tie the other way, as WGSL lets f16() and
// pack2x16float each do). It needs shader-f16 and a WGSL compiler that
// takes f16 code, which no device here has: natively wgpu-native in
// cogentcore/webgpu v0.23.0 cannot compile f16, and SwiftShader (Chromium's,
// Dawn's) has no shader-f16. So it runs only where a device is lent with a
// browser or Dawn that has it (web/e2e's TestBrowserSubgroups includes it).
func TestF16Twins(t *testing.T) {
	f16 := newTwins(t, 64)
	info := f16.gpu.Device().Info()
	if !info.ShaderF16 {
		t.Skipf("%s: no shader-f16 with a compiler that takes f16 code (natively cogentcore/webgpu v0.23.0's "+
			"wgpu-native cannot compile f16; SwiftShader has no shader-f16): the f16 kernels run only on a lent device", info.Adapter)
	}
	plain := newTwins(t, 64)
	want, scale := f16Ops(t, plain, gpu.Plan{F16: "off"})
	got, _ := f16Ops(t, f16, gpu.Plan{})
	for name, g := range got {
		p := want[name]
		for i := range p {
			var bad bool
			switch {
			case strings.HasPrefix(name, "gemm"):
				bad = g[i] != p[i]
			case strings.HasPrefix(name, "gemv"):
				bad = math.Abs(float64(g[i]-p[i])) > shaders.F16GEMVTolerance*float64(scale[name][i])+1e-6
			default:
				bad = math.Abs(float64(g[i]-p[i])) > 1e-3*(1+math.Abs(float64(p[i])))
			}
			if bad || math.IsNaN(float64(g[i])) {
				t.Errorf("%s: value %d: f16 %g, f32 %g", name, i, g[i], p[i])
				break
			}
		}
	}
	ran := f16.gpu.Kernels()
	for _, k := range []string{"matmul_f16_gemv", "matmul_f16_gemm", "store_kv", "attention_decode", "attention_lane", "attention_prefill"} {
		if !slices.ContainsFunc(ran, func(v string) bool { return strings.HasPrefix(v, k+"+") && strings.Contains(v, "+f16") }) {
			t.Errorf("no f16 form of %s ran: %v", k, ran)
		}
	}
	if p := strings.Join(plain.gpu.Kernels(), " "); strings.Contains(p, "+f16") {
		t.Errorf("the plan with F16 off ran f16 forms: %s", p)
	}
	if path := f16.gpu.KernelPath(); !strings.Contains(path, "+f16") {
		t.Errorf("KernelPath %q after f16 kernels ran", path)
	}
}
