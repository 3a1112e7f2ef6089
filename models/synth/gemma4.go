package synth

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/tessera-llm/tessera/models/dtype"

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

// gemma4ExpertsWhole is gemma4Experts for a writer of whole tensors (the
// Hugging Face folder's): each fused stack is gathered until its last
// expert's up rows have come.
func gemma4ExpertsWhole(put func(name string, shape []int, vals []float32) error) func(name string, shape []int, vals []float32) error {
	g := gatherer{}
	e := &gemma4Experts{put: func(name string, shape []int, at int, vals []float32) error {
		if all, ok := g.add(name, shape, at, vals); ok {
			return put(name, shape, all)
		}
		return nil
	}}
	return func(name string, shape []int, vals []float32) error { return e.chunk(name, shape, 0, vals) }
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

// gemma4Pieces is Gemma 4's synthetic vocabulary of n pieces: synth's
// SentencePiece pieces and types, the last two the turn tokens (control),
// and the merges ("a b") of each piece of more than one character, its
// first characters with its last, in the pieces' order.
func gemma4Pieces(n int) (pieces []string, types []int32, merges []string) {
	pieces, _, types = Vocabulary(n)
	n = len(pieces)
	pieces[n-2], pieces[n-1] = gemma4TurnStart, gemma4TurnEnd
	types[n-2], types[n-1] = 3, 3
	have := map[string]bool{}
	for _, p := range pieces {
		have[p] = true
	}
	for i, p := range pieces {
		if types[i] != 1 || utf8.RuneCountInString(p) < 2 {
			continue
		}
		_, size := utf8.DecodeLastRuneInString(p)
		if a, b := p[:len(p)-size], p[len(p)-size:]; have[a] && have[b] {
			merges = append(merges, a+" "+b)
		}
	}
	return pieces, types, merges
}

// gemma4TokenizerJSON is a tokenizer.json that encodes and decodes like
// the Gemma 4 tokenizer Write stores in the GGUF (read as llama.cpp reads
// Gemma 4's: tokenizer/gemma4.go): a BPE over characters with
// gemma4Pieces' merges, spaces normalised to ▁ (no space prefix), the
// text split into runs of newlines and of the rest, byte fallback, the
// control pieces special added tokens, a BOS before every text; decoding
// writes ▁ back as spaces.
func gemma4TokenizerJSON(vocab int) ([]byte, error) {
	pieces, types, merges := gemma4Pieces(vocab)
	ids := make(map[string]int, len(pieces))
	pairs := make([][2]string, 0, len(merges))
	for id, p := range pieces {
		ids[p] = id
	}
	for _, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		pairs = append(pairs, [2]string{a, b})
	}
	var added []map[string]any
	for id, p := range pieces {
		if types[id] == 3 {
			added = append(added, map[string]any{"id": id, "content": p, "single_word": false, "lstrip": false,
				"rstrip": false, "normalized": false, "special": true})
		}
	}
	bos := pieces[1]
	tok := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": added,
		"normalizer":   map[string]any{"type": "Replace", "pattern": map[string]string{"String": " "}, "content": "▁"},
		"pre_tokenizer": map[string]any{
			"type": "Split", "pattern": map[string]string{"Regex": "[^\n]+|[\n]+"}, "behavior": "Isolated", "invert": false,
		},
		"post_processor": map[string]any{
			"type":   "TemplateProcessing",
			"single": []any{map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"pair": []any{map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
				map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}}},
			"special_tokens": map[string]any{bos: map[string]any{"id": bos, "ids": []int{1}, "tokens": []string{bos}}},
		},
		"decoder": map[string]any{
			"type": "Sequence",
			"decoders": []any{
				map[string]any{"type": "Replace", "pattern": map[string]string{"String": "▁"}, "content": " "},
				map[string]any{"type": "ByteFallback"},
				map[string]any{"type": "Fuse"},
			},
		},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": pieces[0], "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": true, "byte_fallback": true, "ignore_merges": false, "vocab": ids, "merges": pairs,
		},
	}
	b, err := json.MarshalIndent(tok, "", "  ")
	return append(b, '\n'), err
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
	pieces, types, merges := gemma4Pieces(c.Vocab)
	n := len(pieces)
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

