package synth

import (
	"math"
	"unicode/utf8"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/gguf"
)

// Gemma 4 at E2B's and E4B's published text configs, and a tiny shape
// with every difference from Gemma 3: sliding and global layers of
// different head widths and kv heads, a proportional rotation of a
// quarter of the global heads, shared keys and values in the last
// layers (a sliding and a global one among them), feed-forwards twice as
// wide there, per-layer token embeddings.
var gemma4Shapes = []Shape{
	{Name: "gemma-4-e2b", Config: gemma4(models.Config{Arch: "gemma4", Dim: 1536, Layers: 35, Heads: 8, KVHeads: 1, HeadDim: 512,
		Vocab: 262144, Context: 131072, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 512},
		models.Gemma4{LocalHeadDim: 256, LocalKVHeads: 1, LocalRopeDim: 256, SharedKV: 20, PerLayer: 256}, 5, 512, 6144, true)},
	{Name: "gemma-4-e4b", Config: gemma4(models.Config{Arch: "gemma4", Dim: 2560, Layers: 42, Heads: 8, KVHeads: 2, HeadDim: 512,
		Vocab: 262144, Context: 131072, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 512},
		models.Gemma4{LocalHeadDim: 256, LocalKVHeads: 2, LocalRopeDim: 256, SharedKV: 18, PerLayer: 256}, 6, 512, 10240, false)},
	// 31B: no per-layer inputs or shared layers; the global layers' values
	// are their keys (no attn_v).
	{Name: "gemma-4-31b", Config: vFromK(gemma4(models.Config{Arch: "gemma4", Dim: 5376, Layers: 60, Heads: 32, KVHeads: 4, HeadDim: 512,
		Vocab: 262144, Context: 262144, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 512},
		models.Gemma4{LocalHeadDim: 256, LocalKVHeads: 16, LocalRopeDim: 256}, 6, 1024, 21504, false))},
	// 26B-A4B: the 31B's attention at its own widths, and in every layer a
	// dense MLP of 2112 beside 128 experts of 704, 8 a token.
	{Name: "gemma-4-26b-a4b", Config: vFromK(gemma4(models.Config{Arch: "gemma4", Dim: 2816, Layers: 30, Heads: 16, KVHeads: 2, HeadDim: 512,
		Vocab: 262144, Context: 262144, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 512,
		MoE: models.MoEConfig{Experts: 128, Used: 8, FFN: 704, NormTopK: true}},
		models.Gemma4{LocalHeadDim: 256, LocalKVHeads: 8, LocalRopeDim: 256}, 6, 1024, 2112, false))},
	// 600 pieces: two-letter words, so that its vocabulary has merges.
	{Name: "tiny-gemma4", Config: gemma4(models.Config{Arch: "gemma4", Dim: 64, Layers: 9, Heads: 4, KVHeads: 1, HeadDim: 32,
		Vocab: 600, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 32},
		models.Gemma4{LocalHeadDim: 16, LocalKVHeads: 2, LocalRopeDim: 16, SharedKV: 3, PerLayer: 16}, 3, 10, 96, true)},
	// The 31B's kind at a tiny shape: global layers without attn_v.
	{Name: "tiny-gemma4-kv", Config: vFromK(gemma4(models.Config{Arch: "gemma4", Dim: 64, Layers: 6, Heads: 4, KVHeads: 1, HeadDim: 32,
		Vocab: 600, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 32},
		models.Gemma4{LocalHeadDim: 16, LocalKVHeads: 2, LocalRopeDim: 16}, 3, 10, 96, false))},
	// The real files' head widths at a tiny shape: global heads of 512
	// (a GQA group of 8) and sliding ones of 256, which the WebGPU
	// attention kernels take in forms of their own.
	{Name: "tiny-gemma4-wide", Config: vFromK(gemma4(models.Config{Arch: "gemma4", Dim: 64, Layers: 3, Heads: 8, KVHeads: 1, HeadDim: 512,
		Vocab: 600, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 512},
		models.Gemma4{LocalHeadDim: 256, LocalKVHeads: 2, LocalRopeDim: 256}, 3, 10, 96, false))},
	// 26B-A4B's kind: global layers without attn_v, a dense MLP beside 7
	// experts of which 3 run, 64 wide (whole blocks of Q4_0 and Q8_0, as
	// a file's quantized experts are).
	{Name: "tiny-gemma4-moe", Config: vFromK(gemma4(models.Config{Arch: "gemma4", Dim: 64, Layers: 6, Heads: 4, KVHeads: 1, HeadDim: 32,
		Vocab: 600, Context: 256, NormEps: 1e-6, RopeTheta: 1000000, RopeDim: 32,
		MoE: models.MoEConfig{Experts: 7, Used: 3, FFN: 64, NormTopK: true}},
		models.Gemma4{LocalHeadDim: 16, LocalKVHeads: 2, LocalRopeDim: 16}, 3, 10, 96, false))},
}

