package synth

import (
	"fmt"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/safetensors"
)

// Mixture-of-experts shapes: the real ones from their published
// config.json, and tiny ones for tests whose expert counts are not powers
// of two and whose expert width (36) is not a whole number of int4 groups.
var moeShapes = []Shape{
	{"granite-3.1-1b-a400m", granite(models.Config{Arch: "granitemoe", Dim: 1024, FFN: 512, Layers: 24, Heads: 16, KVHeads: 8, HeadDim: 64,
		Vocab: 49155, Context: 131072, NormEps: 1e-6, RopeTheta: 1500000, RopeDim: 64, TiedEmbeddings: true,
		MoE: models.MoEConfig{Experts: 32, Used: 8, FFN: 512, NormTopK: true}}, 12, 0.22, 0.015625, 6)},
	// The dense model of granite-3.1-1b-a400m's active parameters: its
	// attention, and one FFN as wide as the 8 experts a token uses.
	{"granite-3.1-1b-a400m-dense", models.Config{Arch: "llama", Dim: 1024, FFN: 8 * 512, Layers: 24, Heads: 16, KVHeads: 8, HeadDim: 64,
		Vocab: 49155, Context: 131072, NormEps: 1e-6, RopeTheta: 1500000, RopeDim: 64, TiedEmbeddings: true}},
	{"olmoe-1b-7b", models.Config{Arch: "olmoe", Dim: 2048, FFN: 1024, Layers: 16, Heads: 16, KVHeads: 16, HeadDim: 128,
		Vocab: 50304, Context: 4096, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 128, Rope: models.RopeHalves,
		QKNorm: true, QKNormFull: true, MoE: models.MoEConfig{Experts: 64, Used: 8, FFN: 1024}}},
	{"qwen3-30b-a3b", models.Config{Arch: "qwen3moe", Dim: 2048, FFN: 6144, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128,
		Vocab: 151936, Context: 40960, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 128, Rope: models.RopeHalves,
		QKNorm: true, MoE: models.MoEConfig{Experts: 128, Used: 8, FFN: 768, NormTopK: true}}},

	{"tiny-mixtral", models.Config{Arch: "llama", Dim: 64, FFN: 36, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-5, RopeTheta: 1000000, RopeDim: 16,
		MoE: models.MoEConfig{Experts: 5, Used: 2, FFN: 36, NormTopK: true}}},
	{"tiny-qwen2moe", models.Config{Arch: "qwen2moe", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 16, Rope: models.RopeHalves, QKVBias: true,
		MoE: models.MoEConfig{Experts: 6, Used: 2, FFN: 36, SharedFFN: 44}}},
	{"tiny-qwen3moe", models.Config{Arch: "qwen3moe", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 32, Rope: models.RopeHalves, QKNorm: true,
		MoE: models.MoEConfig{Experts: 7, Used: 3, FFN: 36, NormTopK: true}}},
	{"tiny-olmoe", models.Config{Arch: "olmoe", Dim: 64, FFN: 36, Layers: 2, Heads: 4, KVHeads: 4, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 16, Rope: models.RopeHalves,
		QKNorm: true, QKNormFull: true, MoE: models.MoEConfig{Experts: 3, Used: 3, FFN: 36}}},
	{"tiny-granitemoe", granite(models.Config{Arch: "granitemoe", Dim: 64, FFN: 36, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 10000, RopeDim: 16, TiedEmbeddings: true,
		MoE: models.MoEConfig{Experts: 6, Used: 1, FFN: 36, NormTopK: true}}, 1.5, 1.2, 0.3, 1.3)},
}

func init() { shapes = append(shapes, moeShapes...) }

// granite sets Granite's multipliers: of the embeddings, of what each
// block adds to the residual stream, of the attention scores, and the
// divisor of the logits.
func granite(c models.Config, embed, residual, attention, logits float32) models.Config {
	c.EmbedScale, c.ResidualScale, c.QueryScale, c.LogitScale = embed, residual, attention, logits
	return c
}

// moeMetadata is the GGUF metadata of c's experts under llama.cpp's keys.
func moeMetadata(c models.Config) []gguf.KV {
	a := c.Arch + "."
	u := func(v int) gguf.Value { return gguf.Uint32Value(uint32(v)) }
	var kv []gguf.KV
	if m := c.MoE; m.On() {
		kv = append(kv,
			gguf.KV{Key: a + "expert_count", Value: u(m.Experts)},
			gguf.KV{Key: a + "expert_used_count", Value: u(m.Used)},
			gguf.KV{Key: a + "expert_feed_forward_length", Value: u(m.FFN)},
			gguf.KV{Key: a + "expert_weights_norm", Value: gguf.BoolValue(m.NormTopK)})
		if m.SharedFFN > 0 {
			kv = append(kv, gguf.KV{Key: a + "expert_shared_feed_forward_length", Value: u(m.SharedFFN)})
		}
	}
	f := func(key string, v float32) {
		if v != 0 {
			kv = append(kv, gguf.KV{Key: a + key, Value: gguf.Float32Value(v)})
		}
	}
	if c.Arch == "granitemoe" {
		f("embedding_scale", c.EmbedScale)
		f("residual_scale", c.ResidualScale)
		f("attention.scale", c.QueryScale)
		f("logit_scale", c.LogitScale)
	}
	return kv
}

