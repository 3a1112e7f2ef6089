package runtime_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// synthGemma4 writes tiny-gemma4 (seed 1, f32) and returns its path.
func synthGemma4(t *testing.T) string {
	t.Helper()
	s, err := synth.Lookup("tiny-gemma4")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny-gemma4.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, s, dtype.F32, 1); err != nil {
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
// final soft cap. (llama.cpp itself is within 6e-3 of this: its CPU
// rounds GELU's inputs and outputs to f16 through a table; see
// testdata/families/README.md.)
func TestGemma4Reference(t *testing.T) {
	path := synthGemma4(t)
	tokens := []int32{1}
	for i := range 30 {
		tokens = append(tokens, int32(3+(i*37)%290))
	}
	want := gemma4Reference(t, path, tokens)
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
	if worst > 1e-4 {
		t.Errorf("logits differ from the reference by up to %.3g", worst)
	}
}

// gemma4Reference returns the logits of every position of tokens for the
// Gemma 4 GGUF at path. Only the model's Config (shapes, flags) comes from
// the loader; every formula is here.
func gemma4Reference(t *testing.T, path string, tokens []int32) [][]float64 {
	t.Helper()
	m, err := models.Open(path, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	c := m.Config
	get := func(name string) []float64 {
		tn, err := m.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := tn.Float32()
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
	// The published shape of tiny-gemma4, spelled out so that the loader's
	// reading of the file is checked too.
	sliding := func(l int) bool { return (l+1)%3 != 0 }
	const window, shared, P = 10, 3, 16
	if c.Layers != 9 || c.SlidingWindow != window || c.Gemma4.SharedKV != shared || c.Gemma4.PerLayer != P {
		t.Fatalf("tiny-gemma4 read as %d layers, window %d, %d shared, per-layer width %d", c.Layers, c.SlidingWindow, c.Gemma4.SharedKV, c.Gemma4.PerLayer)
	}
	for l := range c.Layers {
		if c.LayerSliding(l) != sliding(l) {
			t.Fatalf("layer %d read as sliding %v", l, c.LayerSliding(l))
		}
	}
	D, L, n := c.Dim, c.Layers, len(tokens)
	embed := get(models.TokenEmbedding)
	table, proj, projNorm := get(models.PerLayerTokenEmbd), get(models.PerLayerModelProj), get(models.PerLayerProjNorm)
	hs := make([][]float64, n)
	pl := make([][][]float64, n) // [pos][layer][P]
	for p, tok := range tokens {
		hs[p] = make([]float64, D)
		for i := range D {
			hs[p][i] = embed[int(tok)*D+i] * math.Sqrt(float64(D))
		}
		pr := linear(proj, hs[p])
		pl[p] = make([][]float64, L)
		for l := range L {
			part := make([]float64, P)
			for i := range P {
				part[i] = pr[l*P+i] / math.Sqrt(float64(D))
			}
			part = norm(part, projNorm)
			for i := range P {
				part[i] = (part[i] + table[int(tok)*L*P+l*P+i]*math.Sqrt(P)) / math.Sqrt2
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
			k, v := linear(w("attn_k"), x), linear(w("attn_v"), x)
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
			x := norm(hs[p], w("ffn_norm"))
			gt, up := linear(w("ffn_gate"), x), linear(w("ffn_up"), x)
			for i := range gt {
				gt[i] = gelu(gt[i]) * up[i]
			}
			f := norm(linear(w("ffn_down"), gt), w("post_ffw_norm"))
			for i := range D {
				hs[p][i] += f[i]
			}
			gate := linear(w("inp_gate"), hs[p])
			for i := range gate {
				gate[i] = gelu(gate[i]) * pl[p][l][i]
			}
			e := norm(linear(w("proj"), gate), w("post_norm"))
			scale := w("layer_output_scale")[0]
			for i := range D {
				hs[p][i] = (hs[p][i] + e[i]) * scale
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

// TestGemma4WebGPUMatchesCPU: tiny-gemma4 gives the same greedy tokens on
// both backends (its two caches share the block tables there), from f32
// and f16 weights and quantized at load, over a generation past the
// sliding window.
func TestGemma4WebGPUMatchesCPU(t *testing.T) {
	for _, tc := range []struct {
		typ   dtype.Type
		quant string
	}{{dtype.F32, ""}, {dtype.F16, ""}, {dtype.F16, "int8"}, {dtype.F16, "int4"}} {
		path := synthModel(t, "tiny-gemma4", tc.typ)
		c, err := runtime.Load(path, runtime.Options{Device: "cpu", Quant: tc.quant})
		if err != nil {
			t.Fatal(err)
		}
		g := loadWebGPU(t, path, runtime.Options{Quant: tc.quant})
		req := runtime.Request{Prompt: "abc def ghi", MaxTokens: 60, IgnoreEOS: true}
		want, _, _ := generate(t, c, req)
		got, _, _ := generate(t, g, req)
		c.Close()
		if !equal(got, want) {
			t.Errorf("%s %q:\nwebgpu %v\n   cpu %v", tc.typ, tc.quant, got, want)
		}
	}
}
