package models

import (
	"errors"
	"fmt"
	"github.com/tessera-llm/tessera/models/tensor"
)

// Mixture-of-experts models (Mixtral, Qwen1.5-MoE, Qwen3-MoE, OLMoE,
// Granite 3 MoE; gpt-oss, Qwen3.5-MoE and Gemma 4's 26B-A4B add their own
// parts in their files): each layer's feed-forward is E experts, gated FFNs of
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
	// Biases: the router and every expert's gate, up and down add a bias
	// (gpt-oss: ffn_gate_inp.bias [E], ffn_{gate,up}_exps.bias [E, ffn],
	// ffn_down_exps.bias [E, dim]).
	Biases bool
}

// On reports whether the model routes its feed-forward through experts.
func (m MoEConfig) On() bool { return m.Experts > 0 }

// MaxExperts bounds E (tensor.MaxExperts).
const MaxExperts = tensor.MaxExperts

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
	if c.MoE.Biases {
		ts = append(ts,
			Tensor{Name: LayerBias(l, FFNRouter), Shape: []int{e}},
			Tensor{Name: LayerBias(l, FFNGateExps), Shape: []int{e, f}},
			Tensor{Name: LayerBias(l, FFNUpExps), Shape: []int{e, f}},
			Tensor{Name: LayerBias(l, FFNDownExps), Shape: []int{e, c.Dim}})
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
	"llama": true, "qwen3moe": true, "qwen35moe": true, "granitemoe": true, "qwen2moe": false, "olmoe": false, "gpt-oss": true,
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
	// gpt-oss's softmax over the top k's logits (3, llama.cpp's
	// SOFTMAX_WEIGHT) is the renormalised softmax NormTopK computes.
	if g, ok := md.f.Uint(md.prefix + "expert_gating_func"); ok && g != 1 && !(g == 3 && c.MoE.NormTopK) {
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
