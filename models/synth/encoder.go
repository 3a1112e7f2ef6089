package synth

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
)

// Encoder shapes: BERT-family embedding models, as their published configs
// set them (all-MiniLM-L6-v2, nomic-embed-text-v1.5), and tiny ones for
// tests, including a reranker (a classification head, rank pooling).
var encoderShapes = []Shape{
	{"all-minilm-l6", bert(models.Config{Dim: 384, FFN: 1536, Layers: 6, Heads: 12, Vocab: 30522, Context: 512}, models.PoolMean, 0)},
	{"nomic-embed-text", nomicBert(models.Config{Dim: 768, FFN: 3072, Layers: 12, Heads: 12, Vocab: 30528, Context: 2048})},
	{"tiny-bert", bert(models.Config{Dim: 64, FFN: 96, Layers: 2, Heads: 4, Vocab: 600, Context: 512}, models.PoolMean, 0)},
	{"tiny-bert-cls", bert(models.Config{Dim: 64, FFN: 96, Layers: 2, Heads: 4, Vocab: 600, Context: 512}, models.PoolCLS, 0)},
	{"tiny-nomic-bert", nomicBert(models.Config{Dim: 64, FFN: 96, Layers: 2, Heads: 4, Vocab: 600, Context: 512})},
	{"tiny-reranker", bert(models.Config{Dim: 64, FFN: 96, Layers: 2, Heads: 4, Vocab: 600, Context: 512}, models.PoolRank, 1)},
}

func bert(c models.Config, pool models.Pooling, classes int) models.Config {
	c.Arch, c.KVHeads, c.HeadDim, c.RopeDim = "bert", c.Heads, c.Dim/c.Heads, c.Dim/c.Heads
	c.NormEps, c.RopeTheta, c.Act, c.Pooling = 1e-12, 10000, models.GELU, pool
	c.Encoder = models.EncoderConfig{On: true, Positions: true, TokenTypes: 2, Biases: true, Classes: classes}
	return c
}

func nomicBert(c models.Config) models.Config {
	c.Arch, c.KVHeads, c.HeadDim, c.RopeDim = "nomic-bert", c.Heads, c.Dim/c.Heads, c.Dim/c.Heads
	c.NormEps, c.RopeTheta, c.Rope, c.Act, c.Pooling = 1e-12, 1000, models.RopeHalves, models.SiLU, models.PoolMean
	c.Encoder = models.EncoderConfig{On: true, TokenTypes: 2, Gated: true}
	return c
}

// writeEncoder writes an encoder of shape s as llama.cpp's converter
// would: its bert or nomic-bert keys, a WordPiece vocabulary in GGUF's
// form, nomic-bert's q, k and v fused into attn_qkv.
func writeEncoder(w io.Writer, s Shape, t dtype.Type, seed uint64) error {
	c := s.Config
	rng := rand.New(rand.NewPCG(seed, 0xbe27))
	var tensors []gguf.WriteTensor
	put := func(name string, shape []int, vals []float32) error {
		dims := make([]uint64, len(shape))
		for i, d := range shape {
			dims[len(dims)-1-i] = uint64(d)
		}
		typ := t
		if len(shape) == 1 || name == models.TokenTypes || name == models.PositionEmbed {
			typ = dtype.F32 // vectors and the small lookup tables stay f32
		}
		data, err := dtype.Quantize(typ, vals)
		if err != nil {
			return fmt.Errorf("synth %s: %w", name, err)
		}
		tensors = append(tensors, gguf.WriteTensor{Name: name, Dims: dims, Type: typ, Data: data})
		return nil
	}
	var qkv [][]float32 // nomic-bert: q, k, v of the layer, fused when v arrives
	for _, want := range models.EncoderTensors(c) {
		vals := make([]float32, want.Elements())
		in := want.Shape[len(want.Shape)-1]
		switch {
		case strings.HasSuffix(want.Name, ".bias"):
			for i := range vals {
				vals[i] = 0.1 * (2*rng.Float32() - 1)
			}
		case len(want.Shape) == 1: // LayerNorm gains
			for i := range vals {
				vals[i] = 1 + float32(0.1*(rng.Float32()-0.5))
			}
		default:
			a := float32(math.Sqrt(3 / float64(in)))
			for i := range vals {
				vals[i] = a * (2*rng.Float32() - 1)
			}
		}
		if c.Arch == "nomic-bert" && isQKV(want.Name) {
			qkv = append(qkv, vals)
			if len(qkv) < 3 {
				continue
			}
			l := strings.TrimSuffix(strings.TrimPrefix(want.Name, "blk."), "."+models.AttnV+".weight")
			var fused []float32
			for _, p := range qkv {
				fused = append(fused, p...)
			}
			qkv = nil
			if err := put("blk."+l+"."+models.AttnQKV+".weight", []int{3 * c.Dim, c.Dim}, fused); err != nil {
				return err
			}
			continue
		}
		if err := put(want.Name, want.Shape, vals); err != nil {
			return err
		}
	}
	return gguf.Write(w, encoderMetadata(s), tensors)
}