// vFromK makes c's global layers take their values from their keys'
// projection (attention_k_eq_v: no attn_v), as the 31B's and 26B-A4B's.
func vFromK(c models.Config) models.Config {
	c.Gemma4.VFromK = make([]bool, c.Layers)
	for l := range c.Layers {
		c.Gemma4.VFromK[l] = !c.Sliding[l]
	}
	return c
}

// gemma4Experts writes a Gemma 4's experts as the converter does: each
// layer's gate and up as one ffn_gate_up_exps [E, 2·ffn, dim], an
// expert's gate rows before its up rows. Each chunk of gate or up goes
// to its expert's place in the fused tensor as it comes (gate's before
// up's: the file's order of tensors is that of their first chunks, and
// up follows gate), so no stack is held whole. put receives every other
// tensor as it comes.
type gemma4Experts struct {
	put chunkFunc
}

func (g *gemma4Experts) chunk(name string, shape []int, at int, vals []float32) error {
	var l int
	var kind string
	if n, _ := sscanLayer(name, &l, &kind); n != 2 || len(shape) != 3 {
		return g.put(name, shape, at, vals)
	}
	var half int // where in an expert's fused rows this tensor's go
	switch kind {
	case models.FFNGateExps + ".weight":
	case models.FFNUpExps + ".weight":
		half = 1
	default:
		return g.put(name, shape, at, vals)
	}
	e, rows, in := shape[0], shape[1], shape[2]
	fused, shapeOut := models.LayerTensor(l, models.FFNGateUpExps), []int{e, 2 * rows, in}
	per := rows * in
	for len(vals) > 0 { // one expert's part of the chunk at a time
		x, r := at/per, at%per
		n := min(len(vals), per-r)
		if err := g.put(fused, shapeOut, (2*x+half)*per+r, vals[:n]); err != nil {
			return err
		}
		at, vals = at+n, vals[n:]
	}
	return nil
}

func init() { shapes = append(shapes, gemma4Shapes...) }

// gemma4 completes c as Gemma 4: every pattern-th layer global, the rest
// sliding over window positions with a RoPE base of 10,000; the global
// layers rotating a quarter of their dimensions (llama.cpp's rope_freqs:
// 1 for the pairs that rotate, 1e30 for the others); feed-forwards ffn
// wide, twice that in the shared layers when double; GeGLU, post-norms,
// q/k norms, unscaled scores, embeddings scaled by sqrt(dim), a final soft
// cap of 30.
func gemma4(c models.Config, g models.Gemma4, pattern, window, ffn int, double bool) models.Config {
	c.Rope, c.TiedEmbeddings = models.RopeHalves, true
	c.EmbedScale = float32(math.Sqrt(float64(c.Dim)))
	c.Act, c.PostNorms, c.QKNorm, c.QueryScale, c.FinalSoftcap = models.GELUTanh, true, true, 1, 30
	c.SlidingWindow, c.LocalRopeTheta = window, 10000
	c.Sliding = make([]bool, c.Layers)
	g.FFNs = make([]int, c.Layers)
	for l := range c.Layers {
		c.Sliding[l] = (l+1)%pattern != 0
		g.FFNs[l] = ffn
		if double && l >= c.Layers-g.SharedKV {
			g.FFNs[l] = 2 * ffn
		}
		c.FFN = max(c.FFN, g.FFNs[l])
	}
	c.RopeFactors = make([]float32, c.RopeDim/2)
	for i := range c.RopeFactors {
		c.RopeFactors[i] = 1
		if i >= c.RopeDim/8 { // partial_rotary_factor 0.25 of the pairs rotate
			c.RopeFactors[i] = 1e30
		}
	}
	c.Gemma4 = &g
	return c
}

