package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/internal/fileat"
	"github.com/tessera-llm/tessera/models/safetensors"
)

// Hugging Face folders: config.json, safetensors weights (one file or
// shards with an index) and tokenizer.json.
//
// Every Hugging Face checkpoint of these architectures rotates halves of
// each head (RopeHalves): unlike llama.cpp's converter, which permutes
// Llama's q and k rows so that adjacent pairs rotate, the weights are used
// as stored. Both describe the same model: the permutation only reorders
// the rows of q and k within each head, and attention scores are dot
// products, which do not depend on that order.

// hfArchs maps the architectures of config.json to Config.Arch.
var hfArchs = map[string]string{
	"LlamaForCausalLM":   "llama",
	"MistralForCausalLM": "mistral",
	"Qwen2ForCausalLM":   "qwen2",
	"Qwen3ForCausalLM":   "qwen3",
	"Gemma2ForCausalLM":  "gemma2",
	"Gemma3ForCausalLM":  "gemma3",
	"SmolLM3ForCausalLM": "smollm3", // layers without RoPE: no_rope_layers
	// Qwen3.5's hybrid linear attention (hf_qwen35.go); the published
	// folders are ConditionalGeneration, whose text model is read.
	"Qwen3_5ForCausalLM":              "qwen35",
	"Qwen3_5ForConditionalGeneration": "qwen35",
	// Gemma 4 (hf_gemma4.go): ConditionalGeneration as published, its
	// text model read.
	"Gemma4ForCausalLM":              "gemma4",
	"Gemma4ForConditionalGeneration": "gemma4",
	// Mixtures of experts (moe.go); Mixtral is Llama with experts.
	"MixtralForCausalLM":    "llama",
	"Qwen2MoeForCausalLM":   "qwen2moe",
	"Qwen3MoeForCausalLM":   "qwen3moe",
	"OlmoeForCausalLM":      "olmoe",
	"GraniteMoeForCausalLM": "granitemoe",
}

// HFConfigFile is the name of a Hugging Face folder's model configuration.
const HFConfigFile = "config.json"

// maxConfigSize bounds config.json; real ones are a few kilobytes.
const maxConfigSize = 16 << 20

// maxHeadDim bounds head_dim, far above any real model's (256), so that a
// corrupt config cannot make the loader allocate per-dimension tables of
// gigabytes.
const maxHeadDim = 1 << 16

// maxLayers bounds num_hidden_layers, far above any real model's (under
// 200), so that a corrupt config cannot make the loader allocate
// per-layer tables of gigabytes before it checks the tensors.
const maxLayers = 1 << 16

