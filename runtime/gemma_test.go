package runtime_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/safetensors"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// TestGemmaReference checks the engine's Gemma 2 and 3 against a forward
// pass written here, straight from transformers' modeling_gemma2.py and
// modeling_gemma3.py in float64, over the raw tensors of a Hugging Face
// folder: none of the engine's code (its loader's norm offset, its config,
// its ops) takes part in the reference. The prompt is longer than the
// synthetic models' sliding windows, so that local and global layers see
// different positions.
func TestGemmaReference(t *testing.T) {
	for _, shape := range []string{"tiny-gemma2", "tiny-gemma3"} {
		t.Run(shape, func(t *testing.T) {
			dir := synthHF(t, shape, dtype.F32, synth.HFOptions{})
			tokens := []int32{1}
			for i := range 30 {
				tokens = append(tokens, int32(3+(i*37)%290))
			}
			want := gemmaReference(t, dir, tokens)
			eng, err := runtime.Load(dir, runtime.Options{Device: "cpu"})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			got := logits(t, eng, tokens)
			worst := 0.0
			if len(got) != len(want)-1 { // Score's: those that predict a next token
				t.Fatalf("%d positions scored, want %d", len(got), len(want)-1)
			}
			for p := range got {
				for j := range want[p] {
					worst = max(worst, math.Abs(float64(got[p][j])-want[p][j])/(1+math.Abs(want[p][j])))
				}
			}
			t.Logf("%d positions: logits within %.2g of the reference", len(got), worst)
			if worst > 1e-4 {
				t.Errorf("logits differ from the reference by up to %.3g", worst)
			}
		})
	}
}

