package models_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/safetensors"
	"github.com/tessera-llm/tessera/models/synth"
)

// Published configs, cut to the keys that matter plus a few that do not.
const (
	llama32Config = `{"architectures":["LlamaForCausalLM"],"attention_bias":false,"bos_token_id":128000,
		"eos_token_id":128001,"head_dim":64,"hidden_act":"silu","hidden_size":2048,"initializer_range":0.02,
		"intermediate_size":8192,"max_position_embeddings":131072,"mlp_bias":false,"model_type":"llama",
		"num_attention_heads":32,"num_hidden_layers":16,"num_key_value_heads":8,"pretraining_tp":1,
		"rms_norm_eps":1e-05,"rope_scaling":{"factor":32.0,"high_freq_factor":4.0,"low_freq_factor":1.0,
		"original_max_position_embeddings":8192,"rope_type":"llama3"},"rope_theta":500000.0,
		"tie_word_embeddings":true,"torch_dtype":"bfloat16","use_cache":true,"vocab_size":128256}`
	tinyLlamaConfig = `{"architectures":["LlamaForCausalLM"],"bos_token_id":1,"eos_token_id":2,"hidden_act":"silu",
		"hidden_size":2048,"intermediate_size":5632,"max_position_embeddings":2048,"model_type":"llama",
		"num_attention_heads":32,"num_hidden_layers":22,"num_key_value_heads":4,"rms_norm_eps":1e-05,
		"rope_scaling":null,"tie_word_embeddings":false,"torch_dtype":"bfloat16","vocab_size":32000}`
	mistral01Config = `{"architectures":["MistralForCausalLM"],"hidden_act":"silu","hidden_size":4096,
		"intermediate_size":14336,"max_position_embeddings":32768,"model_type":"mistral","num_attention_heads":32,
		"num_hidden_layers":32,"num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_theta":10000.0,
		"sliding_window":4096,"tie_word_embeddings":false,"vocab_size":32000}`
	mistral03Config = `{"architectures":["MistralForCausalLM"],"head_dim":128,"hidden_act":"silu","hidden_size":4096,
		"intermediate_size":14336,"max_position_embeddings":32768,"model_type":"mistral","num_attention_heads":32,
		"num_hidden_layers":32,"num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_theta":1000000.0,
		"sliding_window":null,"tie_word_embeddings":false,"vocab_size":32768}`
	qwen25Config = `{"architectures":["Qwen2ForCausalLM"],"attention_dropout":0.0,"bos_token_id":151643,
		"eos_token_id":151643,"hidden_act":"silu","hidden_size":896,"intermediate_size":4864,
		"max_position_embeddings":32768,"max_window_layers":24,"model_type":"qwen2","num_attention_heads":14,
		"num_hidden_layers":24,"num_key_value_heads":2,"rms_norm_eps":1e-06,"rope_theta":1000000.0,
		"sliding_window":32768,"tie_word_embeddings":true,"torch_dtype":"bfloat16","use_sliding_window":false,
		"vocab_size":151936}`
	qwen3Config = `{"architectures":["Qwen3ForCausalLM"],"attention_bias":false,"head_dim":128,"hidden_act":"silu",
		"hidden_size":1024,"intermediate_size":3072,"max_position_embeddings":40960,"max_window_layers":28,
		"model_type":"qwen3","num_attention_heads":16,"num_hidden_layers":28,"num_key_value_heads":8,
		"rms_norm_eps":1e-06,"rope_scaling":null,"rope_theta":1000000,"sliding_window":null,
		"tie_word_embeddings":true,"use_sliding_window":false,"vocab_size":151936}`
)

