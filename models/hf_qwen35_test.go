package models_test

import (
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/safetensors"
	"github.com/tessera-llm/tessera/models/synth"
)

// qwen35Config is Qwen/Qwen3.5-0.8B's config.json, the vision part cut:
// the text model's keys under text_config, tie_word_embeddings at the top.
const qwen35Config = `{
  "architectures": ["Qwen3_5ForConditionalGeneration"],
  "model_type": "qwen3_5",
  "tie_word_embeddings": true,
  "image_token_id": 248056,
  "vision_config": {"depth": 12, "hidden_size": 768},
  "text_config": {
    "attention_bias": false, "attention_dropout": 0.0, "attn_output_gate": true, "dtype": "bfloat16",
    "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3584,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
    "linear_num_value_heads": 16, "linear_value_head_dim": 128, "max_position_embeddings": 262144,
    "mlp_only_layers": [], "model_type": "qwen3_5_text", "mtp_num_hidden_layers": 1,
    "num_attention_heads": 8, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
    "rope_parameters": {"mrope_interleaved": true, "mrope_section": [11, 11, 10], "rope_type": "default",
      "rope_theta": 10000000, "partial_rotary_factor": 0.25},
    "use_cache": true, "vocab_size": 248320
  }
}`

// editText is edit for the keys of text_config.
func editText(t *testing.T, keys map[string]any) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(qwen35Config), &m); err != nil {
		t.Fatal(err)
	}
	text, _ := json.Marshal(m["text_config"])
	return edit(t, qwen35Config, map[string]any{"text_config": json.RawMessage(edit(t, string(text), keys))})
}

// qwen35Flat is qwen35Config as a Qwen3_5ForCausalLM's: the text model's
// keys at the top.
func qwen35Flat(t *testing.T) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(qwen35Config), &m); err != nil {
		t.Fatal(err)
	}
	text := m["text_config"].(map[string]any)
	text["architectures"], text["tie_word_embeddings"] = []string{"Qwen3_5ForCausalLM"}, true
	b, _ := json.Marshal(text)
	return string(b)
}

// TestQwen35HFConfig: Qwen3.5-0.8B's config.json gives the config of the
// GGUF llama.cpp converts from it (synth's qwen3.5-0.8b shape, which
// writes llama.cpp's keys), whether its layers are listed (layer_types)
// or follow full_attention_interval, with partial_rotary_factor where
// older configs kept it, and as a Qwen3_5ForCausalLM's flat config; and each thing the forward pass does not do is
// refused by name.
func TestQwen35HFConfig(t *testing.T) {
	s, err := synth.Lookup("qwen3.5-0.8b")
	if err != nil {
		t.Fatal(err)
	}
	want := s.Config
	for name, config := range map[string]string{
		"published":          qwen35Config,
		"interval":           editText(t, map[string]any{"layer_types": nil}),
		"rotary at top":      editText(t, map[string]any{"partial_rotary_factor": 0.25, "rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e7}}),
		"tie in text_config": edit(t, editText(t, map[string]any{"tie_word_embeddings": true}), map[string]any{"tie_word_embeddings": false}),
		"causal lm":          qwen35Flat(t),
	} {
		got, err := models.ParseHFConfig([]byte(config))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: config\n%+v, want\n%+v", name, got, want)
		}
	}
	for _, tc := range []struct{ name, config, want string }{
		{"no text_config", edit(t, qwen35Config, map[string]any{"text_config": nil}), "without a text_config"},
		{"ungated", editText(t, map[string]any{"attn_output_gate": false}), "attn_output_gate false"},
		{"value heads wider", editText(t, map[string]any{"linear_value_head_dim": 256}), "linear_value_head_dim 256"},
		{"layer type", editText(t, map[string]any{"layer_types": []string{"sliding_attention"}}), "1 layer_types for 24 layers"},
		{"heads", editText(t, map[string]any{"linear_num_value_heads": 24, "linear_num_key_heads": 16}), "16 key heads must divide its 24 value heads"},
		{"rotary", editText(t, map[string]any{"rope_parameters": map[string]any{"partial_rotary_factor": 0.3}}), "partial_rotary_factor 0.3"},
		{"moe", edit(t, qwen35Config, map[string]any{"architectures": []string{"Qwen3_5MoeForConditionalGeneration"}}), `unsupported architecture "Qwen3_5MoeForConditionalGeneration"`},
	} {
		_, err := models.ParseHFConfig([]byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestQwen35HFValueHeads: with 2 key heads and 4 value heads (tiny-qwen35),
// the folder's value heads, grouped by the key head they read (0, 1 read
// key head 0; 2, 3 key head 1), load in llama.cpp's tiled order, that of
// the converter's _reorder_v_heads: [G0_v0, G1_v0, G0_v1, G1_v1], the
// folder's heads 0, 2, 1, 3 (so that value head h reads key head h mod 2).
// A_log is −exp'd, the norms stored as w are 1 + w, linear_attn.norm as
// stored.
func TestQwen35HFValueHeads(t *testing.T) {
	s, err := synth.Lookup("tiny-qwen35")
	if err != nil {
		t.Fatal(err)
	}
	if lc := s.Config.Linear; lc.KHeads != 2 || lc.VHeads != 4 {
		t.Fatalf("tiny-qwen35 has %d key and %d value heads, want 2 and 4", lc.KHeads, lc.VHeads)
	}
	dir := filepath.Join(t.TempDir(), "q")
	if err := synth.WriteHF(dir, s, dtype.F32, 3, synth.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	m, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	folder := func(name string) []float32 {
		st, ok := set.Tensor("model.language_model.layers.0." + name)
		if !ok {
			t.Fatalf("folder lacks %s", name)
		}
		b, err := st.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float32, len(b)/4)
		if err := dtype.Dequantize(dtype.F32, b, v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	loaded := func(name string) []float32 {
		v, err := m.Tensors[name].Float32()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	order := []int{0, 2, 1, 3}
	dt, alog, beta := folder("linear_attn.dt_bias"), folder("linear_attn.A_log"), folder("linear_attn.in_proj_b.weight")
	gotDT, gotA, gotBeta := loaded("blk.0.ssm_dt.bias"), loaded(models.LinearA(0)), loaded("blk.0.ssm_beta.weight")
	dim := s.Config.Dim
	for h, src := range order {
		if gotDT[h] != dt[src] {
			t.Errorf("ssm_dt.bias[%d] = %g, folder's head %d %g", h, gotDT[h], src, dt[src])
		}
		if want := -float32(math.Exp(float64(alog[src]))); gotA[h] != want {
			t.Errorf("ssm_a[%d] = %g, want −exp(A_log[%d]) = %g", h, gotA[h], src, want)
		}
		if !reflect.DeepEqual(gotBeta[h*dim:(h+1)*dim], beta[src*dim:(src+1)*dim]) {
			t.Errorf("ssm_beta row %d is not the folder's row %d", h, src)
		}
	}
	norm, gotNorm := folder("input_layernorm.weight"), loaded("blk.0.attn_norm.weight")
	lin, gotLin := folder("linear_attn.norm.weight"), loaded("blk.0.ssm_norm.weight")
	if gotNorm[0] != norm[0]+1 || gotLin[0] != lin[0] {
		t.Errorf("attn_norm[0] %g (folder %g), ssm_norm[0] %g (folder %g): want 1 + w and w", gotNorm[0], norm[0], gotLin[0], lin[0])
	}
}