// gemmaReference returns the logits of every position of tokens for the
// Gemma 2 or 3 folder dir.
func gemmaReference(t *testing.T, dir string, tokens []int32) [][]float64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ModelType    string   `json:"model_type"`
		Hidden       int      `json:"hidden_size"`
		Layers       int      `json:"num_hidden_layers"`
		Heads        int      `json:"num_attention_heads"`
		KVHeads      int      `json:"num_key_value_heads"`
		HeadDim      int      `json:"head_dim"`
		Eps          float64  `json:"rms_norm_eps"`
		Theta        float64  `json:"rope_theta"`
		LocalTheta   float64  `json:"rope_local_base_freq"`
		Scalar       float64  `json:"query_pre_attn_scalar"`
		Window       int      `json:"sliding_window"`
		LayerTypes   []string `json:"layer_types"`
		AttnSoftcap  *float64 `json:"attn_logit_softcapping"`
		FinalSoftcap *float64 `json:"final_logit_softcapping"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	get := func(name string) []float64 {
		st, ok := set.Tensor(name)
		if !ok {
			t.Fatalf("no tensor %s", name)
		}
		b, err := st.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		typ, _ := st.DType.Type()
		n := 1
		for _, d := range st.Shape {
			n *= d
		}
		f := make([]float32, n)
		if err := dtype.Dequantize(typ, b, f); err != nil {
			t.Fatal(err)
		}
		out := make([]float64, n)
		for i, v := range f {
			out[i] = float64(v)
		}
		return out
	}
	// Gemma's RMSNorm: x / sqrt(mean(x²) + eps) · (1 + w).
	norm := func(x, w []float64) []float64 {
		var ss float64
		for _, v := range x {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(len(x))+cfg.Eps)
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = v * inv * (1 + w[i])
		}
		return out
	}
	linear := func(w, x []float64) []float64 { // w: [out, in]
		out := make([]float64, len(w)/len(x))
		for o := range out {
			for i, v := range x {
				out[o] += w[o*len(x)+i] * v
			}
		}
		return out
	}
	// rotate_half RoPE on one head at position pos.
	rope := func(x []float64, pos int, theta float64) {
		d := len(x)
		for i := range d / 2 {
			angle := float64(pos) / math.Pow(theta, float64(2*i)/float64(d))
			c, s := math.Cos(angle), math.Sin(angle)
			a, b := x[i], x[i+d/2]
			x[i], x[i+d/2] = a*c-b*s, b*c+a*s
		}
	}
	softcap := func(x float64, cap *float64) float64 {
		if cap == nil {
			return x
		}
		return *cap * math.Tanh(x / *cap)
	}
	gelu := func(x float64) float64 {
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	}

	D, hd, n := cfg.Hidden, cfg.HeadDim, len(tokens)
	embed := get("model.embed_tokens.weight")
	hs := make([][]float64, n)
	for p, tok := range tokens {
		hs[p] = make([]float64, D)
		for i := range D {
			hs[p][i] = embed[int(tok)*D+i] * math.Sqrt(float64(D))
		}
	}
	for l := range cfg.Layers {
		pre := fmt.Sprintf("model.layers.%d.", l)
		sliding := cfg.LayerTypes[l] == "sliding_attention"
		theta := cfg.Theta
		if sliding && cfg.ModelType != "gemma2" {
			theta = cfg.LocalTheta
		}
		wq, wk, wv, wo := get(pre+"self_attn.q_proj.weight"), get(pre+"self_attn.k_proj.weight"),
			get(pre+"self_attn.v_proj.weight"), get(pre+"self_attn.o_proj.weight")
		ks, vs := make([][]float64, n), make([][]float64, n)
		qs := make([][]float64, n)
		for p := range n {
			x := norm(hs[p], get(pre+"input_layernorm.weight"))
			qs[p], ks[p], vs[p] = linear(wq, x), linear(wk, x), linear(wv, x)
			for h := range cfg.Heads {
				q := qs[p][h*hd : (h+1)*hd]
				if cfg.ModelType != "gemma2" {
					copy(q, norm(q, get(pre+"self_attn.q_norm.weight")))
				}
				rope(q, p, theta)
			}
			for h := range cfg.KVHeads {
				k := ks[p][h*hd : (h+1)*hd]
				if cfg.ModelType != "gemma2" {
					copy(k, norm(k, get(pre+"self_attn.k_norm.weight")))
				}
				rope(k, p, theta)
			}
		}
		for p := range n {
			att := make([]float64, cfg.Heads*hd)
			for h := range cfg.Heads {
				kvh := h / (cfg.Heads / cfg.KVHeads)
				q := qs[p][h*hd : (h+1)*hd]
				var ws []float64
				var from []int
				for j := 0; j <= p; j++ {
					if sliding && p-j >= cfg.Window {
						continue
					}
					var s float64
					for i := range hd {
						s += q[i] * ks[j][kvh*hd+i]
					}
					ws = append(ws, softcap(s/math.Sqrt(cfg.Scalar), cfg.AttnSoftcap))
					from = append(from, j)
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
						att[h*hd+e] += ws[i] / sum * vs[j][kvh*hd+e]
					}
				}
			}
			o := norm(linear(wo, att), get(pre+"post_attention_layernorm.weight"))
			for i := range D {
				hs[p][i] += o[i]
			}
			x := norm(hs[p], get(pre+"pre_feedforward_layernorm.weight"))
			g, u := linear(get(pre+"mlp.gate_proj.weight"), x), linear(get(pre+"mlp.up_proj.weight"), x)
			for i := range g {
				g[i] = gelu(g[i]) * u[i]
			}
			m := norm(linear(get(pre+"mlp.down_proj.weight"), g), get(pre+"post_feedforward_layernorm.weight"))
			for i := range D {
				hs[p][i] += m[i]
			}
		}
	}
	out := make([][]float64, n)
	for p := range n {
		out[p] = linear(embed, norm(hs[p], get("model.norm.weight")))
		for i := range out[p] {
			out[p][i] = softcap(out[p][i], cfg.FinalSoftcap)
		}
	}
	return out
}

// TestGemmaReferenceAllSliding: tiny-gemma3's folder with layer_types
// saying every layer slides (a window of 9) runs with rings alone, in steps
// of 12 rows, whose 60 positions wrap around rings of 4 blocks of 8, and
// its logits are the float64 forward pass's, which masks every layer to
// its window.
func TestGemmaReferenceAllSliding(t *testing.T) {
	s, err := synth.Lookup("tiny-gemma3")
	if err != nil {
		t.Fatal(err)
	}
	types := make([]string, s.Config.Layers)
	for l := range types {
		types[l] = "sliding_attention"
	}
	dir := editHFConfig(t, synthHF(t, "tiny-gemma3", dtype.F32, synth.HFOptions{}), map[string]any{"layer_types": types})
	tokens := []int32{1}
	for i := range 59 {
		tokens = append(tokens, int32(3+(i*37)%290))
	}
	want := gemmaReference(t, dir, tokens)
	eng, err := runtime.Load(dir, runtime.Options{Device: "cpu", Budgets: runtime.Budgets{MaxBatchTokens: 12}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if eng.WindowBytes() == 0 || eng.WindowBytes() != eng.KVBytes() {
		t.Fatalf("kv of %d bytes, %d of them rings: want rings alone", eng.KVBytes(), eng.WindowBytes())
	}
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
