package synth

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
)

// The families of 2025–26 on the Llama forward pass: SmolLM3 (every
// fourth layer without RoPE), Phi-4-mini (phi3: fused q/k/v and gate/up,
// a partial rotation, LongRoPE) and a Llama stretched by YaRN, at their
// published configs and at tiny shapes for tests.
var familyShapes = []Shape{
	{Name: "smollm3-3b", Config: smollm3(models.Config{Arch: "smollm3", Dim: 2048, FFN: 11008, Layers: 36, Heads: 16, KVHeads: 4, HeadDim: 128,
		Vocab: 128256, Context: 65536, NormEps: 1e-6, RopeTheta: 5000000, RopeDim: 128, TiedEmbeddings: true})},
	{Name: "tiny-smollm3", Config: smollm3(models.Config{Arch: "smollm3", Dim: 64, FFN: 96, Layers: 5, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-6, RopeTheta: 5000000, RopeDim: 16, TiedEmbeddings: true})},
	{Name: "phi-4-mini", Config: phi3(models.Config{Arch: "phi3", Dim: 3072, FFN: 8192, Layers: 32, Heads: 24, KVHeads: 8, HeadDim: 128,
		Vocab: 200064, Context: 131072, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 96, TiedEmbeddings: true}, 4096)},
	{Name: "tiny-phi3", Config: phi3(models.Config{Arch: "phi3", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 12}, 32)},
	// Within its original context: LongRoPE's short factors (llama.cpp
	// rounds a context up to 256, so the original is 256 here).
	{Name: "tiny-phi3-short", Config: phi3(models.Config{Arch: "phi3", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 1024, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 12}, 256)},
	// A Llama whose file asks for YaRN, factor 4 over an original context
	// of 64: tests run it past position 64.
	{Name: "tiny-yarn", Config: yarn(models.Config{Arch: "llama", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 16}, 4, 64)},
	// gpt-oss: attention sinks, biases, every other layer sliding, YaRN on
	// all, experts with biases and the clamped SwiGLU.
	{Name: "gpt-oss-20b", Config: gptOSS(models.Config{Arch: "gpt-oss", Dim: 2880, FFN: 2880, Layers: 24, Heads: 64, KVHeads: 8, HeadDim: 64,
		Vocab: 201088, Context: 131072, NormEps: 1e-5, RopeTheta: 150000, RopeDim: 64,
		MoE: models.MoEConfig{Experts: 32, Used: 4, FFN: 2880}}, 128, 32, 4096)},
	{Name: "tiny-gpt-oss", Config: gptOSS(models.Config{Arch: "gpt-oss", Dim: 64, FFN: 96, Layers: 4, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 256, NormEps: 1e-5, RopeTheta: 150000, RopeDim: 16,
		MoE: models.MoEConfig{Experts: 5, Used: 2, FFN: 96}}, 12, 4, 64)},
	// Qwen2-VL's language model: Qwen2 with M-RoPE (time, height and width
	// sections of the rotation pairs); the tiny one's sections in the
	// real one's proportions.
	{Name: "qwen2-vl-2b", Config: models.Config{Arch: "qwen2vl", Dim: 1536, FFN: 8960, Layers: 28, Heads: 12, KVHeads: 2, HeadDim: 128,
		Vocab: 151936, Context: 32768, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 128, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKVBias: true, RopeSections: [4]int{16, 24, 24, 0}}},
	{Name: "tiny-qwen2vl", Config: models.Config{Arch: "qwen2vl", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 300, Context: 512, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 16, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKVBias: true, RopeSections: [4]int{2, 3, 3, 0}}},
	// Qwen3-VL's language model: Qwen3 with M-RoPE's sections interleaved
	// pair by pair, and images' three deepstack slices added after its
	// first three layers (the tiny one, for text, none: tiny-qwen3vl-deep
	// in vision.go has them).
	{Name: "qwen3-vl-2b", Config: models.Config{Arch: "qwen3vl", Dim: 2048, FFN: 6144, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, Context: 262144, NormEps: 1e-6, RopeTheta: 5000000, RopeDim: 128, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKNorm: true, RopeSections: [4]int{24, 20, 20, 0}, RopeInterleaved: true, Deepstack: 3}},
	{Name: "tiny-qwen3vl", Config: models.Config{Arch: "qwen3vl", Dim: 64, FFN: 96, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 300, Context: 512, NormEps: 1e-6, RopeTheta: 5000000, RopeDim: 32, Rope: models.RopeHalves,
		TiedEmbeddings: true, QKNorm: true, RopeSections: [4]int{6, 5, 5, 0}, RopeInterleaved: true}},
}

