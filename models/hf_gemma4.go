package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
)

// Gemma 4 from Hugging Face folders: Gemma4ForConditionalGeneration, as
// Google publishes the models (the text model's config under text_config,
// its tensors under model.language_model.; the vision and audio towers,
// model.vision_tower., model.embed_vision., model.audio_tower. and
// model.embed_audio., are left unread), or Gemma4ForCausalLM (flat, under
// model.). The folder describes the model llama.cpp's converter writes to
// GGUF (conversion/gemma.py, Gemma4Model), and the loader reads it the
// same way:
//
//   - global_head_dim is the full-attention layers' head width, head_dim
//     the sliding layers'; num_global_key_value_heads their kv heads where
//     set, num_key_value_heads otherwise; with attention_k_eq_v the full
//     layers have no v_proj (values are the keys' projection);
//   - the last num_kv_shared_layers layers read the keys and values of an
//     earlier layer and have no k_proj, v_proj or k_norm (a checkpoint that
//     carries them has them ignored, as transformers does), and with
//     use_double_wide_mlp their feed-forwards are twice intermediate_size;
//   - rope_parameters.full_attention is "proportional" RoPE over the whole
//     global head of which partial_rotary_factor of the pairs rotate: the
//     converter's rope_freqs of 1 for those and 1e30 for the rest, which is
//     Config.RopeFactors; rope_parameters.sliding_attention rotates whole
//     sliding heads at its own base;
//   - every norm is stored as it multiplies (no 1 + w, unlike Gemma 2/3);
//   - hidden_size_per_layer_input is the per-layer token embedding width
//     (embed_tokens_per_layer, per_layer_model_projection,
//     per_layer_projection_norm; per layer per_layer_input_gate,
//     per_layer_projection, post_per_layer_input_norm); layer_scalar is
//     each layer's output scale;
//   - enable_moe_block: beside each layer's MLP, num_experts experts of
//     moe_intermediate_size, top_k_experts a token: router.proj, its input
//     scale router.scale (ffn_gate_inp.scale), router.per_expert_scale
//     (ffn_down_exps.scale), experts.gate_up_proj [E, 2·ffn, dim] (each
//     expert's gate rows first, split into ffn_gate_exps and ffn_up_exps),
//     experts.down_proj, and the norms pre_feedforward_layernorm_2,
//     post_feedforward_layernorm_1 and _2.
//
// Keys left out take transformers' Gemma4TextConfig defaults. Where
// transformers and the converter read a key differently, the folder is
// refused by name rather than loaded as one of them: a last layer that is
// not full attention (transformers forces it to full, the converter keeps
// it), full-attention RoPE other than proportional (the converter asserts
// it); but num_global_key_value_heads is read as the converter reads it
// (above), the only rule that gives every synthetic Gemma 4 shape a
// folder, and one the published folders agree with. Bidirectional
// attention ("all") is refused: the forward pass is causal.