// hfMoEArchitectures names the MoE families' classes in config.json.
var hfMoEArchitectures = map[string][2]string{ // arch: class, model_type
	"llama":      {"MixtralForCausalLM", "mixtral"},
	"qwen2moe":   {"Qwen2MoeForCausalLM", "qwen2_moe"},
	"qwen3moe":   {"Qwen3MoeForCausalLM", "qwen3_moe"},
	"olmoe":      {"OlmoeForCausalLM", "olmoe"},
	"granitemoe": {"GraniteMoeForCausalLM", "granitemoe"},
}

// moeConfigJSON adds c's experts to config.json, as transformers writes
// each family's.
func moeConfigJSON(cfg map[string]any, c models.Config) error {
	m := c.MoE
	names := hfMoEArchitectures[c.Arch]
	cfg["architectures"], cfg["model_type"] = []string{names[0]}, names[1]
	cfg["num_experts_per_tok"] = m.Used
	switch c.Arch {
	case "llama", "granitemoe":
		if !m.NormTopK {
			return fmt.Errorf("%s always normalises its top-k weights", names[0])
		}
		cfg["num_local_experts"], cfg["intermediate_size"] = m.Experts, m.FFN
	case "olmoe":
		cfg["num_experts"], cfg["intermediate_size"], cfg["norm_topk_prob"] = m.Experts, m.FFN, m.NormTopK
		cfg["clip_qkv"] = nil
	default: // qwen2moe, qwen3moe
		cfg["num_experts"], cfg["moe_intermediate_size"], cfg["norm_topk_prob"] = m.Experts, m.FFN, m.NormTopK
		cfg["decoder_sparse_step"], cfg["mlp_only_layers"] = 1, []int{}
		if c.Arch == "qwen2moe" {
			cfg["shared_expert_intermediate_size"] = m.SharedFFN
		}
	}
	if c.Arch == "granitemoe" {
		cfg["embedding_multiplier"], cfg["residual_multiplier"] = c.EmbedScale, c.ResidualScale
		cfg["attention_multiplier"], cfg["logits_scaling"] = c.QueryScale, c.LogitScale
	}
	return nil
}

// hfMoETensors writes a stacked expert tensor of GGUF name (values vals
// of shape [E, rows, in]) the Hugging Face way: one tensor per expert, or
// Granite's fused input_linear, whose gate half waits in pending for its
// up half. It reports false for a tensor that is not an expert's.
func hfMoETensors(c models.Config, name string, shape []int, data func(vals []float32) ([]byte, error),
	vals []float32, dt safetensors.DType, pending map[int][]float32, put func(safetensors.WriteTensor)) (bool, error) {
	var l int
	var kind string
	if n, _ := fmt.Sscanf(name, "blk.%d.%s", &l, &kind); n != 2 || len(shape) != 3 {
		return false, nil
	}
	kind = strings.TrimSuffix(kind, ".weight")
	e, rows, in := shape[0], shape[1], shape[2]
	if c.Arch == "granitemoe" {
		switch kind {
		case models.FFNGateExps:
			pending[l] = vals
			return true, nil
		case models.FFNUpExps:
			gate := pending[l]
			delete(pending, l)
			fused := make([]float32, 0, 2*len(vals))
			for x := range e {
				at := x * rows * in
				fused = append(fused, gate[at:at+rows*in]...)
				fused = append(fused, vals[at:at+rows*in]...)
			}
			b, err := data(fused)
			if err != nil {
				return true, err
			}
			put(safetensors.WriteTensor{Name: models.HFGraniteInput(l), DType: dt, Shape: []int{e, 2 * rows, in}, Data: b})
			return true, nil
		}
		return false, nil // output_linear is stored stacked, as GGUF's
	}
	for x := range e {
		hf, ok := models.HFExpertName(c.Arch, l, x, kind)
		if !ok {
			return false, nil
		}
		b, err := data(vals[x*rows*in : (x+1)*rows*in])
		if err != nil {
			return true, err
		}
		put(safetensors.WriteTensor{Name: hf, DType: dt, Shape: []int{rows, in}, Data: b})
	}
	return true, nil
}