// scalings are the RoPE scalings shapes' files declare where their keys
// say more than the Config's factors hold.
var scalings = map[string]Scaling{"tiny-yarn": {Type: "yarn", Factor: 4, Orig: 64},
	"gpt-oss-20b": {Type: "yarn", Factor: 32, Orig: 4096}, "tiny-gpt-oss": {Type: "yarn", Factor: 4, Orig: 64}}

func init() { shapes = append(shapes, familyShapes...) }

// Scaling is the RoPE scaling a shape's file declares, beyond what its
// Config's factors hold: the keys llama.cpp reads.
type Scaling struct {
	Type   string // rope.scaling.type: "yarn"
	Factor float64
	Orig   int // rope.scaling.original_context_length
}

// smollm3 marks SmolLM3's layers without RoPE: every fourth.
func smollm3(c models.Config) models.Config {
	c.NoRope = make([]bool, c.Layers)
	for l := range c.NoRope {
		c.NoRope[l] = (l+1)%4 == 0
	}
	return c
}

// phi3 gives c Phi-3's LongRoPE over an original context of orig: short
// and long factors of the shape of Phi-4-mini's (near 1 for the fast
// pairs, rising towards the slow ones; the long up to the context's
// stretch) and the attention factor sqrt(1 + ln(s)/ln(orig)), s the
// stretch, as transformers computes it.
func phi3(c models.Config, orig int) models.Config {
	c.Rope = models.RopeHalves
	n := c.RopeDim / 2
	stretch := float64(c.Context) / float64(orig)
	c.RopeFactors, c.RopeLong = make([]float32, n), make([]float32, n)
	for i := range n {
		t := float64(i) / float64(max(n-1, 1))
		c.RopeFactors[i] = float32(1 + float64(2*t*t))
		c.RopeLong[i] = float32(1 + float64((float64(stretch*1.5)-1)*t*t*t))
	}
	c.RopeOrigContext = orig
	c.RopeScale = float32(math.Sqrt(1 + math.Log(stretch)/math.Log(float64(orig))))
	return c
}

// yarn stretches c's RoPE by factor over an original context of orig.
func yarn(c models.Config, factor float64, orig int) models.Config {
	c.RopeFactors = models.YarnRopeFactors(c.RopeDim, c.RopeTheta, factor, orig, 32, 1, true)
	c.RopeScale = models.YarnScale(factor, 0)
	return c
}

// gptOSS gives c gpt-oss's attention (q/k/v and output biases, sinks,
// even layers sliding over window positions, YaRN by factor over orig on
// every layer) and experts (biases, the clamped SwiGLU, the top k's
// softmax).
func gptOSS(c models.Config, window int, factor float64, orig int) models.Config {
	c.Rope, c.QKVBias, c.AttnSinks, c.AttnOutBias = models.RopeHalves, true, true, true
	c.Act, c.MoE.Biases, c.MoE.NormTopK = models.SwiGLUOAI, true, true
	c.SlidingWindow, c.LocalRopeTheta, c.LocalRopeScaled = window, c.RopeTheta, true
	c.Sliding = make([]bool, c.Layers)
	for l := range c.Sliding {
		c.Sliding[l] = l%2 == 0
	}
	return yarn(c, factor, orig)
}

// familyName is the name llama.cpp gives tensor name in c's family:
// gpt-oss's norm before the experts is post_attention_norm.
func familyName(c models.Config, name string) string {
	var l int
	var kind string
	if n, _ := sscanLayer(name, &l, &kind); c.Arch == "gpt-oss" && n == 2 && kind == models.FFNNorm+".weight" {
		return models.LayerTensor(l, models.AttnPostNorm)
	}
	return name
}