func isQKV(name string) bool {
	for _, k := range []string{models.AttnQ, models.AttnK, models.AttnV} {
		if strings.HasSuffix(name, "."+k+".weight") {
			return true
		}
	}
	return false
}

// encoderMetadata is llama.cpp's metadata of an encoder: architecture keys,
// pooling, and a bert (WordPiece) tokenizer with [CLS], [SEP], [UNK],
// [PAD] and [MASK] at bert-base-uncased's ids.
func encoderMetadata(s Shape) []gguf.KV {
	c := s.Config
	u := func(v int) gguf.Value { return gguf.Uint32Value(uint32(v)) }
	a := c.Arch + "."
	kv := []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue(c.Arch)},
		{Key: "general.name", Value: gguf.StringValue("synthetic " + s.Name)},
		{Key: a + "context_length", Value: u(c.Context)},
		{Key: a + "embedding_length", Value: u(c.Dim)},
		{Key: a + "feed_forward_length", Value: u(c.FFN)},
		{Key: a + "block_count", Value: u(c.Layers)},
		{Key: a + "attention.head_count", Value: u(c.Heads)},
		{Key: a + "attention.layer_norm_epsilon", Value: gguf.Float32Value(c.NormEps)},
		{Key: a + "attention.causal", Value: gguf.BoolValue(false)},
		{Key: a + "pooling_type", Value: u(int(c.Pooling))},
	}
	if c.Arch == "nomic-bert" {
		kv = append(kv, gguf.KV{Key: a + "rope.freq_base", Value: gguf.Float32Value(float32(c.RopeTheta))})
	}
	pieces, types := WordPieceVocabulary(c.Vocab)
	ggufPieces := make([]string, len(pieces))
	for i, p := range pieces { // llama.cpp's converter: "▁" before word-initial pieces, continuations bare
		switch {
		case strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]"):
			ggufPieces[i] = p
		case strings.HasPrefix(p, "##"):
			ggufPieces[i] = p[2:]
		default:
			ggufPieces[i] = "▁" + p
		}
	}
	return append(kv, []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("bert")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(ggufPieces)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.ArrayValue(types)},
		{Key: "tokenizer.ggml.token_type_count", Value: u(c.Encoder.TokenTypes)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: u(100)},
		{Key: "tokenizer.ggml.cls_token_id", Value: u(101)},
		{Key: "tokenizer.ggml.seperator_token_id", Value: u(102)},
		{Key: "tokenizer.ggml.padding_token_id", Value: u(0)},
		{Key: "tokenizer.ggml.mask_token_id", Value: u(103)},
	}...)
}

// WordPieceVocabulary makes a WordPiece vocabulary of n ≥ 104 pieces laid
// out like bert-base-uncased's: [PAD], [unused…], [UNK] at 100, [CLS],
// [SEP], [MASK], then every printable ASCII character but upper case, a
// few accented letters and CJK ideographs, each also as a continuation
// ("##a"), then lower-case letter strings as words and continuations.
// types are GGUF token types (control for the special tokens).
func WordPieceVocabulary(n int) (pieces []string, types []int32) {
	add := func(p string, typ int32) {
		if len(pieces) < n {
			pieces, types = append(pieces, p), append(types, typ)
		}
	}
	add("[PAD]", 3)
	for i := 0; len(pieces) < 100; i++ {
		add(fmt.Sprintf("[unused%d]", i), 5)
	}
	add("[UNK]", 2)
	add("[CLS]", 3)
	add("[SEP]", 3)
	add("[MASK]", 3)
	var chars []string
	for r := '!'; r <= '~'; r++ {
		if r < 'A' || r > 'Z' {
			chars = append(chars, string(r))
		}
	}
	chars = append(chars, strings.Split("ß,æ,ø,ł,я,ж,α,ω,中,文,字,日,本,語", ",")...)
	for _, ch := range chars {
		add(ch, 1)
	}
	for _, ch := range chars {
		add("##"+ch, 1)
	}
	seen := map[string]bool{}
	for length := 2; len(pieces) < n; length++ {
		for i := 0; len(pieces) < n; i++ {
			word := letters(i, length)
			if word == "" {
				break
			}
			for _, p := range []string{word, "##" + word} {
				if !seen[p] {
					seen[p] = true
					add(p, 1)
				}
			}
		}
	}
	return pieces, types
}