// hfConfig is the part of config.json the engine reads.
type hfConfig struct {
	Architectures         []string        `json:"architectures"`
	ModelType             string          `json:"model_type"`
	HiddenSize            int             `json:"hidden_size"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      *int            `json:"num_key_value_heads"`
	HeadDim               *int            `json:"head_dim"`
	VocabSize             int             `json:"vocab_size"`
	MaxPositionEmbeddings int             `json:"max_position_embeddings"`
	RMSNormEps            *float64        `json:"rms_norm_eps"`
	RopeTheta             *float64        `json:"rope_theta"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings"`
	RopeScaling           *hfRopeScaling  `json:"rope_scaling"`
	RopeParameters        *hfRopeScaling  `json:"rope_parameters"` // transformers 5
	HiddenAct             string          `json:"hidden_act"`
	HiddenActivation      string          `json:"hidden_activation"` // Gemma's spelling
	AttentionBias         bool            `json:"attention_bias"`
	MLPBias               bool            `json:"mlp_bias"`
	SlidingWindow         json.RawMessage `json:"sliding_window"`
	UseSlidingWindow      *bool           `json:"use_sliding_window"`
	MaxWindowLayers       *int            `json:"max_window_layers"` // Qwen2: the layers from this one on slide
	PartialRotaryFactor   *float64        `json:"partial_rotary_factor"`
	QuantizationConfig    json.RawMessage `json:"quantization_config"`
	// Gemma 2/3:
	QueryPreAttnScalar    *float64 `json:"query_pre_attn_scalar"`
	AttnLogitSoftcapping  *float64 `json:"attn_logit_softcapping"`
	FinalLogitSoftcapping *float64 `json:"final_logit_softcapping"`
	RopeLocalBaseFreq     *float64 `json:"rope_local_base_freq"`
	SlidingWindowPattern  *int     `json:"sliding_window_pattern"`
	LayerTypes            []string `json:"layer_types"`
	// SmolLM3: 1 for each layer that rotates, 0 for one without RoPE.
	NoRopeLayers []int `json:"no_rope_layers"`
	// Mixtures of experts (moe.go):
	NumLocalExperts     int             `json:"num_local_experts"` // Mixtral, Granite
	NumExperts          int             `json:"num_experts"`       // Qwen-MoE, OLMoE
	NumExpertsPerTok    int             `json:"num_experts_per_tok"`
	MoEIntermediateSize int             `json:"moe_intermediate_size"`
	SharedExpertSize    int             `json:"shared_expert_intermediate_size"`
	NormTopKProb        *bool           `json:"norm_topk_prob"`
	DecoderSparseStep   *int            `json:"decoder_sparse_step"`
	MLPOnlyLayers       []int           `json:"mlp_only_layers"`
	ClipQKV             json.RawMessage `json:"clip_qkv"`
	// Granite's multipliers:
	EmbeddingMultiplier *float64 `json:"embedding_multiplier"`
	ResidualMultiplier  *float64 `json:"residual_multiplier"`
	AttentionMultiplier *float64 `json:"attention_multiplier"`
	LogitsScaling       *float64 `json:"logits_scaling"`
	// Qwen3.5 (hf_qwen35.go):
	AttnOutputGate        *bool `json:"attn_output_gate"`
	LinearConvKernelDim   *int  `json:"linear_conv_kernel_dim"`
	LinearKeyHeadDim      *int  `json:"linear_key_head_dim"`
	LinearValueHeadDim    *int  `json:"linear_value_head_dim"`
	LinearNumKeyHeads     *int  `json:"linear_num_key_heads"`
	LinearNumValueHeads   *int  `json:"linear_num_value_heads"`
	FullAttentionInterval *int  `json:"full_attention_interval"`
}

// hfRopeScaling is rope_scaling (or transformers 5's rope_parameters).
type hfRopeScaling struct {
	RopeType       string   `json:"rope_type"`
	Type           string   `json:"type"` // the older spelling of rope_type
	RopeTheta      *float64 `json:"rope_theta"`
	Factor         float64  `json:"factor"`
	LowFreqFactor  float64  `json:"low_freq_factor"`
	HighFreqFactor float64  `json:"high_freq_factor"`
	OriginalMax    int      `json:"original_max_position_embeddings"`
	// transformers 5 keeps partial_rotary_factor here (Qwen3.5).
	PartialRotaryFactor *float64 `json:"partial_rotary_factor"`
}

