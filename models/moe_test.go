package models_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/synth"
)

// graniteMoEConfig is granite-3.1-1b-a400m-instruct's config.json.
const graniteMoEConfig = `{
  "architectures": ["GraniteMoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "attention_multiplier": 0.015625, "bos_token_id": 0, "embedding_multiplier": 12.0, "eos_token_id": 0,
  "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 512,
  "logits_scaling": 6.0, "max_position_embeddings": 131072, "model_type": "granitemoe",
  "num_attention_heads": 16, "num_experts_per_tok": 8, "num_hidden_layers": 24, "num_key_value_heads": 8,
  "num_local_experts": 32, "output_router_logits": false, "pad_token_id": 0, "residual_multiplier": 0.22,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1500000.0, "router_aux_loss_coef": 0.0,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "vocab_size": 49155
}`

// qwen2MoEConfig is Qwen1.5-MoE-A2.7B's, abridged to the keys it sets.
const qwen2MoEConfig = `{
  "architectures": ["Qwen2MoeForCausalLM"], "decoder_sparse_step": 1, "hidden_act": "silu", "hidden_size": 2048,
  "intermediate_size": 5632, "max_position_embeddings": 8192, "max_window_layers": 21, "model_type": "qwen2_moe",
  "moe_intermediate_size": 1408, "norm_topk_prob": false, "num_attention_heads": 16, "num_experts": 60,
  "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 16, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "shared_expert_intermediate_size": 5632, "sliding_window": 32768,
  "tie_word_embeddings": false, "use_sliding_window": false, "vocab_size": 151936
}`

// mixtralConfig is Mixtral-8x7B-v0.1's, abridged.
const mixtralConfig = `{
  "architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
  "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0, "sliding_window": null, "tie_word_embeddings": false, "vocab_size": 32000
}`

// TestParseHFConfigMoE: the experts of each family from its config.json:
// who normalises the top-k weights (Mixtral and Granite always, Qwen and
// OLMoE as norm_topk_prob says, false when it is absent), the expert
// width (moe_intermediate_size for Qwen, intermediate_size for the rest),
// Qwen2-MoE's shared expert, Granite's multipliers; the real shapes synth
// writes read back as themselves.
func TestParseHFConfigMoE(t *testing.T) {
	shape := func(name string) models.Config {
		s, err := synth.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		c := s.Config
		c.Rope = models.RopeHalves // every Hugging Face checkpoint
		return c
	}
	granite := shape("granite-3.1-1b-a400m")
	qwen2 := models.Config{Arch: "qwen2moe", Dim: 2048, FFN: 5632, Layers: 24, Heads: 16, KVHeads: 16, HeadDim: 128,
		Vocab: 151936, Context: 8192, NormEps: 1e-6, RopeTheta: 1e6, RopeDim: 128, Rope: models.RopeHalves, QKVBias: true,
		MoE: models.MoEConfig{Experts: 60, Used: 4, FFN: 1408, SharedFFN: 5632}}
	mixtral := models.Config{Arch: "llama", Dim: 4096, FFN: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 32000, Context: 32768, NormEps: 1e-5, RopeTheta: 1e6, RopeDim: 128, Rope: models.RopeHalves,
		MoE: models.MoEConfig{Experts: 8, Used: 2, FFN: 14336, NormTopK: true}}
	mixtralWindow := mixtral
	mixtralWindow.Context = 4096
	qwen2Norm := qwen2
	qwen2Norm.MoE.NormTopK = true
	for _, tc := range []struct {
		name, config string
		want         models.Config
	}{
		{"granite", graniteMoEConfig, granite},
		{"qwen2moe", qwen2MoEConfig, qwen2},
		{"qwen2moe normalised", edit(t, qwen2MoEConfig, map[string]any{"norm_topk_prob": true}), qwen2Norm},
		{"qwen2moe default norm", edit(t, qwen2MoEConfig, map[string]any{"norm_topk_prob": nil}), qwen2},
		{"mixtral", mixtralConfig, mixtral},
		{"mixtral windowed", edit(t, mixtralConfig, map[string]any{"sliding_window": 4096}), mixtralWindow},
	} {
		got, err := models.ParseHFConfig([]byte(tc.config))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name, config, want string
	}{
		{"dense layers", edit(t, qwen2MoEConfig, map[string]any{"mlp_only_layers": []int{0}}), "mlp_only_layers"},
		{"sparse step", edit(t, qwen2MoEConfig, map[string]any{"decoder_sparse_step": 2}), "decoder_sparse_step"},
		{"no shared expert", edit(t, qwen2MoEConfig, map[string]any{"shared_expert_intermediate_size": nil}), "shared_expert_intermediate_size"},
		{"k > E", edit(t, mixtralConfig, map[string]any{"num_experts_per_tok": 9}), "experts used 9"},
		{"no experts", edit(t, mixtralConfig, map[string]any{"num_local_experts": nil}), "expert count 0"},
		{"too many experts", edit(t, mixtralConfig, map[string]any{"num_local_experts": 5000}), "expert count 5000"},
		{"olmoe clip", edit(t, strings.Replace(graniteMoEConfig, "GraniteMoeForCausalLM", "OlmoeForCausalLM", 1),
			map[string]any{"num_experts": 8, "clip_qkv": 8.0}), "clip_qkv"},
	} {
		_, err := models.ParseHFConfig([]byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

// rewriteGGUF writes the synthetic shape's GGUF with its metadata and
// tensors passed through edit, and opens it.
func rewriteGGUF(t *testing.T, shape string, edit func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)) (*models.Model, error) {
	t.Helper()
	s, err := synth.Lookup(shape)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := synth.Write(&buf, s, dtype.F32, 7); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var ts []gguf.WriteTensor
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		data, err := f.ReadTensor(ti)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, Dims: ti.Dims, Type: ti.Type, Data: data})
	}
	kv, ts := edit(synth.Metadata(s), ts)
	path := filepath.Join(t.TempDir(), "m.gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(out, kv, ts); err != nil {
		t.Fatal(err)
	}
	out.Close()
	m, err := models.Open(path, models.Options{})
	if err == nil {
		t.Cleanup(func() { m.Close() })
	}
	return m, err
}