// gemma4Metadata sets Gemma 4's keys in kv: the per-layer feed-forward
// widths and kv heads (arrays where layers differ), the sliding layers'
// shapes and RoPE base, the shared layers, the per-layer embedding width
// and the soft cap.
func gemma4Metadata(c models.Config, kv []gguf.KV) []gguf.KV {
	g := c.Gemma4
	if g == nil {
		return kv
	}
	a := c.Arch + "."
	u := func(v int) gguf.Value { return gguf.Uint32Value(uint32(v)) }
	ffn, heads := make([]uint32, c.Layers), make([]uint32, c.Layers)
	for l := range c.Layers {
		ffn[l], heads[l] = uint32(c.LayerFFN(l)), uint32(c.LayerKVHeads(l))
	}
	perLayer := func(vs []uint32) gguf.Value {
		for _, v := range vs {
			if v != vs[0] {
				return gguf.ArrayValue(vs)
			}
		}
		return u(int(vs[0]))
	}
	for i := range kv {
		switch kv[i].Key {
		case a + "feed_forward_length":
			kv[i].Value = perLayer(ffn)
		case a + "attention.head_count_kv":
			kv[i].Value = perLayer(heads)
		}
	}
	return append(kv,
		gguf.KV{Key: a + "attention.sliding_window_pattern", Value: gguf.ArrayValue(c.Sliding)},
		gguf.KV{Key: a + "attention.key_length_swa", Value: u(g.LocalHeadDim)},
		gguf.KV{Key: a + "attention.value_length_swa", Value: u(g.LocalHeadDim)},
		gguf.KV{Key: a + "rope.dimension_count_swa", Value: u(g.LocalRopeDim)},
		gguf.KV{Key: a + "rope.freq_base_swa", Value: gguf.Float32Value(float32(c.LocalRopeTheta))},
		gguf.KV{Key: a + "attention.shared_kv_layers", Value: u(g.SharedKV)},
		gguf.KV{Key: a + "embedding_length_per_layer_input", Value: u(g.PerLayer)},
		gguf.KV{Key: a + "final_logit_softcapping", Value: gguf.Float32Value(c.FinalSoftcap)},
	)
}

// Gemma 4's turn tokens, the last two pieces of a synthetic vocabulary.
const (
	gemma4TurnStart = "<|turn>"
	gemma4TurnEnd   = "<turn|>"
)

// gemma4Vocabulary makes kv's tokenizer Gemma 4's kind (tokenizer.ggml.model
// "gemma4"): synth's SentencePiece pieces, the last two its turn tokens
// (control; the end of turn its eot_token_id), and a merge for each piece
// of more than one character, its first characters with its last, ranked
// in the pieces' order; BOS always, no space prefix, as the converter
// writes them.
func gemma4Vocabulary(c models.Config, kv []gguf.KV) []gguf.KV {
	pieces, _, types := Vocabulary(c.Vocab)
	n := len(pieces)
	pieces[n-2], pieces[n-1] = gemma4TurnStart, gemma4TurnEnd
	types[n-2], types[n-1] = 3, 3
	have := map[string]bool{}
	for _, p := range pieces {
		have[p] = true
	}
	var merges []string
	for i, p := range pieces {
		if types[i] != 1 || utf8.RuneCountInString(p) < 2 {
			continue
		}
		_, size := utf8.DecodeLastRuneInString(p)
		if a, b := p[:len(p)-size], p[len(p)-size:]; have[a] && have[b] {
			merges = append(merges, a+" "+b)
		}
	}
	for i := range kv {
		switch kv[i].Key {
		case "tokenizer.ggml.model":
			kv[i].Value = gguf.StringValue("gemma4")
		case "tokenizer.ggml.tokens":
			kv[i].Value = gguf.ArrayValue(pieces)
		case "tokenizer.ggml.token_type":
			kv[i].Value = gguf.ArrayValue(types)
		}
	}
	return append(kv,
		gguf.KV{Key: "tokenizer.ggml.merges", Value: gguf.ArrayValue(merges)},
		gguf.KV{Key: "tokenizer.ggml.eot_token_id", Value: gguf.Uint32Value(uint32(n - 1))},
		gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: gguf.BoolValue(true)},
		gguf.KV{Key: "tokenizer.ggml.add_space_prefix", Value: gguf.BoolValue(false)},
	)
}
