package models

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/tessera-llm/tessera/models/dtype"
)

// Qwen3.5 from Hugging Face folders (Qwen3_5ForConditionalGeneration, as
// Qwen publishes the models, with the text model's config under
// text_config and its tensors under model.language_model., or
// Qwen3_5ForCausalLM). The folder describes the model llama.cpp's converter
// writes to GGUF (conversion/qwen.py, Qwen3NextModel and
// _LinearAttentionVReorderBase), and the loader makes the same changes:
//
//   - A_log becomes ssm_a = −exp(A_log); conv1d's [C, 1, K] is [C, K];
//   - every RMSNorm but the linear layers' own (linear_attn.norm) stores w
//     of its 1 + w, as Qwen3-Next's;
//   - with fewer key heads K than value heads V, the folder orders value
//     heads by the key head they read (head g·V/K + i reads key head g),
//     the GGUF tiles them (head i·K + g reads g: what the forward pass's
//     "value head h reads key head h mod K" assumes); the loader reorders
//     the value heads' rows of in_proj_qkv, in_proj_z, in_proj_a,
//     in_proj_b and conv1d, the entries of A_log and dt_bias, and the
//     columns of out_proj the same way;
//   - a full-attention layer's q_proj holds each head's q rows then its
//     gate rows, as the GGUF's attn_q: split the same way (splitQGate).
//
// The vision tower (model.visual.) and the multi-token-prediction layers
// (mtp.) are not part of the text model's forward pass and are left
// unread. The MoE models (Qwen3_5Moe*) are not read from folders.

// hfTextPrefix is where Qwen3_5ForConditionalGeneration and
// Gemma4ForConditionalGeneration keep the text model's tensors (their
// ForCausalLM: model.).
const hfTextPrefix = "model.language_model."

// hfQwen35Unused reports whether a Qwen3.5 folder's tensor name is outside
// the text model's forward pass: the vision tower or the MTP layers.
func hfQwen35Unused(name string) bool {
	return strings.HasPrefix(name, "model.visual.") || strings.HasPrefix(name, "mtp.") || strings.HasPrefix(name, "model.mtp.")
}

// hfTextConfig replaces h by its text_config, for the architectures whose
// config nests the text model's (Qwen3.5's and Gemma 4's
// ConditionalGeneration):
// architectures and tie_word_embeddings (which such configs keep at the
// top) are kept where text_config does not set them.
func hfTextConfig(h *hfConfig, present *map[string]json.RawMessage) error {
	if len(h.Architectures) == 0 || h.Architectures[0] != "Qwen3_5ForConditionalGeneration" && h.Architectures[0] != "Gemma4ForConditionalGeneration" {
		return nil
	}
	raw, ok := (*present)["text_config"]
	if !ok || string(raw) == "null" {
		return fmt.Errorf("config.json: %s without a text_config", h.Architectures[0])
	}
	var inner hfConfig
	if err := json.Unmarshal(raw, &inner); err != nil {
		return fmt.Errorf("config.json: text_config: %w", err)
	}
	var keys map[string]json.RawMessage
	json.Unmarshal(raw, &keys) // cannot fail after the first
	inner.Architectures = h.Architectures
	if _, set := keys["tie_word_embeddings"]; !set {
		inner.TieWordEmbeddings = h.TieWordEmbeddings
		if t, top := (*present)["tie_word_embeddings"]; top {
			keys["tie_word_embeddings"] = t
		}
	}
	*h, *present = inner, keys
	return nil
}

// qwen35HF reads Qwen3.5's hybrid layers from its text config, with the
// defaults of transformers' Qwen3_5TextConfig for keys left out.
func qwen35HF(c *Config, h hfConfig) error {
	if h.AttnOutputGate != nil && !*h.AttnOutputGate {
		return fmt.Errorf("config.json: attn_output_gate false is not supported (Qwen3.5's full attention is gated)")
	}
	def := func(v *int, d int) int {
		if v == nil {
			return d
		}
		return *v
	}
	lc := LinearConfig{
		Conv:    def(h.LinearConvKernelDim, 4),
		KHeads:  def(h.LinearNumKeyHeads, 16),
		VHeads:  def(h.LinearNumValueHeads, 32),
		HeadDim: def(h.LinearKeyHeadDim, 128),
	}
	if v := def(h.LinearValueHeadDim, 128); v != lc.HeadDim {
		return fmt.Errorf("config.json: linear_value_head_dim %d differs from linear_key_head_dim %d (llama.cpp's qwen35 needs them equal)", v, lc.HeadDim)
	}
	lc.Layers = make([]bool, c.Layers)
	if h.LayerTypes != nil {
		if len(h.LayerTypes) != c.Layers {
			return fmt.Errorf("config.json: %d layer_types for %d layers", len(h.LayerTypes), c.Layers)
		}
		for l, t := range h.LayerTypes {
			switch t {
			case "linear_attention":
				lc.Layers[l] = true
			case "full_attention":
			default:
				return fmt.Errorf("config.json: layer_types[%d] %q is not supported (linear_attention, full_attention)", l, t)
			}
		}
	} else {
		interval := def(h.FullAttentionInterval, 4)
		if interval < 1 {
			return fmt.Errorf("config.json: full_attention_interval %d must be positive", interval)
		}
		for l := range lc.Layers {
			lc.Layers[l] = (l+1)%interval != 0
		}
	}
	if err := lc.validate(c.Layers); err != nil {
		return fmt.Errorf("config.json: %w", err)
	}
	factor := 0.25
	if h.PartialRotaryFactor != nil {
		factor = *h.PartialRotaryFactor
	} else if rp := h.RopeParameters; rp != nil && rp.PartialRotaryFactor != nil {
		factor = *rp.PartialRotaryFactor
	}
	dims := factor * float64(c.HeadDim)
	if !(factor > 0 && factor <= 1) || dims != math.Trunc(dims) || int(dims)%2 != 0 {
		return fmt.Errorf("config.json: partial_rotary_factor %g of heads of %d is not a whole number of pairs", factor, c.HeadDim)
	}
	c.RopeDim = int(dims)
	if h.RopeTheta == nil {
		c.RopeTheta = 1e7 // Qwen3_5TextConfig's default
	}
	c.Linear, c.QKNorm, c.AttnGate = lc, true, true
	return nil
}

