package models

import (
	"errors"
	"fmt"
)

// Mixture-of-experts models (Mixtral, Qwen1.5-MoE, Qwen3-MoE, OLMoE,
// Granite 3 MoE): each layer's feed-forward is E experts, gated FFNs of
// their own, of which a router picks k per token. They share the Llama
// family's forward pass; the feed-forward step reads MoEConfig to choose
// the dense or the routed form, and the differences between the families
// are data here:
//
//   - the router: p = softmax(x·Wrᵀ) over all E experts, the k largest
//     kept (the lower expert first among equal logits), and, with
//     NormTopK, divided by their sum. Mixtral and Granite always
//     normalise (Granite's softmax over the top-k logits is the same
//     thing); Qwen2-MoE, Qwen3-MoE and OLMoE say so in norm_topk_prob
//     (GGUF: expert_weights_norm), false for Qwen1.5-MoE and OLMoE, true
//     for Qwen3-30B-A3B.
//   - a shared expert (Qwen2-MoE): a dense FFN of SharedFFN that every
//     token runs, its output scaled by sigmoid(x·w) of its own gate.
//
// Tensors are named as llama.cpp names them, the experts stacked into one
// 3-D tensor per matrix: blk.N.ffn_gate_inp.weight [E, dim],
// ffn_gate_exps and ffn_up_exps [E, ffn, dim], ffn_down_exps [E, dim, ffn];
// the shared expert's ffn_{gate,up,down}_shexp and its gate
// ffn_gate_inp_shexp [dim].
type MoEConfig struct {
	Experts  int  // E; 0 for a dense model
	Used     int  // k, experts per token
	FFN      int  // each expert's hidden width
	NormTopK bool // the k weights are divided by their sum
	// SharedFFN is the hidden width of the shared expert (Qwen2-MoE), 0
	// for none.
	SharedFFN int
}

// On reports whether the model routes its feed-forward through experts.
func (m MoEConfig) On() bool { return m.Experts > 0 }

// MaxExperts bounds E: the router's kernels keep a row's choice in
// registers and workgroup memory (the largest real models have 256).
const MaxExperts = 1024

func (m MoEConfig) validate() error {
	if m == (MoEConfig{}) {
		return nil
	}
	var errs []error
	if m.Experts < 1 || m.Experts > MaxExperts {
		errs = append(errs, fmt.Errorf("expert count %d out of range 1..%d", m.Experts, MaxExperts))
	}
	if m.Used < 1 || m.Used > m.Experts {
		errs = append(errs, fmt.Errorf("experts used %d must be in 1..%d", m.Used, m.Experts))
	}
	if m.FFN <= 0 {
		errs = append(errs, fmt.Errorf("expert ffn width %d must be positive", m.FFN))
	}
	if m.SharedFFN < 0 {
		errs = append(errs, fmt.Errorf("shared expert width %d must not be negative", m.SharedFFN))
	}
	return errors.Join(errs...)
}

// Tensor names of the experts, as llama.cpp spells them.
const (
	FFNRouter      = "ffn_gate_inp"
	FFNGateExps    = "ffn_gate_exps"
	FFNUpExps      = "ffn_up_exps"
	FFNDownExps    = "ffn_down_exps"
	FFNGateShexp   = "ffn_gate_shexp"
	FFNUpShexp     = "ffn_up_shexp"
	FFNDownShexp   = "ffn_down_shexp"
	FFNRouterShexp = "ffn_gate_inp_shexp"
)