// TestGGUFMoE: llama.cpp's keys as it reads them: the top-k
// normalisation per architecture when expert_weights_norm is absent, the
// shared expert's gate stored [dim] or [1, dim], and clear errors for a
// MoE architecture without its expert count and for gating other than
// softmax.
func TestGGUFMoE(t *testing.T) {
	drop := func(key string) func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		return func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return slices.DeleteFunc(kv, func(x gguf.KV) bool { return strings.HasSuffix(x.Key, "."+key) }), ts
		}
	}
	for shape, want := range map[string]bool{"tiny-qwen2moe": false, "tiny-qwen3moe": true, "tiny-olmoe": false, "tiny-mixtral": true, "tiny-granitemoe": true} {
		m, err := rewriteGGUF(t, shape, drop("expert_weights_norm"))
		if err != nil {
			t.Fatalf("%s: %v", shape, err)
		}
		if !m.Config.MoE.On() || m.Config.MoE.NormTopK != want {
			t.Errorf("%s without expert_weights_norm: %+v, want NormTopK %v", shape, m.Config.MoE, want)
		}
	}
	m, err := rewriteGGUF(t, "tiny-qwen2moe", func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
		for i := range ts {
			if strings.HasSuffix(ts[i].Name, models.FFNRouterShexp+".weight") {
				ts[i].Dims = append(ts[i].Dims, 1) // [1, dim]
			}
		}
		return kv, ts
	})
	if err != nil {
		t.Fatal(err)
	}
	if sh := m.Tensors[models.LayerTensor(0, models.FFNRouterShexp)].Shape; !slices.Equal(sh, []int{64}) {
		t.Errorf("shared expert gate of shape %v", sh)
	}
	for _, tc := range []struct {
		name, shape string
		edit        func([]gguf.KV, []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor)
		want        string
	}{
		{"no expert count", "tiny-qwen3moe", drop("expert_count"), "qwen3moe model without qwen3moe.expert_count"},
		{"no shared width", "tiny-qwen2moe", drop("expert_shared_feed_forward_length"), "expert_shared_feed_forward_length"},
		{"sigmoid gating", "tiny-olmoe", func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return append(kv, gguf.KV{Key: "olmoe.expert_gating_func", Value: gguf.Uint32Value(2)}), ts
		}, "expert_gating_func 2"},
		{"missing experts", "tiny-mixtral", func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
			return kv, slices.DeleteFunc(ts, func(x gguf.WriteTensor) bool { return x.Name == "blk.1.ffn_up_exps.weight" })
		}, "missing tensor blk.1.ffn_up_exps.weight"},
	} {
		if _, err := rewriteGGUF(t, tc.shape, tc.edit); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

// TestGGUFGemmaSlidingPattern: Gemma 2/3's sliding_window_pattern as
// llama.cpp reads it (get_key_or_arr, then set_swa_pattern): absent, the
// family's period (every other layer for Gemma 2, five of six for Gemma
// 3); a period n, every layer but each n-th; 0, every layer (what synth
// writes for tiny-gemma3-swa: TestWriteLoads); an array, a flag a layer;
// an array of the wrong length is refused.
func TestGGUFGemmaSlidingPattern(t *testing.T) {
	value := func(v gguf.Value) *gguf.Value { return &v }
	T, F := true, false
	for _, tc := range []struct {
		name  string
		shape string
		value *gguf.Value // nil: the key left out
		want  []bool
		err   string
	}{
		{"gemma2 default", "tiny-gemma2", nil, []bool{T, F, T}, ""},
		{"gemma3 default", "tiny-gemma3", nil, []bool{T, T, T, T, T, F, T}, ""},
		{"period 3", "tiny-gemma3", value(gguf.Uint32Value(3)), []bool{T, T, F, T, T, F, T}, ""},
		{"period 0", "tiny-gemma3", value(gguf.Uint32Value(0)), []bool{T, T, T, T, T, T, T}, ""},
		{"flags", "tiny-gemma3", value(gguf.ArrayValue([]bool{F, T, T, F, T, T, T})), []bool{F, T, T, F, T, T, T}, ""},
		{"short flags", "tiny-gemma3", value(gguf.ArrayValue([]bool{T, T})), nil, "2 values for 7 layers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := rewriteGGUF(t, tc.shape, func(kv []gguf.KV, ts []gguf.WriteTensor) ([]gguf.KV, []gguf.WriteTensor) {
				kv = slices.DeleteFunc(kv, func(x gguf.KV) bool { return strings.HasSuffix(x.Key, ".attention.sliding_window_pattern") })
				if tc.value != nil {
					kv = append(kv, gguf.KV{Key: "gemma3.attention.sliding_window_pattern", Value: *tc.value})
				}
				return kv, ts
			})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Config.Sliding; !slices.Equal(got, tc.want) {
				t.Errorf("sliding %v, want %v", got, tc.want)
			}
		})
	}
}