// familyMetadata is the GGUF metadata of what c's family adds, under
// llama.cpp's keys: the RoPE scaling.
func familyMetadata(s Shape) []gguf.KV {
	c, a := s.Config, s.Config.Arch+"."
	u := func(v int) gguf.Value { return gguf.Uint32Value(uint32(v)) }
	var kv []gguf.KV
	if sc := scalings[s.Name]; sc.Type != "" {
		kv = append(kv, gguf.KV{Key: a + "rope.scaling.type", Value: gguf.StringValue(sc.Type)},
			gguf.KV{Key: a + "rope.scaling.factor", Value: gguf.Float32Value(float32(sc.Factor))},
			gguf.KV{Key: a + "rope.scaling.original_context_length", Value: u(sc.Orig)})
	}
	if c.RopeSections != [4]int{} {
		sec := make([]int32, 4)
		for i, n := range c.RopeSections {
			sec[i] = int32(n)
		}
		kv = append(kv, gguf.KV{Key: a + "rope.dimension_sections", Value: gguf.ArrayValue(sec)})
	}
	if c.Deepstack > 0 {
		kv = append(kv, gguf.KV{Key: a + "n_deepstack_layers", Value: u(c.Deepstack)})
	}
	if c.RopeLong != nil {
		kv = append(kv, gguf.KV{Key: a + "rope.scaling.original_context_length", Value: u(c.RopeOrigContext)},
			gguf.KV{Key: a + "rope.scaling.attn_factor", Value: gguf.Float32Value(c.RopeScale)})
	}
	return kv
}

// familyTensors adds to tensors what c's family stores beyond the Llama
// family's: LongRoPE's factors.
func familyTensors(c models.Config, tensors []gguf.WriteTensor) []gguf.WriteTensor {
	if c.RopeLong == nil {
		return tensors
	}
	for _, f := range []struct {
		name string
		vals []float32
	}{{"rope_factors_long.weight", c.RopeLong}, {"rope_factors_short.weight", c.RopeFactors}} {
		data, _ := dtype.Quantize(dtype.F32, f.vals)
		tensors = append(tensors, gguf.WriteTensor{Name: f.name, Dims: []uint64{uint64(len(f.vals))}, Type: dtype.F32, Data: data})
	}
	return tensors
}

// fusedWriter stores Phi-3's projections as its files do: q, k and v as
// one attn_qkv, gate and up as one ffn_up (gate rows first). put receives
// every other tensor as it comes, and the fused ones once complete.
type fusedWriter struct {
	put     func(name string, shape []int, vals []float32) error
	pending map[string][]float32
}

func (f *fusedWriter) tensor(name string, shape []int, vals []float32) error {
	var l int
	var kind string
	if f.pending == nil {
		f.pending = map[string][]float32{}
	}
	if n, _ := sscanLayer(name, &l, &kind); n != 2 {
		return f.put(name, shape, vals)
	}
	join := func(parts []string, fused string) error {
		var all []float32
		rows := 0
		for _, p := range parts {
			all = append(all, f.pending[models.LayerTensor(l, p)]...)
			delete(f.pending, models.LayerTensor(l, p))
		}
		rows = len(all) / shape[1]
		return f.put(models.LayerTensor(l, fused), []int{rows, shape[1]}, all)
	}
	switch kind {
	case models.AttnQ + ".weight", models.AttnK + ".weight", models.FFNGate + ".weight":
		f.pending[name] = vals
		return nil
	case models.AttnV + ".weight":
		f.pending[name] = vals
		return join([]string{models.AttnQ, models.AttnK, models.AttnV}, models.AttnQKV)
	case models.FFNUp + ".weight":
		f.pending[name] = vals
		return join([]string{models.FFNGate, models.FFNUp}, models.FFNUp)
	}
	return f.put(name, shape, vals)
}

// sscanLayer reads "blk.N.KIND" into l and kind.
func sscanLayer(name string, l *int, kind *string) (int, error) {
	return fmt.Sscanf(name, "blk.%d.%s", l, kind)
}

// familyVocabulary gives the vocabulary the special tokens the family's
// readers look for: llama.cpp finds Phi-3's end of turn by name
// (<|end|>), so the last pieces become Phi-3's chat tokens.
func familyVocabulary(c models.Config, pieces []string, types []int32) {
	if c.Arch != "phi3" {
		return
	}
	for i, p := range []string{"<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>"} {
		at := len(pieces) - 5 + i
		pieces[at], types[at] = p, 3
	}
}