// ffnTensors lists layer l's feed-forward tensors of config c: the dense
// gate, up and down, or the router, the experts and the shared expert.
func ffnTensors(c Config, l int) []Tensor {
	if !c.MoE.On() {
		return []Tensor{
			{Name: LayerTensor(l, FFNGate), Shape: []int{c.FFN, c.Dim}},
			{Name: LayerTensor(l, FFNUp), Shape: []int{c.FFN, c.Dim}},
			{Name: LayerTensor(l, FFNDown), Shape: []int{c.Dim, c.FFN}},
		}
	}
	e, f := c.MoE.Experts, c.MoE.FFN
	ts := []Tensor{
		{Name: LayerTensor(l, FFNRouter), Shape: []int{e, c.Dim}},
		{Name: LayerTensor(l, FFNGateExps), Shape: []int{e, f, c.Dim}},
		{Name: LayerTensor(l, FFNUpExps), Shape: []int{e, f, c.Dim}},
		{Name: LayerTensor(l, FFNDownExps), Shape: []int{e, c.Dim, f}},
	}
	if s := c.MoE.SharedFFN; s > 0 {
		ts = append(ts,
			Tensor{Name: LayerTensor(l, FFNRouterShexp), Shape: []int{c.Dim}},
			Tensor{Name: LayerTensor(l, FFNGateShexp), Shape: []int{s, c.Dim}},
			Tensor{Name: LayerTensor(l, FFNUpShexp), Shape: []int{s, c.Dim}},
			Tensor{Name: LayerTensor(l, FFNDownShexp), Shape: []int{c.Dim, s}})
	}
	return ts
}

// moeGGUFNormDefault is whether an architecture normalises its top-k
// weights when the file does not say (expert_weights_norm), as llama.cpp
// builds each: Mixtral (llama), Qwen3-MoE and Granite do, Qwen2-MoE and
// OLMoE do not.
var moeGGUFNormDefault = map[string]bool{
	"llama": true, "qwen3moe": true, "granitemoe": true, "qwen2moe": false, "olmoe": false,
}

// moeGGUF reads the experts of a GGUF model from llama.cpp's keys:
// {arch}.expert_count, expert_used_count, expert_feed_forward_length (else
// feed_forward_length, as Mixtral's, OLMoE's and Granite's files give the
// expert width there), expert_shared_feed_forward_length and
// expert_weights_norm. A gating function other than softmax
// (expert_gating_func 1) is refused.
func moeGGUF(m *Model, md *metaReader) error {
	c := &m.Config
	if _, ok := md.f.Uint(md.prefix + "expert_count"); !ok {
		if _, moe := moeGGUFNormDefault[c.Arch]; moe && c.Arch != "llama" {
			return fmt.Errorf("%s model without %sexpert_count", c.Arch, md.prefix)
		}
		return nil
	}
	e := md.int("expert_count", 0)
	if e == 0 && c.Arch == "llama" {
		return nil // a dense Llama that writes the key as 0
	}
	c.MoE = MoEConfig{
		Experts:   e,
		Used:      md.int("expert_used_count", 0),
		FFN:       md.int("expert_feed_forward_length", c.FFN),
		SharedFFN: md.int("expert_shared_feed_forward_length", -1),
		NormTopK:  moeGGUFNormDefault[c.Arch],
	}
	if c.MoE.SharedFFN < 0 {
		c.MoE.SharedFFN = 0
		if c.Arch == "qwen2moe" {
			return fmt.Errorf("qwen2moe model without %sexpert_shared_feed_forward_length", md.prefix)
		}
	}
	if md.err != nil {
		return md.err
	}
	if v, ok := md.f.Bool(md.prefix + "expert_weights_norm"); ok {
		c.MoE.NormTopK = v
	}
	if g, ok := md.f.Uint(md.prefix + "expert_gating_func"); ok && g != 1 {
		return fmt.Errorf("%sexpert_gating_func %d is not supported (1, softmax)", md.prefix, g)
	}
	if s, ok := md.f.Float(md.prefix + "expert_weights_scale"); ok && s != 1 && s != 0 {
		return fmt.Errorf("%sexpert_weights_scale %g is not supported", md.prefix, s)
	}
	// The shared expert's gate is a vector; converters store it [dim] or
	// [1, dim].
	for l := range c.Layers {
		if t, ok := m.Tensors[LayerTensor(l, FFNRouterShexp)]; ok && len(t.Shape) == 2 && t.Shape[0] == 1 {
			t.Shape = t.Shape[1:]
		}
	}
	return nil
}

// graniteGGUF reads Granite's multipliers: embedding_scale, residual_scale,
// attention.scale and logit_scale.
func graniteGGUF(c *Config, md *metaReader) {
	c.EmbedScale = float32(md.float("embedding_scale", 0))
	c.ResidualScale = float32(md.float("residual_scale", 0))
	c.QueryScale = float32(md.float("attention.scale", 0))
	c.LogitScale = float32(md.float("logit_scale", 0))
}