// gemma4ConfigJSON is config.json for Gemma 4 config c as Google publishes
// the models: a Gemma4ForConditionalGeneration (without its vision and
// audio towers) whose text_config the loader's gemma4HF reads back to c.
// It fails for a c those keys cannot express: layers whose kind, widths
// or rotation do not follow Gemma 4's rules.
func gemma4ConfigJSON(c models.Config, t dtype.Type) (map[string]any, error) {
	g := c.Gemma4
	switch {
	case c.EmbedScale != float32(math.Sqrt(float64(c.Dim))) || c.Act != models.GELUTanh || !c.PostNorms || !c.QKNorm || c.QueryScale != 1:
		return nil, errors.New("not Gemma 4's embedding scale, activation, norms and unscaled scores")
	case c.Rope != models.RopeHalves || c.QKVBias || c.AttnSoftcap != 0 || c.AttnGate:
		return nil, errors.New("not Gemma 4's attention")
	case len(c.Sliding) != c.Layers || c.Sliding[c.Layers-1]:
		return nil, errors.New("Gemma 4's last layer is full attention")
	case g.LocalRopeDim != g.LocalHeadDim || c.RopeDim != c.HeadDim:
		return nil, fmt.Errorf("rotations of %d of %d sliding and %d of %d global dimensions: Gemma 4 rotates whole heads (the global ones proportionally)",
			g.LocalRopeDim, g.LocalHeadDim, c.RopeDim, c.HeadDim)
	case c.MoE.On() && (!c.MoE.NormTopK || c.MoE.SharedFFN != 0 || c.MoE.Biases):
		return nil, errors.New("Gemma 4's experts renormalise their top k, without a shared expert or biases")
	}
	// The proportional rotation: the first pairs turn (factor 1), the
	// others not (1e30).
	turn := c.HeadDim / 2
	if f := c.RopeFactors; f != nil {
		turn = 0
		for turn < len(f) && f[turn] == 1 {
			turn++
		}
		for i, v := range f {
			if v != map[bool]float32{true: 1, false: 1e30}[i < turn] || turn == 0 || len(f) != c.HeadDim/2 {
				return nil, fmt.Errorf("rope factors %v are not a proportional rotation", f)
			}
		}
	}
	first := c.Layers - g.SharedKV
	ffn, double := g.FFNs[0], false
	for l, f := range g.FFNs {
		switch {
		case f == ffn:
		case l >= first && g.SharedKV > 0 && f == 2*ffn:
			double = true
		default:
			return nil, fmt.Errorf("feed-forward widths %v: Gemma 4's are one width, twice it in the shared layers", g.FFNs)
		}
	}
	for l := first; double && l < c.Layers; l++ {
		if g.FFNs[l] != 2*ffn {
			return nil, fmt.Errorf("feed-forward widths %v: every shared layer's or none doubled", g.FFNs)
		}
	}
	kEqV := g.VFromK != nil
	for l := range first {
		if g.LayerVFromK(l) != (kEqV && !c.Sliding[l]) {
			return nil, fmt.Errorf("layer %d's values from keys %v: Gemma 4 takes them so in every full layer or none", l, g.LayerVFromK(l))
		}
	}
	types := make([]string, c.Layers)
	for l := range types {
		types[l] = map[bool]string{true: "sliding_attention", false: "full_attention"}[c.Sliding[l]]
	}
	text := map[string]any{
		"model_type":                  "gemma4_text",
		"hidden_size":                 c.Dim,
		"intermediate_size":           ffn,
		"num_hidden_layers":           c.Layers,
		"num_attention_heads":         c.Heads,
		"num_key_value_heads":         g.LocalKVHeads,
		"num_global_key_value_heads":  nil,
		"head_dim":                    g.LocalHeadDim,
		"global_head_dim":             c.HeadDim,
		"attention_k_eq_v":            kEqV,
		"attention_bias":              false,
		"vocab_size":                  c.Vocab,
		"vocab_size_per_layer_input":  c.Vocab,
		"hidden_size_per_layer_input": g.PerLayer,
		"num_kv_shared_layers":        g.SharedKV,
		"use_double_wide_mlp":         double,
		"max_position_embeddings":     c.Context,
		"rms_norm_eps":                c.NormEps,
		"hidden_activation":           "gelu_pytorch_tanh",
		"final_logit_softcapping":     nullIfZero(c.FinalSoftcap),
		"sliding_window":              c.SlidingWindow,
		"layer_types":                 types,
		"tie_word_embeddings":         c.TiedEmbeddings,
		"enable_moe_block":            c.MoE.On(),
		"rope_parameters": map[string]any{
			"full_attention": map[string]any{"rope_type": "proportional", "rope_theta": c.RopeTheta,
				"partial_rotary_factor": float64(turn) / float64(c.HeadDim/2)},
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": c.LocalRopeTheta},
		},
		"dtype": map[dtype.Type]string{dtype.F32: "float32", dtype.F16: "float16", dtype.BF16: "bfloat16"}[t],
	}
	// The full layers' kv heads where they differ from the sliding
	// layers' (and always with attention_k_eq_v, which names them).
	if kEqV || c.KVHeads != g.LocalKVHeads {
		text["num_global_key_value_heads"] = c.KVHeads
	}
	if c.MoE.On() {
		text["num_experts"], text["top_k_experts"], text["moe_intermediate_size"] = c.MoE.Experts, c.MoE.Used, c.MoE.FFN
	}
	return map[string]any{
		"architectures":       []string{"Gemma4ForConditionalGeneration"},
		"model_type":          "gemma4",
		"tie_word_embeddings": c.TiedEmbeddings,
		"text_config":         text,
	}, nil
}