// ParseHFConfig turns the contents of a Hugging Face config.json into a
// Config. It fails with ErrUnsupportedArch for architectures other than
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and
// Qwen3ForCausalLM, and with a clear error for variants the forward pass
// does not implement (o_proj or MLP biases, activations other than SiLU,
// partial rotary, RoPE scaling other than llama3, linear and dynamic).
func ParseHFConfig(data []byte) (Config, error) {
	var h hfConfig
	if err := json.Unmarshal(data, &h); err != nil {
		return Config{}, fmt.Errorf("config.json: %w", err)
	}
	var present map[string]json.RawMessage
	json.Unmarshal(data, &present) // cannot fail after the first
	if err := hfTextConfig(&h, &present); err != nil {
		return Config{}, err
	}

	hfArch := ""
	if len(h.Architectures) > 0 {
		hfArch = h.Architectures[0]
	}
	arch, ok := hfArchs[hfArch]
	if !ok && hfArch == "" && slices.Contains(slices.Collect(maps.Values(hfArchs)), h.ModelType) {
		arch, ok = h.ModelType, true // no architectures list: model_type names the family
	}
	if !ok {
		name := hfArch
		if name == "" {
			name = "model_type " + h.ModelType
		}
		return Config{}, fmt.Errorf("config.json: %w %q (supported: %s)", ErrUnsupportedArch, name,
			strings.Join(slices.Sorted(maps.Keys(hfArchs)), ", "))
	}
	if len(h.QuantizationConfig) > 0 && string(h.QuantizationConfig) != "null" {
		return Config{}, errors.New("config.json: quantized checkpoints (quantization_config) are not supported")
	}
	gemma := strings.HasPrefix(arch, "gemma")
	if act := h.HiddenAct; gemma {
		if h.HiddenActivation != "" {
			act = h.HiddenActivation
		}
		if act != "" && act != "gelu_pytorch_tanh" && act != "gelu_new" {
			return Config{}, fmt.Errorf("config.json: hidden_activation %q is not supported (want gelu_pytorch_tanh)", act)
		}
	} else if act != "" && act != "silu" && act != "swish" {
		return Config{}, fmt.Errorf("config.json: hidden_act %q is not supported (want silu)", act)
	}
	if h.MLPBias {
		return Config{}, errors.New("config.json: mlp_bias is not supported")
	}
	if h.AttentionBias && arch != "qwen2" && arch != "qwen2moe" {
		return Config{}, errors.New("config.json: attention_bias is not supported (it adds an o_proj bias)")
	}
	if f := h.PartialRotaryFactor; f != nil && *f != 1 && arch != "qwen35" {
		return Config{}, fmt.Errorf("config.json: partial_rotary_factor %g is not supported", *f)
	}
	for key, v := range map[string]int{"hidden_size": h.HiddenSize, "intermediate_size": h.IntermediateSize,
		"num_hidden_layers": h.NumHiddenLayers, "num_attention_heads": h.NumAttentionHeads,
		"vocab_size": h.VocabSize, "max_position_embeddings": h.MaxPositionEmbeddings} {
		if _, ok := present[key]; !ok {
			return Config{}, fmt.Errorf("config.json: missing %s", key)
		}
		if v <= 0 {
			return Config{}, fmt.Errorf("config.json: %s %d must be positive", key, v)
		}
	}
	if h.NumHiddenLayers > maxLayers {
		return Config{}, fmt.Errorf("config.json: num_hidden_layers %d is implausibly large (at most %d)", h.NumHiddenLayers, maxLayers)
	}

	c := Config{
		Arch:           arch,
		Dim:            h.HiddenSize,
		FFN:            h.IntermediateSize,
		Layers:         h.NumHiddenLayers,
		Heads:          h.NumAttentionHeads,
		KVHeads:        h.NumAttentionHeads,
		HeadDim:        h.HiddenSize / h.NumAttentionHeads,
		Vocab:          h.VocabSize,
		Context:        h.MaxPositionEmbeddings,
		NormEps:        1e-6, // the transformers default of all four
		RopeTheta:      10000,
		Rope:           RopeHalves,
		TiedEmbeddings: h.TieWordEmbeddings != nil && *h.TieWordEmbeddings,
		QKVBias:        arch == "qwen2" || arch == "qwen2moe",
		QKNorm:         arch == "qwen3" || arch == "qwen3moe" || arch == "olmoe",
		QKNormFull:     arch == "olmoe",
	}
	if err := moeHF(&c, hfArch, h); err != nil {
		return Config{}, err
	}
	if arch == "qwen3" || arch == "qwen3moe" {
		c.HeadDim = 128 // Qwen3Config's default
	}
	if gemma {
		c.HeadDim = 256 // Gemma2Config's and Gemma3TextConfig's default
		c.TiedEmbeddings = h.TieWordEmbeddings == nil || *h.TieWordEmbeddings
	}
	if h.NumKeyValueHeads != nil {
		c.KVHeads = *h.NumKeyValueHeads
	}
	if h.HeadDim != nil {
		c.HeadDim = *h.HeadDim
	}
	c.RopeDim = c.HeadDim
	if h.RMSNormEps != nil {
		c.NormEps = float32(*h.RMSNormEps)
	}
	if h.RopeTheta != nil {
		c.RopeTheta = *h.RopeTheta
	}

	// Mistral's sliding window covers every layer, Qwen2's
	// use_sliding_window the layers from max_window_layers on (below);
	// other families' use_sliding_window is not described to the forward
	// pass: attention is exact up to the window, so the context is capped
	// there rather than longer sequences computed wrongly.
	window := 0
	// Mixtral's attention slides like Mistral's when its sliding_window
	// is set; it is capped like Qwen2's.
	slidingActive := arch == "mistral" || hfArch == "MixtralForCausalLM" || (h.UseSlidingWindow != nil && *h.UseSlidingWindow)
	if raw, ok := present["sliding_window"]; slidingActive && ok && string(raw) != "null" {
		if err := json.Unmarshal(h.SlidingWindow, &window); err != nil || window <= 0 {
			return Config{}, fmt.Errorf("config.json: sliding_window %s is not a positive integer", h.SlidingWindow)
		}
	} else if slidingActive && !ok && arch == "mistral" {
		window = 4096 // MistralConfig's default
	}
	if window > 0 && arch != "mistral" && arch != "qwen2" {
		c.Context = min(c.Context, window)
	}
	if arch == "gemma4" {
		if err := gemma4HF(&c, h, present); err != nil {
			return Config{}, err
		}
	} else if gemma {
		if err := gemmaHF(&c, h, present); err != nil {
			return Config{}, err
		}
	}
	if arch == "smollm3" {
		c.NoRope = noRopeEvery(c.Layers, smollm3NoRopeStep) // SmolLM3Config's default
		if h.NoRopeLayers != nil {
			if len(h.NoRopeLayers) != c.Layers {
				return Config{}, fmt.Errorf("config.json: %d no_rope_layers for %d layers", len(h.NoRopeLayers), c.Layers)
			}
			for l, r := range h.NoRopeLayers {
				c.NoRope[l] = r == 0
			}
		}
	}

	if arch == "qwen35" {
		if err := qwen35HF(&c, h); err != nil {
			return Config{}, err
		}
	}

	rs := h.RopeScaling
	if arch == "gemma4" {
		rs = nil // rope_parameters per kind of layer, read by gemma4HF
	} else if h.RopeParameters != nil {
		rs = h.RopeParameters
		if rs.RopeTheta != nil {
			c.RopeTheta = *rs.RopeTheta
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("config.json: %w", err)
	}
	if c.HeadDim > maxHeadDim { // RoPE factors are allocated per dimension
		return Config{}, fmt.Errorf("config.json: head dim %d is implausibly large (at most %d)", c.HeadDim, maxHeadDim)
	}
	if rs != nil {
		kind := rs.RopeType
		if kind == "" {
			kind = rs.Type
		}
		switch kind {
		case "", "default":
		case "llama3":
			if rs.Factor <= 0 || rs.LowFreqFactor <= 0 || rs.HighFreqFactor <= rs.LowFreqFactor || rs.OriginalMax <= 0 {
				return Config{}, fmt.Errorf("config.json: llama3 rope_scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0, got %+v", *rs)
			}
			c.RopeFactors = Llama3RopeFactors(c.RopeDim, c.RopeTheta, rs.Factor, rs.LowFreqFactor, rs.HighFreqFactor, rs.OriginalMax)
		case "linear":
			// Positions divided by factor: every frequency divided by it.
			if !(rs.Factor > 0) {
				return Config{}, fmt.Errorf("config.json: linear rope_scaling factor %g must be positive", rs.Factor)
			}
			c.RopeFactors = linearRopeFactors(c.RopeDim, rs.Factor)
		case "dynamic":
			// Dynamic NTK scaling only changes RoPE past the original
			// context, so within it the model is unscaled.
			if rs.OriginalMax > 0 {
				c.Context = min(c.Context, rs.OriginalMax)
			}
		default:
			return Config{}, fmt.Errorf("config.json: rope scaling %q is not supported (supported: llama3, linear, dynamic)", kind)
		}
	}
	if window > 0 && (arch == "mistral" || arch == "qwen2") {
		sliding := slidingPattern(c.Layers, 0) // Mistral: every layer
		if arch == "qwen2" {
			var err error
			if sliding, err = qwen2Sliding(h, c.Layers); err != nil {
				return Config{}, err
			}
		}
		switch {
		case !slices.Contains(sliding, true): // Qwen2 whose max_window_layers is its layer count: no window
		case c.RopeFactors != nil: // sliding layers rotate unscaled: not these models'
			c.Context = min(c.Context, window)
		default:
			c.SlidingWindow, c.LocalRopeTheta, c.Sliding = window, c.RopeTheta, sliding
		}
	}
	return c, nil
}

// qwen2Sliding is which of Qwen2's layers slide once use_sliding_window
// is on: layer_types where the config lists them, else those from
// max_window_layers on (Qwen2Config's default 28), as transformers builds
// layer_types.
func qwen2Sliding(h hfConfig, layers int) ([]bool, error) {
	if h.LayerTypes != nil {
		return hfLayerTypes(h.LayerTypes, layers)
	}
	from := 28
	if h.MaxWindowLayers != nil {
		from = *h.MaxWindowLayers
	}
	if from < 0 {
		return nil, fmt.Errorf("config.json: max_window_layers %d must not be negative", from)
	}
	sliding := make([]bool, layers)
	for l := range sliding {
		sliding[l] = l >= from
	}
	return sliding, nil
}

// hfLayerTypes reads layer_types: each layer's sliding_attention or
// full_attention.
func hfLayerTypes(types []string, layers int) ([]bool, error) {
	if len(types) != layers {
		return nil, fmt.Errorf("config.json: %d layer_types for %d layers", len(types), layers)
	}
	sliding := make([]bool, layers)
	for l, t := range types {
		switch t {
		case "sliding_attention":
			sliding[l] = true
		case "full_attention":
		default:
			return nil, fmt.Errorf("config.json: layer_types[%d] %q is not supported (sliding_attention, full_attention)", l, t)
		}
	}
	return sliding, nil
}

// gemmaHF reads what Gemma 2 and 3 add to the Llama family, with the
// defaults of transformers' Gemma2Config and Gemma3TextConfig for keys a
// config leaves out (a key set to null turns a soft cap off).
func gemmaHF(c *Config, h hfConfig, present map[string]json.RawMessage) error {
	gemma2 := c.Arch == "gemma2"
	opt := func(key string, v *float64, def float64) float64 {
		if raw, ok := present[key]; !ok {
			return def
		} else if v == nil || string(raw) == "null" {
			return 0
		}
		return *v
	}
	c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	c.Act = GELUTanh
	c.PostNorms = true
	c.QKNorm = !gemma2
	scalar, window, pattern := 256.0, 4096, 6
	theta, local := 1e6, 10000.0
	if gemma2 {
		scalar, pattern, theta = 224, 2, 10000
		c.AttnSoftcap = float32(opt("attn_logit_softcapping", h.AttnLogitSoftcapping, 50))
		c.FinalSoftcap = float32(opt("final_logit_softcapping", h.FinalLogitSoftcapping, 30))
	} else {
		c.AttnSoftcap = float32(opt("attn_logit_softcapping", h.AttnLogitSoftcapping, 0))
		c.FinalSoftcap = float32(opt("final_logit_softcapping", h.FinalLogitSoftcapping, 0))
		local = opt("rope_local_base_freq", h.RopeLocalBaseFreq, local)
	}
	if h.RopeTheta == nil {
		c.RopeTheta = theta
	}
	if gemma2 {
		local = c.RopeTheta // one rotary embedding for every layer
	}
	scalar = opt("query_pre_attn_scalar", h.QueryPreAttnScalar, scalar)
	if raw, ok := present["sliding_window"]; ok {
		if err := json.Unmarshal(raw, &window); err != nil || window <= 0 {
			return fmt.Errorf("config.json: sliding_window %s is not a positive integer", raw)
		}
	}
	if h.SlidingWindowPattern != nil {
		pattern = *h.SlidingWindowPattern
	}
	switch {
	case !(scalar > 0):
		return fmt.Errorf("config.json: query_pre_attn_scalar %g must be positive", scalar)
	case !(local > 0):
		return fmt.Errorf("config.json: rope_local_base_freq %g must be positive", local)
	case pattern < 1:
		return fmt.Errorf("config.json: sliding_window_pattern %d must be positive", pattern)
	case c.AttnSoftcap < 0 || c.FinalSoftcap < 0:
		return fmt.Errorf("config.json: soft caps %g and %g must not be negative", c.AttnSoftcap, c.FinalSoftcap)
	}
	c.QueryScale = float32(1 / math.Sqrt(scalar))
	c.SlidingWindow, c.LocalRopeTheta = window, local
	c.Sliding = slidingPattern(c.Layers, pattern)
	if h.LayerTypes != nil {
		var err error
		if c.Sliding, err = hfLayerTypes(h.LayerTypes, c.Layers); err != nil {
			return err
		}
	}
	return nil
}

// hfGlobalNames maps the Hugging Face names of the tensors outside the
// layers to the GGUF names every loader uses.
var hfGlobalNames = map[string]string{
	"model.embed_tokens.weight": TokenEmbedding,
	"model.norm.weight":         OutputNorm,
	"lm_head.weight":            Output,
}

// hfLayerNames maps the names inside model.layers.N. to GGUF's inside blk.N.
var hfLayerNames = map[string]string{
	"input_layernorm.weight":          AttnNorm + ".weight",
	"post_attention_layernorm.weight": FFNNorm + ".weight",
	"self_attn.q_proj.weight":         AttnQ + ".weight",
	"self_attn.k_proj.weight":         AttnK + ".weight",
	"self_attn.v_proj.weight":         AttnV + ".weight",
	"self_attn.o_proj.weight":         AttnOutput + ".weight",
	"self_attn.q_proj.bias":           AttnQ + ".bias",
	"self_attn.k_proj.bias":           AttnK + ".bias",
	"self_attn.v_proj.bias":           AttnV + ".bias",
	"self_attn.o_proj.bias":           AttnOutput + ".bias",
	"self_attn.q_norm.weight":         AttnQNorm + ".weight",
	"self_attn.k_norm.weight":         AttnKNorm + ".weight",
	"mlp.gate_proj.weight":            FFNGate + ".weight",
	"mlp.up_proj.weight":              FFNUp + ".weight",
	"mlp.down_proj.weight":            FFNDown + ".weight",
	"mlp.gate_proj.bias":              FFNGate + ".bias",
	"mlp.up_proj.bias":                FFNUp + ".bias",
	"mlp.down_proj.bias":              FFNDown + ".bias",
}

// hfGemmaLayerNames is hfLayerNames for Gemma 2/3, whose
// post_attention_layernorm normalises the attention's output and which
// has norms before and after the feed-forward.
var hfGemmaLayerNames = func() map[string]string {
	m := maps.Clone(hfLayerNames)
	m["post_attention_layernorm.weight"] = AttnPostNorm + ".weight"
	m["pre_feedforward_layernorm.weight"] = FFNNorm + ".weight"
	m["post_feedforward_layernorm.weight"] = FFNPostNorm + ".weight"
	return m
}()

// hfQwen35LayerNames is hfLayerNames with Qwen3.5's linear-attention
// tensors (hf_qwen35.go changes their values as it places them).
var hfQwen35LayerNames = func() map[string]string {
	m := maps.Clone(hfLayerNames)
	maps.Copy(m, map[string]string{
		"linear_attn.in_proj_qkv.weight": LinQKV + ".weight",
		"linear_attn.in_proj_z.weight":   LinGate + ".weight",
		"linear_attn.in_proj_b.weight":   LinBeta + ".weight",
		"linear_attn.in_proj_a.weight":   LinAlpha + ".weight",
		"linear_attn.conv1d.weight":      LinConv + ".weight",
		"linear_attn.dt_bias":            LinDT + ".bias",
		"linear_attn.A_log":              LinA,
		"linear_attn.norm.weight":        LinNorm + ".weight",
		"linear_attn.out_proj.weight":    LinOut + ".weight",
	})
	return m
}()

// layerNames returns the layer tensor names of architecture arch.
func layerNames(arch string) map[string]string {
	if arch == "gemma4" {
		return hfGemma4LayerNames
	}
	if strings.HasPrefix(arch, "gemma") {
		return hfGemmaLayerNames
	}
	if arch == "qwen35" {
		return hfQwen35LayerNames
	}
	if m, ok := hfMoELayerNames[arch]; ok {
		return m
	}
	return hfLayerNames
}

// hfMoELayerNames is hfLayerNames with each MoE family's router and
// shared expert (hfMoENames).
var hfMoELayerNames = func() map[string]map[string]string {
	all := map[string]map[string]string{}
	for arch, extra := range hfMoENames {
		m := maps.Clone(hfLayerNames)
		maps.Copy(m, extra)
		all[arch] = m
	}
	return all
}()

// HFTensorName returns the GGUF name of a Hugging Face tensor name of a
// model of architecture arch (Config.Arch), e.g. "blk.3.attn_q.weight" for
// "model.layers.3.self_attn.q_proj.weight", or false for a name outside
// the Llama family's tensors.
func HFTensorName(arch, name string) (string, bool) {
	if rest, ok := strings.CutPrefix(name, hfTextPrefix); ok && (arch == "qwen35" || arch == "gemma4") {
		name = "model." + rest // ConditionalGeneration's text model
	}
	if g, ok := hfGlobalNames[name]; ok {
		return g, true
	}
	if g, ok := hfGemma4GlobalNames[name]; ok && arch == "gemma4" {
		return g, true
	}
	rest, ok := strings.CutPrefix(name, "model.layers.")
	if !ok {
		return "", false
	}
	num, kind, ok := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !ok || err != nil || l < 0 || strconv.Itoa(l) != num {
		return "", false
	}
	g, ok := layerNames(arch)[kind]
	if !ok {
		return "", false
	}
	return fmt.Sprintf("blk.%d.%s", l, g), true
}

// GGUFToHFName is the inverse of HFTensorName (for Qwen3.5 and Gemma 4,
// the name in a ConditionalGeneration folder, as Qwen and Google publish
// them).
func GGUFToHFName(arch, name string) (string, bool) {
	h, ok := ggufToHFName(arch, name)
	if rest, inModel := strings.CutPrefix(h, "model."); ok && inModel && (arch == "qwen35" || arch == "gemma4") {
		h = hfTextPrefix + rest
	}
	return h, ok
}

func ggufToHFName(arch, name string) (string, bool) {
	for h, g := range hfGlobalNames {
		if g == name {
			return h, true
		}
	}
	for h, g := range hfGemma4GlobalNames {
		if g == name && arch == "gemma4" {
			return h, true
		}
	}
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return "", false
	}
	num, kind, ok := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !ok || err != nil || l < 0 || strconv.Itoa(l) != num {
		return "", false
	}
	for h, g := range layerNames(arch) {
		if g == kind {
			return fmt.Sprintf("model.layers.%d.%s", l, h), true
		}
	}
	return "", false
}