// The Hugging Face side. Mixtral's experts are
// block_sparse_moe.experts.N.w1 (gate), w3 (up) and w2 (down) behind the
// router block_sparse_moe.gate; Qwen2/3-MoE's and OLMoE's
// mlp.experts.N.{gate,up,down}_proj behind mlp.gate, with Qwen2-MoE's
// mlp.shared_expert.* and mlp.shared_expert_gate; Granite's are fused:
// block_sparse_moe.input_linear [E, 2·ffn, dim] (gate rows, then up rows)
// and output_linear [E, dim, ffn], behind block_sparse_moe.router.layer.
// Per-expert tensors are stacked, and Granite's input_linear split, into
// llama.cpp's tensors as they load.

// hfMoENames maps each MoE family's one-to-one layer tensor names (the
// per-expert ones are hfExpertKinds') to GGUF's.
var hfMoENames = map[string]map[string]string{
	"llama": {"block_sparse_moe.gate.weight": FFNRouter + ".weight"},
	"qwen2moe": {
		"mlp.gate.weight":                    FFNRouter + ".weight",
		"mlp.shared_expert.gate_proj.weight": FFNGateShexp + ".weight",
		"mlp.shared_expert.up_proj.weight":   FFNUpShexp + ".weight",
		"mlp.shared_expert.down_proj.weight": FFNDownShexp + ".weight",
		"mlp.shared_expert_gate.weight":      FFNRouterShexp + ".weight",
	},
	"qwen3moe": {"mlp.gate.weight": FFNRouter + ".weight"},
	"olmoe":    {"mlp.gate.weight": FFNRouter + ".weight"},
	"granitemoe": {
		"block_sparse_moe.router.layer.weight":  FFNRouter + ".weight",
		"block_sparse_moe.output_linear.weight": FFNDownExps + ".weight",
	},
}

// HFExpertName is the Hugging Face name of expert e's matrix of kind
// (FFNGateExps, FFNUpExps, FFNDownExps) in layer l of a model of
// architecture arch, or false where the family does not name experts one
// by one (Granite).
func HFExpertName(arch string, l, e int, kind string) (string, bool) {
	var part string
	switch arch {
	case "llama":
		part = map[string]string{FFNGateExps: "w1", FFNUpExps: "w3", FFNDownExps: "w2"}[kind]
		return fmt.Sprintf("model.layers.%d.block_sparse_moe.experts.%d.%s.weight", l, e, part), part != ""
	case "qwen2moe", "qwen3moe", "olmoe":
		part = map[string]string{FFNGateExps: "gate_proj", FFNUpExps: "up_proj", FFNDownExps: "down_proj"}[kind]
		return fmt.Sprintf("model.layers.%d.mlp.experts.%d.%s.weight", l, e, part), part != ""
	}
	return "", false
}

// HFGraniteInput is the name of Granite's fused gate and up experts of
// layer l.
func HFGraniteInput(l int) string {
	return fmt.Sprintf("model.layers.%d.block_sparse_moe.input_linear.weight", l)
}

// hfExperts assembles the stacked expert tensors of every layer of c from
// set's per-expert (or Granite's fused) tensors, taking them out of names
// (the names not yet placed). find returns a set's tensor as a Tensor.
func hfExperts(m *Model, names map[string]bool, find func(name string, shape []int) (*Tensor, error)) error {
	c := m.Config
	e, f := c.MoE.Experts, c.MoE.FFN
	for l := range c.Layers {
		if c.Arch == "granitemoe" {
			name := HFGraniteInput(l)
			t, err := find(name, []int{e, 2 * f, c.Dim})
			if err != nil {
				return err
			}
			delete(names, name)
			for half, kind := range []string{FFNGateExps, FFNUpExps} {
				g := LayerTensor(l, kind)
				m.Tensors[g] = expertRows(g, t, half, f)
			}
			continue
		}
		for _, kind := range []string{FFNGateExps, FFNUpExps, FFNDownExps} {
			shape := []int{f, c.Dim}
			if kind == FFNDownExps {
				shape = []int{c.Dim, f}
			}
			parts := make([]*Tensor, e)
			for x := range e {
				name, _ := HFExpertName(c.Arch, l, x, kind)
				t, err := find(name, shape)
				if err != nil {
					return err
				}
				if x > 0 && t.Type != parts[0].Type {
					return fmt.Errorf("tensor %s has type %s, expert 0's %s", name, t.Type, parts[0].Type)
				}
				delete(names, name)
				parts[x] = t
			}
			g := LayerTensor(l, kind)
			m.Tensors[g] = stack(g, parts)
		}
	}
	return nil
}