// The published configs of google/gemma-2-2b-it and google/gemma-3-1b-it.
const (
	gemma2Config = `{"architectures":["Gemma2ForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
		"attn_logit_softcapping":50.0,"bos_token_id":2,"cache_implementation":"hybrid","eos_token_id":[1,107],
		"final_logit_softcapping":30.0,"head_dim":256,"hidden_act":"gelu_pytorch_tanh",
		"hidden_activation":"gelu_pytorch_tanh","hidden_size":2304,"initializer_range":0.02,
		"intermediate_size":9216,"max_position_embeddings":8192,"model_type":"gemma2","num_attention_heads":8,
		"num_hidden_layers":26,"num_key_value_heads":4,"pad_token_id":0,"query_pre_attn_scalar":256,
		"rms_norm_eps":1e-06,"rope_theta":10000.0,"sliding_window":4096,"torch_dtype":"float32",
		"transformers_version":"4.42.4","use_cache":true,"vocab_size":256000}`
	gemma3Config = `{"architectures":["Gemma3ForCausalLM"],"attention_bias":false,"attention_dropout":0.0,
		"attn_logit_softcapping":null,"bos_token_id":2,"cache_implementation":"hybrid","eos_token_id":[1,106],
		"final_logit_softcapping":null,"head_dim":256,"hidden_activation":"gelu_pytorch_tanh","hidden_size":1152,
		"initializer_range":0.02,"intermediate_size":6912,"max_position_embeddings":32768,
		"model_type":"gemma3_text","num_attention_heads":4,"num_hidden_layers":26,"num_key_value_heads":1,
		"pad_token_id":0,"query_pre_attn_scalar":256,"rms_norm_eps":1e-06,"rope_local_base_freq":10000,
		"rope_scaling":null,"rope_theta":1000000,"sliding_window":512,"sliding_window_pattern":6,
		"torch_dtype":"bfloat16","transformers_version":"4.50.0.dev0","use_cache":true,"vocab_size":262144}`
)

