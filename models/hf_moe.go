package models

import (
	"errors"
	"fmt"
)

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