// stack is the 3-D tensor of the matrices ts one after the other.
func stack(name string, ts []*Tensor) *Tensor {
	shape := append([]int{len(ts)}, ts[0].Shape...)
	return NewTensor(name, shape, ts[0].Type, func() ([]byte, error) {
		var out []byte
		for _, t := range ts {
			b, err := t.Raw()
			if err != nil {
				return nil, err
			}
			out = append(out, b...)
		}
		return out, nil
	})
}

// expertRows is, of a 3-D tensor t of [E, 2·rows, in], the rows of each
// expert's half (0: the first rows, 1: the next): [E, rows, in].
func expertRows(name string, t *Tensor, half, rows int) *Tensor {
	e, in := t.Shape[0], t.Shape[2]
	return NewTensor(name, []int{e, rows, in}, t.Type, func() ([]byte, error) {
		b, err := t.Raw()
		if err != nil {
			return nil, err
		}
		size := len(b) / (e * 2 * rows) // bytes a row: F32, F16 or BF16
		out := make([]byte, 0, e*rows*size)
		for x := range e {
			at := (x*2 + half) * rows * size
			out = append(out, b[at:at+rows*size]...)
		}
		return out, nil
	})
}

// moeHF reads the experts of a Hugging Face config (hfArch is its
// architectures entry): num_local_experts (Mixtral, Granite) or
// num_experts, num_experts_per_tok, moe_intermediate_size (Qwen) or
// intermediate_size, shared_expert_intermediate_size and norm_topk_prob
// (transformers' defaults where a key is left out), and Granite's
// multipliers. Qwen's layers that stay dense (decoder_sparse_step,
// mlp_only_layers) and OLMoE's clip_qkv are refused.
func moeHF(c *Config, hfArch string, h hfConfig) error {
	if _, moe := moeGGUFNormDefault[c.Arch]; !moe || c.Arch == "llama" && hfArch != "MixtralForCausalLM" {
		return nil
	}
	m := MoEConfig{Experts: h.NumExperts, Used: h.NumExpertsPerTok, FFN: h.IntermediateSize}
	switch c.Arch {
	case "llama", "granitemoe":
		m.Experts, m.NormTopK = h.NumLocalExperts, true
	case "qwen2moe", "qwen3moe":
		m.FFN, m.SharedFFN = h.MoEIntermediateSize, h.SharedExpertSize
		if step := h.DecoderSparseStep; step != nil && *step != 1 || len(h.MLPOnlyLayers) > 0 {
			return errors.New("config.json: dense layers among the experts (decoder_sparse_step, mlp_only_layers) are not supported")
		}
	}
	if c.Arch == "qwen2moe" || c.Arch == "qwen3moe" || c.Arch == "olmoe" {
		m.NormTopK = h.NormTopKProb != nil && *h.NormTopKProb // transformers' default: false
	}
	if c.Arch == "olmoe" && len(h.ClipQKV) > 0 && string(h.ClipQKV) != "null" {
		return errors.New("config.json: clip_qkv is not supported")
	}
	if c.Arch == "qwen2moe" && m.SharedFFN == 0 {
		return errors.New("config.json: qwen2moe without shared_expert_intermediate_size")
	}
	if err := m.validate(); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	c.MoE = m
	if c.Arch == "granitemoe" {
		opt := func(v *float64) float32 { // GraniteMoeConfig's defaults are 1
			if v == nil {
				return 1
			}
			return float32(*v)
		}
		c.EmbedScale, c.ResidualScale = opt(h.EmbeddingMultiplier), opt(h.ResidualMultiplier)
		c.QueryScale, c.LogitScale = opt(h.AttentionMultiplier), opt(h.LogitsScaling)
	}
	return nil
}
