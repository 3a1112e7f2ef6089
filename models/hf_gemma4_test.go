package models_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/safetensors"
	"github.com/tessera-llm/tessera/models/synth"
)

// gemma4E2B is google/gemma-4-E2B-it's config.json (testdata/README.md
// says where it comes from).
func gemma4E2B(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "gemma-4-e2b-it.config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// editGemma4 is edit for the keys of config's text_config (a value of
// json.RawMessage("null") sets a key to null).
func editGemma4(t *testing.T, config string, keys map[string]any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(config), &m); err != nil {
		t.Fatal(err)
	}
	text, _ := json.Marshal(m["text_config"])
	return edit(t, config, map[string]any{"text_config": json.RawMessage(edit(t, string(text), keys))})
}

// gemma4Types is layer_types of n layers, every period-th full attention.
func gemma4Types(n, period int) []string {
	types := make([]string, n)
	for l := range types {
		types[l] = "sliding_attention"
		if (l+1)%period == 0 {
			types[l] = "full_attention"
		}
	}
	return types
}

// TestGemma4HFConfig: Gemma 4 E2B's published config.json gives the config
// of the GGUF llama.cpp converts from it (synth's gemma-4-e2b shape, which
// writes llama.cpp's keys), and so do E4B's, the 31B's (global layers
// without v_proj, their own kv heads) and the 26B-A4B's (experts) text
// configs, as published, and E2B's as a flat Gemma4ForCausalLM's; each
// thing the forward pass does not do, or that transformers and the
// converter read differently, is refused by name.
func TestGemma4HFConfig(t *testing.T) {
	e2b := gemma4E2B(t)
	null := json.RawMessage("null")
	bigRope := map[string]any{ // the 31B's and 26B-A4B's rope_parameters: E2B's
		"full_attention":    map[string]any{"partial_rotary_factor": 0.25, "rope_theta": 1e6, "rope_type": "proportional"},
		"sliding_attention": map[string]any{"rope_theta": 10000.0, "rope_type": "default"},
	}
	var flat map[string]any
	if err := json.Unmarshal([]byte(e2b), &flat); err != nil {
		t.Fatal(err)
	}
	causal := flat["text_config"].(map[string]any)
	causal["architectures"] = []string{"Gemma4ForCausalLM"}
	causalJSON, _ := json.Marshal(causal)
	thirtyOne := editGemma4(t, e2b, map[string]any{"hidden_size": 5376, "num_hidden_layers": 60, "intermediate_size": 21504,
		"num_attention_heads": 32, "num_key_value_heads": 16, "num_global_key_value_heads": 4, "attention_k_eq_v": true,
		"hidden_size_per_layer_input": 0, "num_kv_shared_layers": 0, "use_double_wide_mlp": false, "sliding_window": 1024,
		"max_position_embeddings": 262144, "layer_types": gemma4Types(60, 6), "rope_parameters": bigRope})
	for _, tc := range []struct{ shape, config string }{
		{"gemma-4-e2b", e2b},
		{"gemma-4-e2b", string(causalJSON)},
		{"gemma-4-e4b", editGemma4(t, e2b, map[string]any{"hidden_size": 2560, "num_hidden_layers": 42, "intermediate_size": 10240,
			"num_key_value_heads": 2, "num_kv_shared_layers": 18, "use_double_wide_mlp": false, "layer_types": gemma4Types(42, 6)})},
		{"gemma-4-31b", thirtyOne},
		// Without layer_types and rope_parameters: transformers' defaults,
		// the 31B's pattern and rotation.
		{"gemma-4-31b", editGemma4(t, thirtyOne, map[string]any{"layer_types": nil, "rope_parameters": nil})},
		{"gemma-4-26b-a4b", editGemma4(t, e2b, map[string]any{"hidden_size": 2816, "num_hidden_layers": 30, "intermediate_size": 2112,
			"num_attention_heads": 16, "num_key_value_heads": 8, "num_global_key_value_heads": 2, "attention_k_eq_v": true,
			"hidden_size_per_layer_input": null, "num_kv_shared_layers": 0, "use_double_wide_mlp": false, "sliding_window": 1024,
			"enable_moe_block": true, "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704,
			"max_position_embeddings": 262144, "layer_types": gemma4Types(30, 6), "rope_parameters": bigRope})},
	} {
		s, err := synth.Lookup(tc.shape)
		if err != nil {
			t.Fatal(err)
		}
		got, err := models.ParseHFConfig([]byte(tc.config))
		if err != nil {
			t.Fatalf("%s: %v", tc.shape, err)
		}
		if !reflect.DeepEqual(got, s.Config) {
			t.Errorf("%s: config\n%+v\n%+v, want\n%+v\n%+v", tc.shape, got, *got.Gemma4, s.Config, *s.Config.Gemma4)
		}
	}

	for _, tc := range []struct{ name, config, want string }{
		{"bidirectional", editGemma4(t, e2b, map[string]any{"use_bidirectional_attention": "all"}), `use_bidirectional_attention "all"`},
		{"last sliding", editGemma4(t, e2b, map[string]any{"layer_types": gemma4Types(35, 36)}), "last of layer_types is sliding_attention"},
		{"layer type", editGemma4(t, e2b, map[string]any{"layer_types": append(gemma4Types(34, 5), "linear_attention")}), `layer_types[34] "linear_attention"`},
		{"layer count", editGemma4(t, e2b, map[string]any{"layer_types": gemma4Types(30, 5)}), "30 layer_types for 35 layers"},
		{"full rope", editGemma4(t, e2b, map[string]any{"rope_parameters": map[string]any{
			"full_attention":    map[string]any{"rope_type": "default", "rope_theta": 1e6},
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 1e4}}}), `full_attention rope_type "default"`},
		{"no factor", editGemma4(t, e2b, map[string]any{"rope_parameters": map[string]any{
			"full_attention":    map[string]any{"rope_type": "proportional", "rope_theta": 1e6},
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 1e4}}}), "needs a partial_rotary_factor"},
		{"odd factor", editGemma4(t, e2b, map[string]any{"rope_parameters": map[string]any{
			"full_attention":    map[string]any{"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.3},
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 1e4}}}), "partial_rotary_factor 0.3 of 256 pairs"},
		{"sliding yarn", editGemma4(t, e2b, map[string]any{"rope_parameters": map[string]any{
			"full_attention":    map[string]any{"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25},
			"sliding_attention": map[string]any{"rope_type": "yarn", "rope_theta": 1e4}}}), `sliding_attention rope_type "yarn"`},
		{"no sliding rope", editGemma4(t, e2b, map[string]any{"rope_parameters": map[string]any{
			"full_attention": map[string]any{"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25}}}), "rope_parameters has no sliding_attention"},
		{"rope kind", editGemma4(t, e2b, map[string]any{"rope_parameters": map[string]any{"chunked_attention": map[string]any{}}}), "rope_parameters.chunked_attention"},
		{"k eq v", editGemma4(t, e2b, map[string]any{"attention_k_eq_v": true}), "attention_k_eq_v without num_global_key_value_heads"},
		{"per-layer vocab", editGemma4(t, e2b, map[string]any{"vocab_size_per_layer_input": 262400}), "vocab_size_per_layer_input 262400"},
		{"shared", editGemma4(t, e2b, map[string]any{"num_kv_shared_layers": 35}), "num_kv_shared_layers 35"},
		{"shared kinds", editGemma4(t, e2b, map[string]any{"num_kv_shared_layers": 19}), "must be sliding then global"},
		{"experts", editGemma4(t, e2b, map[string]any{"enable_moe_block": true}), "enable_moe_block"},
		{"huge heads", editGemma4(t, e2b, map[string]any{"global_head_dim": 1 << 40}), "global_head_dim 1099511627776 is implausibly large"},
		{"huge depth", editGemma4(t, e2b, map[string]any{"num_hidden_layers": 1 << 40}), "num_hidden_layers 1099511627776 is implausibly large"},
		{"negative heads", editGemma4(t, e2b, map[string]any{"global_head_dim": -2}), "global_head_dim -2 must not be negative"},
		{"negative sliding heads", editGemma4(t, e2b, map[string]any{"head_dim": -2}), "head dim -2"},
		{"zero kv heads", editGemma4(t, e2b, map[string]any{"num_global_key_value_heads": 0}), "kv head"},
		{"negative window", editGemma4(t, e2b, map[string]any{"sliding_window": -1}), "sliding_window -1"},
		{"negative per-layer", editGemma4(t, e2b, map[string]any{"hidden_size_per_layer_input": -4}), "per-layer embedding width -4"},
		{"activation", editGemma4(t, e2b, map[string]any{"hidden_activation": "silu"}), `hidden_activation "silu"`},
		{"top rotary", editGemma4(t, e2b, map[string]any{"partial_rotary_factor": 0.5}), "partial_rotary_factor 0.5"},
		{"no text_config", edit(t, e2b, map[string]any{"text_config": nil}), "without a text_config"},
		{"unified", edit(t, e2b, map[string]any{"architectures": []string{"Gemma4UnifiedForConditionalGeneration"}}), `unsupported architecture "Gemma4UnifiedForConditionalGeneration"`},
	} {
		_, err := models.ParseHFConfig([]byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestGemma4HFTensors: a Gemma 4 folder's tensors load as llama.cpp's
// converter writes them: every norm as stored (no 1 + w), layer_scalar,
// router.scale and router.per_expert_scale as layer_output_scale,
// ffn_gate_inp.scale and ffn_down_exps.scale, experts.gate_up_proj split
// into each expert's gate rows (the first half) and up rows; and the
// tensors outside the text model's forward pass (the vision tower, the
// shared layers' keys and values that older checkpoints carry) are left
// unread, while any other stray tensor is refused by name.
func TestGemma4HFTensors(t *testing.T) {
	s, err := synth.Lookup("tiny-gemma4-moe")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "g")
	if err := synth.WriteHF(dir, s, dtype.F32, 3, synth.HFOptions{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	m, err := models.Open(dir, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	folder := func(name string) []float32 {
		st, ok := set.Tensor("model.language_model.layers.1." + name)
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
		tn, ok := m.Tensors[name]
		if !ok {
			t.Fatalf("model lacks %s", name)
		}
		v, err := tn.Float32()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for hf, gguf := range map[string]string{
		"input_layernorm.weight":              "blk.1.attn_norm.weight",
		"self_attn.q_norm.weight":             "blk.1.attn_q_norm.weight",
		"post_feedforward_layernorm_2.weight": "blk.1.post_ffw_norm_2.weight",
		"layer_scalar":                        "blk.1.layer_output_scale.weight",
		"router.scale":                        "blk.1.ffn_gate_inp.scale",
		"router.per_expert_scale":             "blk.1.ffn_down_exps.scale",
		"experts.down_proj":                   "blk.1.ffn_down_exps.weight",
	} {
		if !slices.Equal(loaded(gguf), folder(hf)) {
			t.Errorf("%s is not the folder's %s as stored", gguf, hf)
		}
	}
	e, f, d := s.Config.MoE.Experts, s.Config.MoE.FFN, s.Config.Dim
	gateUp, gate, up := folder("experts.gate_up_proj"), loaded("blk.1.ffn_gate_exps.weight"), loaded("blk.1.ffn_up_exps.weight")
	for x := range e {
		at := x * 2 * f * d
		if !slices.Equal(gate[x*f*d:(x+1)*f*d], gateUp[at:at+f*d]) || !slices.Equal(up[x*f*d:(x+1)*f*d], gateUp[at+f*d:at+2*f*d]) {
			t.Errorf("expert %d's gate and up are not the first and second halves of its gate_up_proj rows", x)
		}
	}

	// BF16, as the published checkpoints store the matrices: the experts
	// split all the same.
	bf := filepath.Join(t.TempDir(), "bf16")
	if err := synth.WriteHF(bf, s, dtype.BF16, 3, synth.HFOptions{}); err != nil {
		t.Fatal(err)
	}
	mb, err := models.Open(bf, models.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	for name, tn := range mb.Tensors {
		if _, err := tn.Float32(); err != nil {
			t.Errorf("bf16 %s: %v", name, err)
		}
	}
	if g := mb.Tensors["blk.1.ffn_gate_exps.weight"]; g == nil || g.Type != dtype.BF16 || !slices.Equal(g.Shape, []int{e, f, d}) {
		t.Errorf("bf16 gate experts %v", g)
	}

	// Tensors a published checkpoint may add: the vision tower's, and
	// keys and values of a layer that reads another's (tiny-gemma4's last
	// three layers); then one the forward pass has no place for.
	shared, err := synth.Lookup("tiny-gemma4")
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "shared")
	if err := synth.WriteHF(dir, shared, dtype.F32, 3, synth.HFOptions{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	c := shared.Config
	last := c.Layers - 1
	extra := func(name string, shape ...int) safetensors.WriteTensor {
		n := 1
		for _, x := range shape {
			n *= x
		}
		b, _ := dtype.Quantize(dtype.F32, make([]float32, n))
		return safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shape, Data: b}
	}
	p := "model.language_model.layers."
	kv := c.LayerKVHeads(last) * c.LayerHeadDim(last)
	addShard(t, dir, "extra.safetensors", []safetensors.WriteTensor{
		extra("model.vision_tower.encoder.layers.0.mlp.up_proj.linear.weight", 4, 4),
		extra(p+"8.self_attn.k_proj.weight", kv, c.Dim),
		extra(p+"8.self_attn.v_proj.weight", kv, c.Dim),
		extra(p+"8.self_attn.k_norm.weight", c.LayerHeadDim(last)),
	})
	if m, err := models.Open(dir, models.Options{}); err != nil {
		t.Errorf("with the vision tower and the shared layers' keys and values: %v", err)
	} else {
		m.Close()
	}
	addShard(t, dir, "stray.safetensors", []safetensors.WriteTensor{extra(p+"2.self_attn.rel_pos.weight", 4)})
	if _, err := models.Open(dir, models.Options{}); err == nil || !strings.Contains(err.Error(), "layers.2.self_attn.rel_pos.weight") {
		t.Errorf("a stray tensor: error %v, want it named", err)
	}
}

// addShard writes tensors to file name of folder dir and lists them in
// its model.safetensors.index.json.
func addShard(t *testing.T, dir, name string, tensors []safetensors.WriteTensor) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(f, nil, tensors); err != nil {
		t.Fatal(err)
	}
	f.Close()
	path := filepath.Join(dir, safetensors.IndexFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var index struct {
		Metadata  map[string]any    `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		t.Fatal(err)
	}
	for _, tn := range tensors {
		index.WeightMap[tn.Name] = name
	}
	raw, _ = json.Marshal(index)
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