// edit returns config with keys set (a nil value deletes the key).
func edit(t testing.TB, config string, keys map[string]any) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(config), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range keys {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseHFConfig(t *testing.T) {
	llama32 := models.Config{Arch: "llama", Dim: 2048, FFN: 8192, Layers: 16, Heads: 32, KVHeads: 8, HeadDim: 64,
		Vocab: 128256, Context: 131072, NormEps: 1e-5, RopeTheta: 500000, RopeDim: 64, Rope: models.RopeHalves,
		TiedEmbeddings: true, RopeFactors: models.Llama3RopeFactors(64, 500000, 32, 1, 4, 8192)}
	tinyLlama := models.Config{Arch: "llama", Dim: 2048, FFN: 5632, Layers: 22, Heads: 32, KVHeads: 4, HeadDim: 64,
		Vocab: 32000, Context: 2048, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 64, Rope: models.RopeHalves}
	mistral := models.Config{Arch: "mistral", Dim: 4096, FFN: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 32000, Context: 4096, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 128, Rope: models.RopeHalves}
	mistral03 := mistral
	mistral03.Vocab, mistral03.Context, mistral03.RopeTheta = 32768, 32768, 1e6
	mistral.Context, mistral.SlidingWindow, mistral.LocalRopeTheta = 32768, 4096, 10000
	mistral.Sliding = make([]bool, 32)
	for i := range mistral.Sliding {
		mistral.Sliding[i] = true
	}
	qwen25 := models.Config{Arch: "qwen2", Dim: 896, FFN: 4864, Layers: 24, Heads: 14, KVHeads: 2, HeadDim: 64,
		Vocab: 151936, Context: 32768, NormEps: 1e-6, RopeTheta: 1e6, RopeDim: 64, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKVBias: true}
	qwen3 := models.Config{Arch: "qwen3", Dim: 1024, FFN: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, Context: 40960, NormEps: 1e-6, RopeTheta: 1e6, RopeDim: 128, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKNorm: true}
	with := func(c models.Config, f func(*models.Config)) models.Config { f(&c); return c }
	shape := func(name string) models.Config {
		s, err := synth.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		return s.Config
	}
	gemma2, gemma3 := shape("gemma2-2b"), shape("gemma3-1b")
	fours := make([]float32, 128)
	for i := range fours {
		fours[i] = 4
	}
	allSliding := make([]bool, 26)
	for i := range allSliding {
		allSliding[i] = true
	}
	twos := make([]float32, 32)
	for i := range twos {
		twos[i] = 2
	}
	allSliding24, from20 := make([]bool, 24), make([]bool, 24)
	for i := range allSliding24 {
		allSliding24[i], from20[i] = true, i >= 20
	}
	for _, tc := range []struct {
		name   string
		config string
		want   models.Config
	}{
		{"llama 3.2", llama32Config, llama32},
		{"tinyllama: no head_dim", tinyLlamaConfig, tinyLlama},
		{"llama: defaults", edit(t, tinyLlamaConfig, map[string]any{"rms_norm_eps": nil, "num_key_value_heads": nil, "tie_word_embeddings": nil}),
			with(tinyLlama, func(c *models.Config) { c.NormEps, c.KVHeads = 1e-6, 32 })},
		{"llama: model_type only", edit(t, tinyLlamaConfig, map[string]any{"architectures": nil}), tinyLlama},
		{"mistral 0.1: every layer slides", mistral01Config, mistral},
		{"mistral: default sliding window", edit(t, mistral01Config, map[string]any{"sliding_window": nil}), mistral},
		{"mistral 0.3: no sliding window", mistral03Config, mistral03},
		{"qwen2.5: unused sliding window", qwen25Config, qwen25},
		// Qwen2's window covers the layers from max_window_layers on, as
		// transformers' Qwen2Config builds layer_types: none of 24 from
		// the 24th (the published config's), every one from 0, the last
		// four from 20; layer_types, where listed, say it.
		{"qwen2.5: sliding window on no layer", edit(t, qwen25Config, map[string]any{"use_sliding_window": true, "sliding_window": 4096}), qwen25},
		{"qwen2.5: default max_window_layers", edit(t, qwen25Config, map[string]any{"use_sliding_window": true, "sliding_window": 4096, "max_window_layers": nil}), qwen25},
		{"qwen2.5: sliding window on every layer", edit(t, qwen25Config, map[string]any{"use_sliding_window": true, "sliding_window": 4096, "max_window_layers": 0}),
			with(qwen25, func(c *models.Config) { c.SlidingWindow, c.LocalRopeTheta, c.Sliding = 4096, 1e6, allSliding24 })},
		{"qwen2.5: sliding window from layer 20", edit(t, qwen25Config, map[string]any{"use_sliding_window": true, "sliding_window": 4096, "max_window_layers": 20}),
			with(qwen25, func(c *models.Config) { c.SlidingWindow, c.LocalRopeTheta, c.Sliding = 4096, 1e6, from20 })},
		{"qwen2.5: layer_types", edit(t, qwen25Config, map[string]any{"use_sliding_window": true, "sliding_window": 4096, "layer_types": allSlidingTypes(24)}),
			with(qwen25, func(c *models.Config) { c.SlidingWindow, c.LocalRopeTheta, c.Sliding = 4096, 1e6, allSliding24 })},
		{"qwen2.5: scaled rope caps the context", edit(t, qwen25Config, map[string]any{"use_sliding_window": true, "sliding_window": 4096, "max_window_layers": 0,
			"rope_scaling": map[string]any{"type": "linear", "factor": 2.0}}),
			with(qwen25, func(c *models.Config) { c.Context, c.RopeFactors = 4096, twos[:32] })},
		{"qwen3", qwen3Config, qwen3},
		{"qwen3: default head_dim", edit(t, qwen3Config, map[string]any{"head_dim": nil}), qwen3},
		{"transformers 5 rope_parameters", edit(t, tinyLlamaConfig, map[string]any{"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 20000.0}}),
			with(tinyLlama, func(c *models.Config) { c.RopeTheta = 20000 })},
		{"linear scaling", edit(t, tinyLlamaConfig, map[string]any{"rope_scaling": map[string]any{"type": "linear", "factor": 2.0}}),
			with(tinyLlama, func(c *models.Config) { c.RopeFactors = twos })},
		{"dynamic scaling", edit(t, tinyLlamaConfig, map[string]any{"max_position_embeddings": 8192, "rope_scaling": map[string]any{"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 2048}}),
			tinyLlama},
		{"default scaling", edit(t, tinyLlamaConfig, map[string]any{"rope_scaling": map[string]any{"rope_type": "default"}}), tinyLlama},
		{"swish", edit(t, tinyLlamaConfig, map[string]any{"hidden_act": "swish"}), tinyLlama},
		{"partial rotary 1", edit(t, tinyLlamaConfig, map[string]any{"partial_rotary_factor": 1.0}), tinyLlama},
		{"gemma 2", gemma2Config, gemma2},
		{"gemma 3", gemma3Config, gemma3},
		{"gemma 2 defaults", edit(t, gemma2Config, map[string]any{"attn_logit_softcapping": nil, "final_logit_softcapping": nil,
			"hidden_act": nil, "head_dim": nil, "rope_theta": nil, "sliding_window": nil, "query_pre_attn_scalar": nil}),
			with(gemma2, func(c *models.Config) { c.QueryScale = float32(1 / math.Sqrt(224)) })},
		{"gemma 2 without soft caps", strings.ReplaceAll(strings.ReplaceAll(gemma2Config, "50.0", "null"), "30.0", "null"),
			with(gemma2, func(c *models.Config) { c.AttnSoftcap, c.FinalSoftcap = 0, 0 })},
		{"gemma 3 layer_types, scaling", edit(t, gemma3Config, map[string]any{"layer_types": allSlidingTypes(26),
			"rope_scaling": map[string]any{"rope_type": "linear", "factor": 4.0}}),
			with(gemma3, func(c *models.Config) { c.Sliding, c.RopeFactors = allSliding, fours })},
		{"gemma 3 untied", edit(t, gemma3Config, map[string]any{"tie_word_embeddings": false}),
			with(gemma3, func(c *models.Config) { c.TiedEmbeddings = false })},
	} {
		got, err := models.ParseHFConfig([]byte(tc.config))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

// allSlidingTypes is a layer_types list of n sliding layers.
func allSlidingTypes(n int) []string {
	types := make([]string, n)
	for i := range types {
		types[i] = "sliding_attention"
	}
	return types
}

func TestParseHFConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string
		want   string
	}{
		{"not JSON", `{"architectures":`, "config.json"},
		{"gemma multimodal", edit(t, gemma3Config, map[string]any{"architectures": []string{"Gemma3ForConditionalGeneration"}}), `unsupported architecture "Gemma3ForConditionalGeneration"`},
		{"gemma exact gelu", edit(t, gemma3Config, map[string]any{"hidden_activation": "gelu"}), `hidden_activation "gelu"`},
		{"gemma layer_types", edit(t, gemma3Config, map[string]any{"layer_types": allSlidingTypes(3)}), "3 layer_types for 26 layers"},
		{"gemma layer type", edit(t, gemma3Config, map[string]any{"layer_types": append(allSlidingTypes(25), "chunked_attention")}), `"chunked_attention"`},
		{"gemma window", edit(t, gemma3Config, map[string]any{"sliding_window": 0}), "sliding_window 0"},
		{"gemma scalar", edit(t, gemma3Config, map[string]any{"query_pre_attn_scalar": -1}), "query_pre_attn_scalar -1"},
		{"gemma pattern", edit(t, gemma3Config, map[string]any{"sliding_window_pattern": 0}), "sliding_window_pattern 0"},
		{"unknown architecture", edit(t, tinyLlamaConfig, map[string]any{"architectures": []string{"GemmaForCausalLM"}}), `unsupported architecture "GemmaForCausalLM"`},
		{"no architecture", edit(t, tinyLlamaConfig, map[string]any{"architectures": nil, "model_type": "gpt2"}), `unsupported architecture "model_type gpt2"`},
		{"missing hidden_size", edit(t, tinyLlamaConfig, map[string]any{"hidden_size": nil}), "missing hidden_size"},
		{"zero layers", edit(t, tinyLlamaConfig, map[string]any{"num_hidden_layers": 0}), "num_hidden_layers 0 must be positive"},
		{"fractional width", edit(t, tinyLlamaConfig, map[string]any{"hidden_size": 2048.5}), "hidden_size"},
		{"kv heads", edit(t, tinyLlamaConfig, map[string]any{"num_key_value_heads": 5}), "kv head count 5"},
		{"odd head_dim", edit(t, tinyLlamaConfig, map[string]any{"head_dim": 63}), "head dim 63"},
		{"gelu", edit(t, tinyLlamaConfig, map[string]any{"hidden_act": "gelu"}), `hidden_act "gelu"`},
		{"mlp bias", edit(t, tinyLlamaConfig, map[string]any{"mlp_bias": true}), "mlp_bias"},
		{"attention bias", edit(t, tinyLlamaConfig, map[string]any{"attention_bias": true}), "attention_bias"},
		{"qwen3 attention bias", edit(t, qwen3Config, map[string]any{"attention_bias": true}), "attention_bias"},
		{"partial rotary", edit(t, tinyLlamaConfig, map[string]any{"partial_rotary_factor": 0.5}), "partial_rotary_factor"},
		{"quantized", edit(t, tinyLlamaConfig, map[string]any{"quantization_config": map[string]any{"quant_method": "gptq"}}), "quantization_config"},
		{"yarn", edit(t, tinyLlamaConfig, map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4.0}}), `rope scaling "yarn" is not supported`},
		{"bad llama3", edit(t, llama32Config, map[string]any{"rope_scaling": map[string]any{"rope_type": "llama3", "factor": 8.0}}), "llama3 rope_scaling needs"},
		{"bad sliding window", edit(t, mistral01Config, map[string]any{"sliding_window": "big"}), "sliding_window"},
		{"qwen2 max_window_layers", edit(t, qwen25Config, map[string]any{"use_sliding_window": true, "sliding_window": 4096, "max_window_layers": -1}),
			"max_window_layers -1 must not be negative"},
		{"qwen2 layer_types", edit(t, qwen25Config, map[string]any{"use_sliding_window": true, "sliding_window": 4096, "layer_types": allSlidingTypes(3)}),
			"3 layer_types for 24 layers"},
		{"huge head", edit(t, llama32Config, map[string]any{"hidden_size": 1 << 40, "num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": nil}), "implausibly large"},
		{"bad eps", edit(t, tinyLlamaConfig, map[string]any{"rms_norm_eps": -1}), "norm epsilon"},
	} {
		_, err := models.ParseHFConfig([]byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
		if strings.Contains(tc.name, "architecture") && !errors.Is(err, models.ErrUnsupportedArch) {
			t.Errorf("%s: %v is not ErrUnsupportedArch", tc.name, err)
		}
	}
}

func TestHFTensorNames(t *testing.T) {
	for hf, want := range map[string]string{
		"model.embed_tokens.weight":                       "token_embd.weight",
		"model.norm.weight":                               "output_norm.weight",
		"lm_head.weight":                                  "output.weight",
		"model.layers.0.input_layernorm.weight":           "blk.0.attn_norm.weight",
		"model.layers.12.post_attention_layernorm.weight": "blk.12.ffn_norm.weight",
		"model.layers.3.self_attn.q_proj.weight":          "blk.3.attn_q.weight",
		"model.layers.3.self_attn.k_proj.bias":            "blk.3.attn_k.bias",
		"model.layers.3.self_attn.v_proj.weight":          "blk.3.attn_v.weight",
		"model.layers.3.self_attn.o_proj.weight":          "blk.3.attn_output.weight",
		"model.layers.3.self_attn.q_norm.weight":          "blk.3.attn_q_norm.weight",
		"model.layers.3.self_attn.k_norm.weight":          "blk.3.attn_k_norm.weight",
		"model.layers.3.mlp.gate_proj.weight":             "blk.3.ffn_gate.weight",
		"model.layers.3.mlp.up_proj.weight":               "blk.3.ffn_up.weight",
		"model.layers.3.mlp.down_proj.weight":             "blk.3.ffn_down.weight",
	} {
		got, ok := models.HFTensorName("llama", hf)
		if !ok || got != want {
			t.Errorf("HFTensorName(%q) = %q, %v, want %q", hf, got, ok, want)
		}
		back, ok := models.GGUFToHFName("llama", want)
		if !ok || back != hf {
			t.Errorf("GGUFToHFName(%q) = %q, %v, want %q", want, back, ok, hf)
		}
	}
	// Every tensor of every family has a name both ways.
	c := models.Config{Layers: 2, Dim: 8, FFN: 8, Heads: 2, KVHeads: 1, HeadDim: 4, Vocab: 10, QKVBias: true, QKNorm: true}
	for _, tn := range models.LlamaTensors(c) {
		hf, ok := models.GGUFToHFName("llama", tn.Name)
		if !ok {
			t.Errorf("no HF name for %s", tn.Name)
		}
		if back, _ := models.HFTensorName("llama", hf); back != tn.Name {
			t.Errorf("%s → %s → %s", tn.Name, hf, back)
		}
	}
	// Gemma's four norms per layer.
	for hf, want := range map[string]string{
		"model.layers.2.input_layernorm.weight":            "blk.2.attn_norm.weight",
		"model.layers.2.post_attention_layernorm.weight":   "blk.2.post_attention_norm.weight",
		"model.layers.2.pre_feedforward_layernorm.weight":  "blk.2.ffn_norm.weight",
		"model.layers.2.post_feedforward_layernorm.weight": "blk.2.post_ffw_norm.weight",
	} {
		if got, ok := models.HFTensorName("gemma3", hf); !ok || got != want {
			t.Errorf("gemma3: HFTensorName(%q) = %q, %v, want %q", hf, got, ok, want)
		}
		if back, ok := models.GGUFToHFName("gemma2", want); !ok || back != hf {
			t.Errorf("gemma2: GGUFToHFName(%q) = %q, %v, want %q", want, back, ok, hf)
		}
	}
	if got, ok := models.HFTensorName("llama", "model.layers.2.pre_feedforward_layernorm.weight"); ok {
		t.Errorf("llama has Gemma's pre-feed-forward norm: %q", got)
	}
	for _, bad := range []string{"model.layers.x.self_attn.q_proj.weight", "model.layers.01.mlp.up_proj.weight",
		"model.layers.-1.mlp.up_proj.weight", "model.layers.3.mlp.act_fn", "model.layers.3", "transformer.wte.weight", ""} {
		if got, ok := models.HFTensorName("llama", bad); ok {
			t.Errorf("HFTensorName(%q) = %q", bad, got)
		}
	}
	for _, bad := range []string{"blk.x.attn_q.weight", "blk.1.attn_q", "rope_freqs.weight", "output"} {
		if got, ok := models.GGUFToHFName("llama", bad); ok {
			t.Errorf("GGUFToHFName(%q) = %q", bad, got)
		}
	}
}

// hfFolder writes a synthetic model as a Hugging Face folder.
func hfFolder(t *testing.T, shape string, opts synth.HFOptions) string {
	t.Helper()
	s, err := synth.Lookup(shape)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), shape)
	if err := synth.WriteHF(dir, s, dtype.F16, 7, opts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rewriteWeights replaces a folder's model.safetensors with what f makes
// of its tensors.
func rewriteWeights(t *testing.T, dir string, f func([]safetensors.WriteTensor) []safetensors.WriteTensor) {
	t.Helper()
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.WriteTensor
	for _, name := range set.TensorNames() {
		st, _ := set.Tensor(name)
		data, err := st.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: st.DType, Shape: st.Shape, Data: data})
	}
	set.Close()
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, nil, f(ts)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, safetensors.SingleFile), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func editConfig(t *testing.T, dir string, keys map[string]any) {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(edit(t, string(b), keys)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOpenHF(t *testing.T) {
	for _, shards := range []int{0, 4} {
		dir := hfFolder(t, "tiny-qwen3", synth.HFOptions{Shards: shards})
		m, err := models.Open(dir, models.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if m.Format != "hf" || m.Path != dir || !m.Config.QKNorm || m.Config.Rope != models.RopeHalves {
			t.Errorf("format %q, path %q, config %+v", m.Format, m.Path, m.Config)
		}
		w, err := m.Tensor(models.LayerTensor(1, models.AttnKNorm), 32)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := w.Float32(); err != nil || len(v) != 32 {
			t.Errorf("k norm: %v %v", v, err)
		}
		if got := m.Tokenizer.Decode(m.Tokenizer.Encode("abc def", true)); got != "abc def" {
			t.Errorf("tokenizer round trip %q", got)
		}
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestOpenHFTokenizerOption: a folder without tokenizer.json opens with a
// tokenizer named by Options.Tokenizer, and not without one.
func TestOpenHFTokenizerOption(t *testing.T) {
	dir := hfFolder(t, "tiny", synth.HFOptions{})
	tok := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.Rename(filepath.Join(dir, "tokenizer.json"), tok); err != nil {
		t.Fatal(err)
	}
	if _, err := models.Open(dir, models.Options{}); err == nil || !strings.Contains(err.Error(), "no tokenizer.json") {
		t.Errorf("error %v", err)
	}
	m, err := models.Open(dir, models.Options{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

func TestOpenHFErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shape  string
		break_ func(t *testing.T, dir string)
		want   string
		is     error
	}{
		{"empty folder", "tiny", func(t *testing.T, dir string) {
			os.RemoveAll(dir)
			os.Mkdir(dir, 0o755)
		}, "needs a Hugging Face config.json", models.ErrUnknownFormat},
		{"missing config.json", "tiny", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "config.json")) },
			"config.json", models.ErrUnknownFormat},
		{"unknown architecture", "tiny", func(t *testing.T, dir string) {
			editConfig(t, dir, map[string]any{"architectures": []string{"Phi3ForCausalLM"}})
		}, `"Phi3ForCausalLM"`, models.ErrUnsupportedArch},
		{"no weights", "tiny", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, safetensors.SingleFile)) },
			"has neither", nil},
		{"corrupt weights", "tiny", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, safetensors.SingleFile), []byte("\x02\x00\x00\x00\x00\x00\x00\x00[]"), 0o644)
		}, "does not start with '{'", nil},
		{"missing shard", "tiny", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
		}, "model-00002-of-00002.safetensors", nil},
		{"missing tensor", "tiny", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return dropTensor(ts, "model.layers.1.mlp.down_proj.weight")
			})
		}, "missing tensor model.layers.1.mlp.down_proj.weight (blk.1.ffn_down.weight)", nil},
		{"missing head", "tiny", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return dropTensor(ts, "lm_head.weight")
			})
		}, "missing tensor lm_head.weight", nil},
		{"missing bias", "tiny-qwen2", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return dropTensor(ts, "model.layers.0.self_attn.v_proj.bias")
			})
		}, "missing tensor model.layers.0.self_attn.v_proj.bias", nil},
		{"wrong shape", "tiny", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				for i := range ts {
					if ts[i].Name == "model.layers.0.mlp.up_proj.weight" {
						ts[i].Shape = []int{ts[i].Shape[1], ts[i].Shape[0]} // transposed
					}
				}
				return ts
			})
		}, "tensor model.layers.0.mlp.up_proj.weight has shape [64 96], want [96 64]", nil},
		{"wrong vocabulary", "tiny", func(t *testing.T, dir string) {
			editConfig(t, dir, map[string]any{"vocab_size": 400})
		}, "has shape [300 64], want [400 64]", nil},
		{"unsupported dtype", "tiny", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				for i := range ts {
					if ts[i].Name == "model.norm.weight" {
						ts[i].DType = safetensors.I32
					}
				}
				return ts
			})
		}, "model.norm.weight has dtype I32", nil},
		{"o_proj bias", "tiny", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return append(ts, safetensors.WriteTensor{Name: "model.layers.0.self_attn.o_proj.bias", DType: safetensors.F32, Shape: []int{64}, Data: make([]byte, 256)})
			})
		}, "does not use (it would compute another model): model.layers.0.self_attn.o_proj.bias", nil},
		{"q/k norms in a Llama", "tiny", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return append(ts, safetensors.WriteTensor{Name: "model.layers.0.self_attn.q_norm.weight", DType: safetensors.F32, Shape: []int{16}, Data: make([]byte, 64)})
			})
		}, "model.layers.0.self_attn.q_norm.weight", nil},
		{"extra layer", "tiny", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return append(ts, safetensors.WriteTensor{Name: "model.layers.2.input_layernorm.weight", DType: safetensors.F32, Shape: []int{64}, Data: make([]byte, 256)})
			})
		}, "model.layers.2.input_layernorm.weight", nil},
		{"unknown tensor", "tiny", func(t *testing.T, dir string) {
			rewriteWeights(t, dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return append(ts, safetensors.WriteTensor{Name: "vision_tower.patch_embed.weight", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
			})
		}, "vision_tower.patch_embed.weight", nil},
		{"bad tokenizer", "tiny", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model":{"type":"Unigram"}}`), 0o644)
		}, `model type "Unigram" is not supported`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shards := 0
			if tc.name == "missing shard" {
				shards = 2
			}
			dir := hfFolder(t, tc.shape, synth.HFOptions{Shards: shards})
			tc.break_(t, dir)
			m, err := models.Open(dir, models.Options{})
			if err == nil {
				m.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

// TestOpenHFIgnores: tensors that checkpoints carry but the forward pass
// does not need (a tied head's copy, RoPE's inverse frequencies) load.
func TestOpenHFIgnores(t *testing.T) {
	dir := hfFolder(t, "tiny-qwen2", synth.HFOptions{})
	rewriteWeights(t, dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		var embed safetensors.WriteTensor
		for _, w := range ts {
			if w.Name == "model.embed_tokens.weight" {
				embed = w
			}
		}
		embed.Name = "lm_head.weight"
		return append(ts, embed, safetensors.WriteTensor{Name: "model.layers.0.self_attn.rotary_emb.inv_freq", DType: safetensors.F32, Shape: []int{4}, Data: make([]byte, 16)})
	})
	m, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, ok := m.Tensors[models.Output]; ok {
		t.Error("tied model got an output tensor")
	}
}

func dropTensor(ts []safetensors.WriteTensor, name string) []safetensors.WriteTensor {
	var out []safetensors.WriteTensor
	for _, w := range ts {
		if w.Name != name {
			out = append(out, w)
		}
	}
	return out
}

// FuzzParseHFConfig: any config.json is refused with an error or gives a
// Config that validates; none panics or allocates without bound.
func FuzzParseHFConfig(f *testing.F) {
	for _, c := range []string{llama32Config, tinyLlamaConfig, mistral01Config, mistral03Config, qwen25Config, qwen3Config} {
		f.Add([]byte(c))
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "gemma-4-e2b-it.config.json")); err == nil {
		f.Add(b) // Gemma 4's nested config, its per-kind RoPE and layers
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := models.ParseHFConfig(b)
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
		if c.RopeFactors != nil && len(c.RopeFactors) != c.RopeDim/2 {
			t.Fatalf("%d RoPE factors for rope dim %d", len(c.RopeFactors), c.RopeDim)
		}
	})
}