// hfGemma4Unused reports whether a Gemma 4 folder's tensor name is outside
// the text model's forward pass: the vision or audio tower and their
// embedders.
func hfGemma4Unused(name string) bool {
	for _, p := range []string{"model.vision_tower.", "model.embed_vision.", "model.audio_tower.", "model.embed_audio."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// hfGemma4GlobalNames are the per-layer embedding tensors outside the
// layers (under model., once ConditionalGeneration's prefix is cut).
var hfGemma4GlobalNames = map[string]string{
	"model.embed_tokens_per_layer.weight":     PerLayerTokenEmbd,
	"model.per_layer_model_projection.weight": PerLayerModelProj,
	"model.per_layer_projection_norm.weight":  PerLayerProjNorm,
}

// hfGemma4LayerNames is hfGemmaLayerNames with Gemma 4's layer tensors, as
// gguf-py's tensor_mapping names them.
var hfGemma4LayerNames = func() map[string]string {
	m := maps.Clone(hfGemmaLayerNames)
	maps.Copy(m, map[string]string{
		"layer_scalar":                        LayerOutScale + ".weight",
		"per_layer_input_gate.weight":         PerLayerInpGate + ".weight",
		"per_layer_projection.weight":         PerLayerProj + ".weight",
		"post_per_layer_input_norm.weight":    PerLayerPostNorm + ".weight",
		"router.proj.weight":                  FFNRouter + ".weight",
		"router.scale":                        FFNRouter + ".scale",
		"router.per_expert_scale":             FFNDownExps + ".scale",
		"pre_feedforward_layernorm_2.weight":  FFNPreNorm2 + ".weight",
		"post_feedforward_layernorm_1.weight": FFNPostNorm1 + ".weight",
		"post_feedforward_layernorm_2.weight": FFNPostNorm2 + ".weight",
		"experts.gate_up_proj":                FFNGateUpExps + ".weight",
		"experts.down_proj":                   FFNDownExps + ".weight",
	})
	return m
}()

// hfGemma4Rope is one kind of layer's entry of Gemma 4's rope_parameters.
type hfGemma4Rope struct {
	RopeType            string   `json:"rope_type"`
	RopeTheta           *float64 `json:"rope_theta"`
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
}

// hfGemma4Config is what Gemma 4's text config adds to hfConfig.
type hfGemma4Config struct {
	GlobalHeadDim             *int                     `json:"global_head_dim"`
	NumGlobalKeyValueHeads    *int                     `json:"num_global_key_value_heads"`
	AttentionKEqV             bool                     `json:"attention_k_eq_v"`
	NumKVSharedLayers         int                      `json:"num_kv_shared_layers"`
	HiddenSizePerLayerInput   *int                     `json:"hidden_size_per_layer_input"`
	VocabSizePerLayerInput    *int                     `json:"vocab_size_per_layer_input"`
	UseDoubleWideMLP          bool                     `json:"use_double_wide_mlp"`
	EnableMoEBlock            bool                     `json:"enable_moe_block"`
	NumExperts                int                      `json:"num_experts"`
	TopKExperts               int                      `json:"top_k_experts"`
	NumExpertsPerTok          int                      `json:"num_experts_per_tok"`
	MoEIntermediateSize       int                      `json:"moe_intermediate_size"`
	ExpertIntermediateSize    int                      `json:"expert_intermediate_size"`
	UseBidirectionalAttention *string                  `json:"use_bidirectional_attention"`
	RopeParameters            map[string]*hfGemma4Rope `json:"rope_parameters"`
}

// gemma4HF reads Gemma 4's text config into c (ParseHFConfig has read
// the keys every family shares), with the defaults of transformers'
// Gemma4TextConfig for keys left out; a key set to null is left out but
// for the nullable ones (final_logit_softcapping,
// hidden_size_per_layer_input, num_global_key_value_heads), where null
// turns the feature off.
func gemma4HF(c *Config, h hfConfig, present map[string]json.RawMessage) error {
	var g4 hfGemma4Config
	raw, _ := json.Marshal(present)
	if err := json.Unmarshal(raw, &g4); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	null := func(key string) bool { v, ok := present[key]; return ok && string(v) == "null" }
	if b := g4.UseBidirectionalAttention; b != nil && *b == "all" {
		return errors.New(`config.json: use_bidirectional_attention "all" is not supported (the forward pass is causal)`)
	}
	c.Act, c.PostNorms, c.QKNorm, c.QueryScale = GELUTanh, true, true, 1
	c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	if h.NumKeyValueHeads == nil {
		c.KVHeads = 4 // Gemma4TextConfig's default
	}
	g := &Gemma4{LocalHeadDim: c.HeadDim, LocalKVHeads: c.KVHeads, SharedKV: g4.NumKVSharedLayers, PerLayer: 256}
	// The full layers' heads: global_head_dim, 512 when left out, the
	// sliding layers' width when null or 0 (transformers' rule).
	if v := g4.GlobalHeadDim; v != nil && *v > 0 {
		c.HeadDim = *v
	} else if _, ok := present["global_head_dim"]; !ok {
		c.HeadDim = 512
	}
	if v := g4.GlobalHeadDim; v != nil && *v < 0 {
		return fmt.Errorf("config.json: global_head_dim %d must not be negative", *v)
	}
	if c.HeadDim > maxHeadDim { // RoPE factors are allocated per pair
		return fmt.Errorf("config.json: global_head_dim %d is implausibly large (at most %d)", c.HeadDim, maxHeadDim)
	}
	// The full layers' kv heads: num_global_key_value_heads where set, as
	// the converter reads it (transformers reads it only with
	// attention_k_eq_v; the published folders set it only then, E2B's and
	// E4B's null).
	if v := g4.NumGlobalKeyValueHeads; v != nil {
		c.KVHeads = *v
	} else if g4.AttentionKEqV {
		return errors.New("config.json: attention_k_eq_v without num_global_key_value_heads")
	}
	if v := g4.HiddenSizePerLayerInput; v != nil {
		g.PerLayer = *v
	} else if null("hidden_size_per_layer_input") {
		g.PerLayer = 0
	}
	if v := g4.VocabSizePerLayerInput; g.PerLayer > 0 && v != nil && *v != c.Vocab {
		return fmt.Errorf("config.json: vocab_size_per_layer_input %d differs from vocab_size %d (llama.cpp's gemma4 reads one vocabulary)", *v, c.Vocab)
	}
	if g.SharedKV < 0 || g.SharedKV >= c.Layers {
		return fmt.Errorf("config.json: num_kv_shared_layers %d out of 0..%d", g.SharedKV, c.Layers-1)
	}

	// Layers: sliding or full; without layer_types, every sixth full and
	// the last (transformers' default; the converter needs the list).
	c.Sliding = make([]bool, c.Layers)
	for l := range c.Sliding {
		c.Sliding[l] = (l+1)%6 != 0 && l != c.Layers-1
	}
	if h.LayerTypes != nil {
		if len(h.LayerTypes) != c.Layers {
			return fmt.Errorf("config.json: %d layer_types for %d layers", len(h.LayerTypes), c.Layers)
		}
		for l, t := range h.LayerTypes {
			switch t {
			case "sliding_attention", "full_attention":
				c.Sliding[l] = t == "sliding_attention"
			default:
				return fmt.Errorf("config.json: layer_types[%d] %q is not supported (sliding_attention, full_attention)", l, t)
			}
		}
	}
	if c.Sliding[c.Layers-1] {
		return errors.New("config.json: the last of layer_types is sliding_attention (transformers makes it full_attention, llama.cpp's converter keeps it: refused as ambiguous)")
	}
	c.SlidingWindow = 512
	if raw, ok := present["sliding_window"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &c.SlidingWindow); err != nil || c.SlidingWindow <= 0 {
			return fmt.Errorf("config.json: sliding_window %s is not a positive integer", raw)
		}
	}
	if v := h.FinalLogitSoftcapping; v != nil {
		if !(*v >= 0) {
			return fmt.Errorf("config.json: final_logit_softcapping %g must not be negative", *v)
		}
		c.FinalSoftcap = float32(*v)
	}

	// Feed-forward widths: twice intermediate_size in the shared layers
	// with use_double_wide_mlp.
	g.FFNs = make([]int, c.Layers)
	for l := range g.FFNs {
		g.FFNs[l] = c.FFN
		if g4.UseDoubleWideMLP && g.SharedKV > 0 && l >= c.Layers-g.SharedKV {
			g.FFNs[l] = 2 * c.FFN
		}
	}
	c.FFN = 0
	for _, f := range g.FFNs {
		c.FFN = max(c.FFN, f)
	}
	if g4.AttentionKEqV {
		g.VFromK = make([]bool, c.Layers)
		for l := range c.Layers - g.SharedKV { // the shared layers store no keys or values
			g.VFromK[l] = !c.Sliding[l]
		}
	}

	if err := gemma4Rope(c, g, g4.RopeParameters, present); err != nil {
		return err
	}
	if g4.EnableMoEBlock {
		m := MoEConfig{Experts: g4.NumExperts, Used: g4.TopKExperts, FFN: g4.ExpertIntermediateSize, NormTopK: true}
		if m.Used == 0 {
			m.Used = g4.NumExpertsPerTok
		}
		if m.FFN == 0 {
			m.FFN = g4.MoEIntermediateSize
		}
		if err := m.validate(); err != nil {
			return fmt.Errorf("config.json: enable_moe_block: %w (num_experts, top_k_experts, moe_intermediate_size)", err)
		}
		c.MoE = m
	}
	c.Gemma4 = g
	return nil
}

// gemma4Rope reads rope_parameters (transformers' defaults when it is
// left out): the sliding layers' "default" RoPE at their rope_theta over
// whole heads, and the full layers' "proportional" RoPE, whose
// partial_rotary_factor of the global head's pairs rotate (RopeFactors: 1
// for those, 1e30, which stops a pair from turning, for the rest).
func gemma4Rope(c *Config, g *Gemma4, rp map[string]*hfGemma4Rope, present map[string]json.RawMessage) error {
	if _, ok := present["rope_parameters"]; !ok || rp == nil {
		quarter, local, global := 0.25, 10000.0, 1e6
		rp = map[string]*hfGemma4Rope{
			"sliding_attention": {RopeType: "default", RopeTheta: &local},
			"full_attention":    {RopeType: "proportional", RopeTheta: &global, PartialRotaryFactor: &quarter},
		}
	}
	for kind := range rp {
		if kind != "sliding_attention" && kind != "full_attention" {
			return fmt.Errorf("config.json: rope_parameters.%s is not a kind of Gemma 4 layer", kind)
		}
	}
	g.LocalRopeDim = g.LocalHeadDim
	c.RopeDim = c.HeadDim
	for _, kind := range []string{"sliding_attention", "full_attention"} {
		sliding := kind == "sliding_attention"
		used := false
		for _, s := range c.Sliding {
			used = used || s == sliding
		}
		p := rp[kind]
		if p == nil {
			if used {
				return fmt.Errorf("config.json: rope_parameters has no %s", kind)
			}
			continue
		}
		if p.RopeTheta == nil || !(*p.RopeTheta > 0) {
			return fmt.Errorf("config.json: rope_parameters.%s needs a positive rope_theta", kind)
		}
		if sliding {
			if p.RopeType != "default" {
				return fmt.Errorf("config.json: rope_parameters.sliding_attention rope_type %q is not supported (default)", p.RopeType)
			}
			if f := p.PartialRotaryFactor; f != nil && *f != 1 {
				return fmt.Errorf("config.json: rope_parameters.sliding_attention partial_rotary_factor %g is not supported (the sliding heads rotate whole)", *f)
			}
			c.LocalRopeTheta = *p.RopeTheta
			continue
		}
		if p.RopeType != "proportional" {
			return fmt.Errorf("config.json: rope_parameters.full_attention rope_type %q is not supported (proportional, as llama.cpp's converter requires)", p.RopeType)
		}
		if p.PartialRotaryFactor == nil {
			return errors.New("config.json: rope_parameters.full_attention needs a partial_rotary_factor")
		}
		f := *p.PartialRotaryFactor
		pairs := c.HeadDim / 2
		turn := f * float64(pairs)
		if !(f > 0 && f <= 1) || turn != math.Trunc(turn) {
			return fmt.Errorf("config.json: rope_parameters.full_attention partial_rotary_factor %g of %d pairs is not a whole number of pairs", f, pairs)
		}
		c.RopeTheta = *p.RopeTheta
		c.RopeFactors = make([]float32, pairs)
		for i := range c.RopeFactors {
			c.RopeFactors[i] = 1
			if i >= int(turn) {
				c.RopeFactors[i] = 1e30
			}
		}
	}
	return nil
}

// hfGemma4Tensors places what a Gemma 4 folder holds beyond one-to-one
// renamed tensors: each MoE layer's experts.gate_up_proj, split into the
// gate and up experts, and the shared layers' key and value tensors of
// checkpoints that carry them, dropped (the forward pass reads another
// layer's cache there). Their names are removed from left; find checks a
// tensor's dtype and shape.
func hfGemma4Tensors(m *Model, left map[string]bool, find func(name string, shape []int) (*Tensor, error)) error {
	c := m.Config
	prefix := hfTextPrefix
	if !left[prefix+"embed_tokens.weight"] {
		prefix = "model."
	}
	for l := c.Layers - c.Gemma4.SharedKV; l < c.Layers; l++ {
		for _, kind := range []string{"k_proj", "v_proj", "k_norm", "v_norm"} {
			delete(left, fmt.Sprintf("%slayers.%d.self_attn.%s.weight", prefix, l, kind))
		}
	}
	if !c.MoE.On() {
		return nil
	}
	for l := range c.Layers {
		name := fmt.Sprintf("%slayers.%d.experts.gate_up_proj", prefix, l)
		t, err := find(name, []int{c.MoE.Experts, 2 * c.MoE.FFN, c.Dim})
		if err != nil {
			return err
		}
		delete(left, name)
		g := LayerTensor(l, FFNGateUpExps)
		m.Tensors[g] = NewTensor(g, t.Shape, t.Type, t.Raw)
	}
	return splitGateUpExperts(m, c.Layers)
}