// hfQwen35Tensors places a Qwen3.5 folder's linear-attention tensors and
// full-attention q projections in m (named and changed as the GGUF's,
// above), removing their names from left; find checks a tensor's dtype
// and shape.
func hfQwen35Tensors(m *Model, left map[string]bool, find func(name string, shape []int) (*Tensor, error)) error {
	c := m.Config
	lc := c.Linear
	d, ch, inner := lc.HeadDim, lc.Channels(), lc.Inner()
	qk := 2 * lc.KHeads * d // the q and k channels before the value heads
	prefix := hfTextPrefix
	if !left[prefix+"embed_tokens.weight"] {
		prefix = "model."
	}
	for l := range c.Layers {
		p := fmt.Sprintf("%slayers.%d.", prefix, l)
		get := func(hf string, shape []int) (*Tensor, error) {
			t, err := find(p+hf, shape)
			delete(left, p+hf)
			return t, err
		}
		if !c.LayerLinear(l) {
			q := c.Heads * c.HeadDim
			t, err := get("self_attn.q_proj.weight", []int{2 * q, c.Dim})
			if err != nil {
				return err
			}
			name := LayerTensor(l, AttnQ)
			m.Tensors[name] = NewTensor(name, t.Shape, t.Type, t.Raw)
			if err := splitQGate(m, l); err != nil {
				return err
			}
			continue
		}
		for _, x := range []struct {
			hf, gguf  string
			shape     []int
			from, per int // value heads' rows start at row from, per rows a head
			cols      bool
		}{
			{"linear_attn.in_proj_qkv.weight", LayerTensor(l, LinQKV), []int{ch, c.Dim}, qk, d, false},
			{"linear_attn.in_proj_z.weight", LayerTensor(l, LinGate), []int{inner, c.Dim}, 0, d, false},
			{"linear_attn.in_proj_b.weight", LayerTensor(l, LinBeta), []int{lc.VHeads, c.Dim}, 0, 1, false},
			{"linear_attn.in_proj_a.weight", LayerTensor(l, LinAlpha), []int{lc.VHeads, c.Dim}, 0, 1, false},
			{"linear_attn.conv1d.weight", LayerTensor(l, LinConv), []int{ch, 1, lc.Conv}, qk, d, false},
			{"linear_attn.dt_bias", LayerBias(l, LinDT), []int{lc.VHeads}, 0, 1, false},
			{"linear_attn.A_log", LinearA(l), []int{lc.VHeads}, 0, 1, false},
			{"linear_attn.norm.weight", LayerTensor(l, LinNorm), []int{d}, 0, 0, false},
			{"linear_attn.out_proj.weight", LayerTensor(l, LinOut), []int{c.Dim, inner}, 0, d, true},
		} {
			t, err := get(x.hf, x.shape)
			if err != nil {
				return err
			}
			shape := x.shape
			if len(shape) == 3 { // conv1d's [C, 1, K]
				shape = []int{ch, lc.Conv}
			}
			read := t.Raw
			if x.per > 0 && lc.KHeads != lc.VHeads {
				read = tiledVHeads(t, x.from, x.per, lc.KHeads, lc.VHeads, x.cols)
			}
			u := NewTensor(x.gguf, shape, t.Type, read)
			if x.gguf == LinearA(l) {
				u = negExp(u)
			}
			m.Tensors[x.gguf] = u
		}
	}
	return nil
}

// tiledVHeads returns t's bytes with its value heads in the GGUF's tiled
// order: where the folder's head g·r + i (r = vHeads/kHeads) is, the GGUF
// has head i·kHeads + g. A head is per rows of t from row from on (per
// columns of each row where cols: out_proj's input).
func tiledVHeads(t *Tensor, from, per, kHeads, vHeads int, cols bool) func() ([]byte, error) {
	return func() ([]byte, error) {
		b, err := t.Raw()
		if err != nil {
			return nil, err
		}
		rows := t.Shape[0]
		rowBytes := len(b) / rows
		unit := rowBytes * per // a head's bytes: per rows
		stride, n := 0, rows   // cols: heads along each row
		if cols {
			size, err := dtype.Bytes(t.Type, 1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.Name, err)
			}
			unit, stride = int(size)*per, rowBytes
		} else {
			n = 1
		}
		r := vHeads / kHeads
		out := make([]byte, len(b))
		copy(out, b)
		for row := range n {
			base := row*stride + from*rowBytes
			for h := range vHeads {
				src := (h%kHeads)*r + h/kHeads
				copy(out[base+h*unit:base+(h+1)*unit], b[base+src*unit:base+(src+1)*unit])
			}
		}
		return out, nil
	}
}

// negExp is A_log as the forward pass takes it, −exp(A_log), in f32.
func negExp(t *Tensor) *Tensor {
	return NewTensor(t.Name, t.Shape, dtype.F32, func() ([]byte, error) {
		w, err := t.Float32()
		if err != nil {
			return nil, err
		}
		for i, v := range w {
			w[i] = -float32(math.Exp(float64(v)))
		}
		return dtype.Quantize(dtype.F32, w)
	})
}