// hfIgnored are tensors some checkpoints carry that the forward pass
// recomputes: RoPE's inverse frequencies.
func hfIgnored(name string) bool {
	return strings.HasSuffix(name, ".self_attn.rotary_emb.inv_freq")
}

// openHF loads a Hugging Face folder. The tokenizer comes from the folder's
// tokenizer.json unless skipTokenizer (Open sets it when the caller names
// another tokenizer).
func openHF(dir string, skipTokenizer bool) (*Model, error) {
	data, err := fileat.ReadBounded(filepath.Join(dir, HFConfigFile), maxConfigSize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open model %s: %w: a folder needs a Hugging Face %s", dir, ErrUnknownFormat, HFConfigFile)
	}
	if err != nil {
		return nil, fmt.Errorf("open model %s: %w", dir, err)
	}
	c, err := ParseHFConfig(data)
	if err != nil {
		return nil, fmt.Errorf("open model %s: %w", dir, err)
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open model %s: %w", dir, err)
	}
	m, err := modelFromSafetensors(c, set)
	if err != nil {
		set.Close()
		return nil, fmt.Errorf("open model %s: %w", dir, err)
	}
	m.Path = dir
	m.close = set.Close
	if !skipTokenizer {
		if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); errors.Is(err, fs.ErrNotExist) {
			m.Close()
			return nil, fmt.Errorf("open model %s: no tokenizer.json (name a tokenizer file to use another)", dir)
		}
		if m.Tokenizer, err = LoadTokenizer(dir, c.Vocab); err != nil {
			m.Close()
			return nil, fmt.Errorf("open model %s: %w", dir, err)
		}
	}
	return m, nil
}

