package runtime_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// synthGemma4 writes a Gemma 4 shape (seed 1, f32) and returns its path;
// SHAPE@q8_0 and @q4_0 write its experts in that type (synth.WriteExperts).
func synthGemma4(t *testing.T, shape string) string {
	t.Helper()
	name, variant, _ := strings.Cut(shape, "@")
	s, err := synth.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	switch variant {
	case "":
		err = synth.Write(f, s, dtype.F32, 1)
	case "q8_0":
		err = synth.WriteExperts(f, s, dtype.F32, dtype.Q8_0, 1)
	case "q4_0":
		err = synth.WriteExperts(f, s, dtype.F32, dtype.Q4_0, 1)
	default:
		t.Fatalf("variant %q", variant)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGemma4Reference checks the engine's Gemma 4 against a forward pass
// written here in float64 from the architecture's formulas (transformers'
// Gemma4 text model, which llama.cpp's gemma4 graph mirrors), reading the
// GGUF's tensors by name: per-layer inputs, q/k/v norms, unscaled scores,
// global layers of wider heads rotating a quarter of their dimensions,
// sliding layers over a window shorter than the prompt, the last layers
// reading the keys and values of the last earlier layer of their kind,
// feed-forwards of per-layer widths, the layers' output scales and the
// final soft cap (tiny-gemma4); global layers whose values are their keys
// (tiny-gemma4-kv); and the dense MLP beside routed experts (the
// 26B-A4B's kind). llama.cpp itself is within 1e-3 of this forward pass
// with its CPU's GELU, a table of f16 inputs and outputs
// (TestGemma4LlamaCppGELU).
func TestGemma4Reference(t *testing.T) {
	// The experts quantized too: the loader splits their fused gate and
	// up at whole blocks (the reference reads them dequantized).
	for _, shape := range append(gemma4Shapes, "tiny-gemma4-moe@q8_0", "tiny-gemma4-moe@q4_0") {
		t.Run(shape, func(t *testing.T) {
			path := synthGemma4(t, shape)
			tokens := []int32{1}
			for i := range 30 {
				tokens = append(tokens, int32(3+(i*37)%290))
			}
			want := gemma4Reference(t, path, tokens, false)
			eng, err := runtime.Load(path, runtime.Options{Device: "cpu"})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			got := logits(t, eng, tokens)
			if len(got) != len(want)-1 {
				t.Fatalf("%d positions scored, want %d", len(got), len(want)-1)
			}
			worst := 0.0
			for p := range got {
				for j := range want[p] {
					worst = max(worst, math.Abs(float64(got[p][j])-want[p][j])/(1+math.Abs(want[p][j])))
				}
			}
			t.Logf("%d positions: logits within %.2g of the reference", len(got), worst)
			tol := 1e-4
			if strings.Contains(shape, "@") {
				// Quantized products round their activations (to 16 or 8
				// bits, llama.cpp's Q4_0×Q8_0 kind): 5e-4 here, where gate
				// and up split at the wrong rows differ by the logits' size.
				tol = 2e-3
			}
			if worst > tol {
				t.Errorf("logits differ from the reference by up to %.3g", worst)
			}
		})
	}
}

// gemma4Shapes are the tiny Gemma 4 shapes the reference covers.
var gemma4Shapes = []string{"tiny-gemma4", "tiny-gemma4-kv", "tiny-gemma4-moe"}

// TestGemma4LlamaCppGELU accounts for the difference between Tessera and
// llama.cpp on Gemma 4 (up to 4e-3 in log-probability, where the other
// families agree within 1e-5): the float64 forward pass of
// TestGemma4Reference, given llama.cpp's CPU GELU (ggml_vec_gelu_f32 and
// ggml_vec_geglu_f32 with GGML_GELU_FP16: the input rounded to f16, its
// GELU computed in f32 and rounded to f16, 0 at or below -10 and the
// identity at or above 10), gives llama.cpp's recorded log-probabilities
// within 1e-3 at every generated position.
func TestGemma4LlamaCppGELU(t *testing.T) {
	raw, err := os.ReadFile("../testdata/families/llamacpp.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden familiesGolden
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	for _, shape := range gemma4Shapes {
		t.Run(shape, func(t *testing.T) {
			want, ok := golden.Shapes[shape]
			if !ok {
				t.Fatalf("no recording of %s", shape)
			}
			seq := append(append([]int32(nil), golden.Prompt...), want.Tokens...)
			path := synthGemma4(t, shape)
			ref, plain := gemma4Reference(t, path, seq, true), gemma4Reference(t, path, seq, false)
			worst, exact := 0.0, 0.0
			for i, tok := range want.Tokens {
				p := len(golden.Prompt) - 1 + i
				worst = max(worst, math.Abs(logSoftmax64(ref[p], tok)-want.Logprobs[i]))
				exact = max(exact, math.Abs(logSoftmax64(plain[p], tok)-want.Logprobs[i]))
			}
			t.Logf("max |Δ logprob| against llama.cpp over %d tokens: %.2g with its GELU table, %.2g with GELU exact", len(want.Tokens), worst, exact)
			if worst > 1e-3 {
				t.Errorf("with llama.cpp's GELU, log-probabilities differ from llama.cpp's by up to %.3g", worst)
			}
		})
	}
}

// logSoftmax64 is log p(tok) under float64 logits l.
func logSoftmax64(l []float64, tok int32) float64 {
	m := math.Inf(-1)
	for _, v := range l {
		m = max(m, v)
	}
	sum := 0.0
	for _, v := range l {
		sum += math.Exp(v - m)
	}
	return l[tok] - m - math.Log(sum)
}

// llamaGELU is llama.cpp's CPU GELU (GGML_GELU_FP16): a table indexed by
// the input rounded to f16, holding f16 outputs computed in f32.
func llamaGELU(x float64) float64 {
	f := float32(x)
	switch {
	case f <= -10:
		return 0
	case f >= 10:
		return float64(f)
	}
	h := float16.Fromfloat32(f).Float32()
	const sqrt2OverPi, coefA = float32(0.79788456080286535587989211986876), float32(0.044715)
	g := 0.5 * h * (1 + float32(math.Tanh(float64(sqrt2OverPi*h*(1+coefA*h*h)))))
	return float64(float16.Fromfloat32(g).Float32())
}

// gemma4Reference returns the logits of every position of tokens for the
// Gemma 4 GGUF at path, with llama.cpp's GELU where llamaCpp. Only the
// model's Config (shapes, flags) comes from the loader; the tensors are
// read from the file by their names in it, and every formula is here.
func gemma4Reference(t *testing.T, path string, tokens []int32, llamaCpp bool) [][]float64 {
	t.Helper()
	m, err := models.Open(path, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config
	file, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	has := func(name string) bool { _, ok := file.Tensor(name); return ok }
	get := func(name string) []float64 {
		ti, ok := file.Tensor(name)
		if !ok {
			t.Fatalf("no tensor %s", name)
		}
		f, err := file.ReadFloat32(ti)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, len(f))
		for i, v := range f {
			out[i] = float64(v)
		}
		return out
	}
	eps := float64(c.NormEps)
	norm := func(x, w []float64) []float64 { // Gemma 4's RMSNorm: no +1; w nil: none
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(len(x))+eps)
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v * inv
			if w != nil {
				out[i] *= w[i]
			}
		}
		return out
	}
	linear := func(w, x []float64) []float64 {
		out := make([]float64, len(w)/len(x))
		for o := range out {
			for i, v := range x {
				out[o] += w[o*len(x)+i] * v
			}
		}
		return out
	}
	gelu := func(x float64) float64 {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	}
	if llamaCpp {
		gelu = llamaGELU
	}
	// mlp is down(gelu(gate·x) * up·x).
	mlp := func(gate, up, down, x []float64) []float64 {
		g, u := linear(gate, x), linear(up, x)
		for i := range g {
			g[i] = gelu(g[i]) * u[i]
		}
		return linear(down, g)
	}
	// rotate_half RoPE over the whole head: pair i (of d/2) turns by
	// pos·theta^(-2i/d) if i < rotated, else not at all (proportional RoPE).
	rope := func(x []float64, pos int, theta float64, rotated int) {
		d := len(x)
		for i := range rotated {
			angle := float64(pos) / math.Pow(theta, float64(2*i)/float64(d))
			cs, sn := math.Cos(angle), math.Sin(angle)
			a, b := x[i], x[i+d/2]
			x[i], x[i+d/2] = a*cs-b*sn, b*cs+a*sn
		}
	}
	const (
		localTheta  = 10000
		globalTheta = 1000000
		partial     = 0.25 // of the global heads' pairs rotate
		softcap     = 30
	)
	// The published constants of the tiny shapes, spelled out so that the
	// loader's reading of the file is checked too.
	sliding := func(l int) bool { return (l+1)%3 != 0 }
	const window = 10
	shared, P := 0, 0
	if c.Gemma4.PerLayer > 0 { // tiny-gemma4
		shared, P = 3, 16
	}
	if c.SlidingWindow != window || c.Gemma4.SharedKV != shared || c.Gemma4.PerLayer != P || c.LocalRopeTheta != localTheta || c.RopeTheta != globalTheta {
		t.Fatalf("read as window %d, %d shared, per-layer width %d, RoPE bases %g and %g", c.SlidingWindow, c.Gemma4.SharedKV, c.Gemma4.PerLayer, c.LocalRopeTheta, c.RopeTheta)
	}
	for l := range c.Layers {
		if c.LayerSliding(l) != sliding(l) {
			t.Fatalf("layer %d read as sliding %v", l, c.LayerSliding(l))
		}
	}
	D, L, n := c.Dim, c.Layers, len(tokens)
	embed := get(models.TokenEmbedding)
	hs := make([][]float64, n)
	pl := make([][][]float64, n) // [pos][layer][P]
	for p, tok := range tokens {
		hs[p] = make([]float64, D)
		for i := range D {
			hs[p][i] = embed[int(tok)*D+i] * math.Sqrt(float64(D))
		}
		if P == 0 {
			continue
		}
		table, proj, projNorm := get(models.PerLayerTokenEmbd), get(models.PerLayerModelProj), get(models.PerLayerProjNorm)
		pr := linear(proj, hs[p])
		pl[p] = make([][]float64, L)
		for l := range L {
			part := make([]float64, P)
			for i := range P {
				part[i] = pr[l*P+i] / math.Sqrt(float64(D))
			}
			part = norm(part, projNorm)
			for i := range P {
				part[i] = (part[i] + table[int(tok)*L*P+l*P+i]*math.Sqrt(float64(P))) / math.Sqrt2
			}
			pl[p][l] = part
		}
	}
	type cache struct{ k, v [][]float64 }
	caches := map[int]*cache{}
	firstShared := L - shared
	for l := range L {
		pre := fmt.Sprintf("blk.%d.", l)
		w := func(kind string) []float64 { return get(pre + kind + ".weight") }
		hd, kvHeads, theta, rotated := 32, 1, float64(globalTheta), int(32/2*partial)
		if sliding(l) {
			hd, kvHeads, theta, rotated = 16, 2, localTheta, 16/2
		}
		src := l
		if l >= firstShared {
			src = firstShared - 1
			if sliding(l) {
				src = firstShared - 2
			}
		}
		qs := make([][]float64, n)
		if src == l {
			caches[l] = &cache{k: make([][]float64, n), v: make([][]float64, n)}
		}
		kv := caches[src]
		for p := range n {
			x := norm(hs[p], w("attn_norm"))
			qs[p] = linear(w("attn_q"), x)
			for h := range c.Heads {
				q := qs[p][h*hd : (h+1)*hd]
				copy(q, norm(q, w("attn_q_norm")))
				rope(q, p, theta, rotated)
			}
			if src != l {
				continue
			}
			k := linear(w("attn_k"), x)
			v := slices.Clone(k) // no attn_v: the values are the keys' projection
			if has(pre + "attn_v.weight") {
				v = linear(w("attn_v"), x)
			}
			for h := range kvHeads {
				kh, vh := k[h*hd:(h+1)*hd], v[h*hd:(h+1)*hd]
				copy(kh, norm(kh, w("attn_k_norm")))
				copy(vh, norm(vh, nil))
				rope(kh, p, theta, rotated)
			}
			kv.k[p], kv.v[p] = k, v
		}
		for p := range n {
			att := make([]float64, c.Heads*hd)
			for h := range c.Heads {
				g := h / (c.Heads / kvHeads)
				q := qs[p][h*hd : (h+1)*hd]
				var ws []float64
				var from []int
				for j := 0; j <= p; j++ {
					if sliding(l) && p-j >= window {
						continue
					}
					var s float64
					for i := range hd {
						s += q[i] * kv.k[j][g*hd+i]
					}
					ws, from = append(ws, s), append(from, j) // scale 1
				}
				mx := math.Inf(-1)
				for _, s := range ws {
					mx = max(mx, s)
				}
				var sum float64
				for i := range ws {
					ws[i] = math.Exp(ws[i] - mx)
					sum += ws[i]
				}
				for i, j := range from {
					for e := range hd {
						att[h*hd+e] += ws[i] / sum * kv.v[j][g*hd+e]
					}
				}
			}
			o := norm(linear(w("attn_output"), att), w("post_attention_norm"))
			for i := range D {
				hs[p][i] += o[i]
			}
			f := mlp(w("ffn_gate"), w("ffn_up"), w("ffn_down"), norm(hs[p], w("ffn_norm")))
			if has(pre + "ffn_gate_inp.weight") {
				f = add(norm(f, w("post_ffw_norm_1")), gemma4Experts(t, get, pre, hs[p], norm, mlp))
			}
			f = norm(f, w("post_ffw_norm"))
			for i := range D {
				hs[p][i] += f[i]
			}
			if P > 0 {
				gate := linear(w("inp_gate"), hs[p])
				for i := range gate {
					gate[i] = gelu(gate[i]) * pl[p][l][i]
				}
				e := norm(linear(w("proj"), gate), w("post_norm"))
				for i := range D {
					hs[p][i] += e[i]
				}
			}
			scale := w("layer_output_scale")[0]
			for i := range D {
				hs[p][i] *= scale
			}
		}
	}
	out := make([][]float64, n)
	for p := range n {
		out[p] = linear(embed, norm(hs[p], get(models.OutputNorm)))
		for i := range out[p] {
			out[p][i] = softcap * math.Tanh(out[p][i]/softcap)
		}
	}
	return out
}

// add is a + b.
func add(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

// gemma4Experts is the routed experts' part of a Gemma 4 MoE layer's
// feed-forward for residual h: post_ffw_norm_2(Σ w_e · s_e · expert_e(
// pre_ffw_norm_2(h))) over the top k of softmax(router · (norm(h) / √dim
// · ffn_gate_inp.scale)), their weights renormalised, s_e the expert's
// ffn_down_exps.scale, gate and up read from the fused ffn_gate_up_exps
// (an expert's gate rows first).
func gemma4Experts(t *testing.T, get func(string) []float64, pre string, h []float64,
	norm func(x, w []float64) []float64, mlp func(gate, up, down, x []float64) []float64) []float64 {
	D := len(h)
	router, inScale := get(pre+"ffn_gate_inp.weight"), get(pre+"ffn_gate_inp.scale")
	E := len(router) / D
	r := norm(h, nil)
	for i := range r {
		r[i] *= inScale[i] / math.Sqrt(float64(D))
	}
	logits := make([]float64, E)
	for e := range E {
		for i, v := range r {
			logits[e] += router[e*D+i] * v
		}
	}
	order := make([]int, E)
	for e := range order {
		order[e] = e
	}
	sort.SliceStable(order, func(a, b int) bool { return logits[order[a]] > logits[order[b]] })
	const k = 3 // tiny-gemma4-moe's experts a token
	var sum float64
	mx := logits[order[0]]
	ws := make([]float64, k)
	for s := range k {
		ws[s] = math.Exp(logits[order[s]] - mx)
		sum += ws[s]
	}
	gateUp, down, outScale := get(pre+"ffn_gate_up_exps.weight"), get(pre+"ffn_down_exps.weight"), get(pre+"ffn_down_exps.scale")
	F := len(down) / E / D
	x := norm(h, get(pre+"pre_ffw_norm_2.weight"))
	y := make([]float64, D)
	for s := range k {
		e := order[s]
		g := gateUp[e*2*F*D : (e*2+1)*F*D]
		u := gateUp[(e*2+1)*F*D : (e+1)*2*F*D]
		o := mlp(g, u, down[e*D*F:(e+1)*D*F], x)
		for i := range y {
			y[i] += ws[s] / sum * outScale[e] * o[i]
		}
	}
	if len(outScale) != E || len(gateUp) != 2*E*F*D {
		t.Fatalf("%d expert scales, %d gate and up values for %d experts of %d", len(outScale), len(gateUp), E, F)
	}
	return norm(y, get(pre+"post_ffw_norm_2.weight"))
}

// TestGemma4WebGPUMatchesCPU: tiny-gemma4 gives the same greedy tokens on
// both backends (its two caches share the block tables there), from f32
// and f16 weights and quantized at load, over a generation past the
// sliding window; so does tiny-gemma4-wide, whose heads are as wide as the
// real files' (512 global, 256 sliding).
func TestGemma4WebGPUMatchesCPU(t *testing.T) {
	for _, tc := range []struct {
		shape string
		typ   dtype.Type
		quant string
	}{{"tiny-gemma4", dtype.F32, ""}, {"tiny-gemma4", dtype.F16, ""}, {"tiny-gemma4", dtype.F16, "int8"}, {"tiny-gemma4", dtype.F16, "int4"},
		{"tiny-gemma4-moe", dtype.F16, ""}, {"tiny-gemma4-moe", dtype.F16, "int4"},
		{"tiny-gemma4-wide", dtype.F32, ""}, {"tiny-gemma4-wide", dtype.F16, "int4"}} {
		path := synthModel(t, tc.shape, tc.typ)
		c, err := runtime.Load(path, runtime.Options{Device: "cpu", Quant: tc.quant})
		if err != nil {
			t.Fatal(err)
		}
		g := loadWebGPU(t, path, runtime.Options{Quant: tc.quant})
		if _, ok := g.GPU(); !ok {
			t.Fatalf("%s %s %q: the self-check sent the model to the CPU", tc.shape, tc.typ, tc.quant)
		}
		req := runtime.Request{Prompt: "abc def ghi", MaxTokens: 60, IgnoreEOS: true}
		want, _, _ := generate(t, c, req)
		got, _, _ := generate(t, g, req)
		c.Close()
		if !equal(got, want) {
			t.Errorf("%s %s %q:\nwebgpu %v\n   cpu %v", tc.shape, tc.typ, tc.quant, got, want)
		}
	}
}