// modelFromSafetensors names the tensors of set the GGUF way and checks
// them against c, reporting problems under their Hugging Face names.
func modelFromSafetensors(c Config, set *safetensors.Set) (*Model, error) {
	m := &Model{Config: c, Format: "hf", Tensors: map[string]*Tensor{}}
	want := map[string][]int{}
	for _, t := range LlamaTensors(c) {
		want[t.Name] = t.Shape
	}
	var unused []string
	left := map[string]bool{}
	for _, name := range set.TensorNames() {
		left[name] = true
	}
	tensor := func(name string, shape []int) (*Tensor, error) {
		st, ok := set.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("missing tensor %s", name)
		}
		typ, _ := st.DType.Type()
		if st.DType != safetensors.F32 && st.DType != safetensors.F16 && st.DType != safetensors.BF16 {
			return nil, fmt.Errorf("tensor %s has dtype %s (supported: F32, F16, BF16)", name, st.DType)
		}
		if !equalShape(st.Shape, shape) {
			return nil, fmt.Errorf("tensor %s has shape %v, want %v", name, st.Shape, shape)
		}
		return NewTensor(name, st.Shape, typ, st.Bytes), nil
	}
	if c.MoE.On() && c.Gemma4 == nil {
		if err := hfExperts(m, left, tensor); err != nil {
			return nil, err
		}
	}
	if c.Gemma4 != nil {
		if err := hfGemma4Tensors(m, left, tensor); err != nil {
			return nil, err
		}
	}
	if c.Linear.On() {
		if err := hfQwen35Tensors(m, left, tensor); err != nil {
			return nil, err
		}
	}
	for _, name := range set.TensorNames() {
		if !left[name] {
			continue // an expert, placed by hfExperts
		}
		st, _ := set.Tensor(name)
		g, ok := HFTensorName(c.Arch, name)
		shape := st.Shape
		if ok && strings.HasSuffix(g, FFNRouterShexp+".weight") && len(shape) == 2 && shape[0] == 1 {
			shape = shape[1:] // Qwen2-MoE's shared expert gate, a Linear(dim, 1)
		}
		switch {
		case hfIgnored(name), ok && g == Output && c.TiedEmbeddings:
			continue // a copy of the embedding, or recomputed
		case c.Arch == "qwen35" && hfQwen35Unused(name):
			continue // the vision tower or the MTP layers
		case c.Arch == "gemma4" && hfGemma4Unused(name):
			continue // the vision and audio towers
		case !ok || want[g] == nil:
			unused = append(unused, name)
			continue
		}
		typ, _ := st.DType.Type()
		if st.DType != safetensors.F32 && st.DType != safetensors.F16 && st.DType != safetensors.BF16 {
			return nil, fmt.Errorf("tensor %s has dtype %s (supported: F32, F16, BF16)", name, st.DType)
		}
		if !equalShape(shape, want[g]) {
			return nil, fmt.Errorf("tensor %s has shape %v, want %v", name, shape, want[g])
		}
		m.Tensors[g] = NewTensor(g, shape, typ, st.Bytes)
		if (strings.HasPrefix(c.Arch, "gemma") && c.Arch != "gemma4" || c.Arch == "qwen35") && strings.HasSuffix(g, "norm.weight") {
			m.Tensors[g] = plusOne(m.Tensors[g])
		}
	}
	if len(unused) > 0 {
		if len(unused) > 5 {
			unused = append(unused[:5], fmt.Sprintf("and %d more", len(unused)-5))
		}
		return nil, fmt.Errorf("tensors that the %s forward pass does not use (it would compute another model): %s",
			c.Arch, strings.Join(unused, ", "))
	}
	for _, t := range LlamaTensors(c) {
		if _, ok := m.Tensors[t.Name]; !ok {
			h, _ := GGUFToHFName(c.Arch, t.Name)
			return nil, fmt.Errorf("missing tensor %s (%s)", h, t.Name)
		}
	}
	return m, nil
}

// plusOne is norm weight t as Gemma and Qwen3.5 use it, 1 + w, in f32:
// Hugging Face checkpoints store w (llama.cpp's converter adds the one).
func plusOne(t *Tensor) *Tensor {
	return NewTensor(t.Name, t.Shape, dtype.F32, func() ([]byte, error) {
		w, err := t.Float32()
		if err != nil {
			return nil, err
		}
		for i := range w {
			w[i]++
		}
		return dtype.Quantize(dtype.F32, w)
	})
}
