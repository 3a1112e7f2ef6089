package models

import (
	"fmt"

	"github.com/tessera-llm/tessera/models/gguf"
)

// Pooling says how an embedding model turns the rows of a sequence into one
// vector; the values are llama.cpp's (GGUF's <arch>.pooling_type).
type Pooling int

const (
	PoolNone Pooling = iota // a generative model: no embedding
	PoolMean                // the mean of every row (all-MiniLM, nomic-embed-text)
	PoolCLS                 // the first row, [CLS] (bge)
	PoolLast                // the last row (Qwen3-Embedding)
	PoolRank                // [CLS] through the classification head: a reranker's score
)

func (p Pooling) String() string {
	switch p {
	case PoolMean:
		return "mean"
	case PoolCLS:
		return "cls"
	case PoolLast:
		return "last"
	case PoolRank:
		return "rank"
	}
	return "none"
}

// EncoderConfig is what BERT-family encoders (GGUF architectures bert and
// nomic-bert) add to a Config. Their blocks are post-norm: x = LN(x +
// attention(x)), then x = LN(x + ffn(x)), with LayerNorms that have biases,
// after token (plus token-type, plus absolute position) embeddings and
// their own LayerNorm; attention sees the whole sequence.
type EncoderConfig struct {
	On bool
	// Positions: learned absolute position embeddings (BERT's
	// position_embd, Context rows); otherwise RoPE rotates q and k
	// (nomic-bert).
	Positions bool
	// TokenTypes is the number of token-type (segment) embeddings; 0
	// when the model has none.
	TokenTypes int
	// Gated: the feed-forward is SwiGLU over ffn_gate and ffn_up
	// (nomic-bert); otherwise ffn_up, the activation, ffn_down (BERT,
	// with GELU).
	Gated bool
	// Biases: q, k, v, the attention output and the feed-forward's
	// projections add biases (BERT; nomic-bert has none).
	Biases bool
	// Classes is the number of outputs of a reranker's classification
	// head (cls, then tanh, then cls.output); 0 when there is none.
	Classes int
}

// Encoder tensor names, as llama.cpp's bert and nomic-bert architectures
// spell them (LayerNorm biases are the same names with .bias).
const (
	TokenTypes       = "token_types.weight"
	PositionEmbed    = "position_embd.weight"
	TokenEmbedNorm   = "token_embd_norm"
	AttnQKV          = "attn_qkv"          // nomic-bert's fused q, k, v: split at load
	AttnOutputNorm   = "attn_output_norm"  // after attention's residual
	LayerOutputNorm  = "layer_output_norm" // after the feed-forward's residual
	ClassifierHidden = "cls"               // the pooler: [Dim, Dim], then tanh
	ClassifierOutput = "cls.output"        // [Classes, Dim]
)

// isEncoderArch reports the GGUF architectures that are BERT-family encoders.
func isEncoderArch(arch string) bool { return arch == "bert" || arch == "nomic-bert" }

// encoderGGUF reads what an encoder's GGUF adds, as llama.cpp does: the
// LayerNorm epsilon, token types, pooling, and from the tensors present
// whether positions are learned, the feed-forward gated and projections
// biased; nomic-bert's fused attn_qkv becomes attn_q, attn_k and attn_v.
func encoderGGUF(m *Model, f *gguf.File, md *metaReader) error {
	c := &m.Config
	if v, ok := f.Uint(md.prefix + "pooling_type"); ok {
		c.Pooling = Pooling(v)
	}
	if !isEncoderArch(c.Arch) {
		return nil
	}
	if causal, ok := f.Bool(md.prefix + "attention.causal"); ok && causal {
		return fmt.Errorf("%sattention.causal is true: a causal encoder is not supported", md.prefix)
	}
	c.NormEps = float32(md.float("attention.layer_norm_epsilon", 1e-12))
	if c.Pooling == PoolNone {
		c.Pooling = PoolCLS // llama.cpp's default for BERT
	}
	e := &c.Encoder
	e.On = true
	if t, ok := m.Tensors[TokenTypes]; ok && len(t.Shape) == 2 {
		e.TokenTypes = t.Shape[0]
	}
	_, e.Positions = m.Tensors[PositionEmbed]
	_, e.Gated = m.Tensors[LayerTensor(0, FFNGate)]
	_, e.Biases = m.Tensors[LayerBias(0, AttnOutput)]
	if t, ok := m.Tensors[ClassifierOutput+".weight"]; ok && len(t.Shape) == 2 {
		e.Classes = t.Shape[0]
	}
	c.Act = GELU
	if e.Gated {
		c.Act = SiLU
	}
	if e.Positions {
		c.Rope = RopeHalves // unused: no rotation
	}
	for l := range c.Layers {
		if err := splitQKV(m, l); err != nil {
			return err
		}
	}
	return nil
}

// splitQKV replaces layer l's fused attn_qkv (rows q, then k, then v) by
// three tensors that read their rows of it. Every ggml type stores a row
// in whole blocks, so a row range is a byte range.
func splitQKV(m *Model, l int) error {
	name := LayerTensor(l, AttnQKV)
	t, ok := m.Tensors[name]
	if !ok {
		return nil
	}
	c := m.Config
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	if len(t.Shape) != 2 || t.Shape[0] != q+2*kv {
		return fmt.Errorf("tensor %s has shape %v, want [%d %d]", name, t.Shape, q+2*kv, c.Dim)
	}
	rows, read := t.Shape[0], t.Raw
	part := func(kind string, r0, n int) {
		nm := LayerTensor(l, kind)
		m.Tensors[nm] = NewTensor(nm, []int{n, t.Shape[1]}, t.Type, func() ([]byte, error) {
			raw, err := read()
			if err != nil {
				return nil, err
			}
			row := len(raw) / rows
			return raw[r0*row : (r0+n)*row], nil
		})
	}
	part(AttnQ, 0, q)
	part(AttnK, q, kv)
	part(AttnV, q+kv, kv)
	delete(m.Tensors, name)
	if b, ok := m.Tensors[LayerBias(l, AttnQKV)]; ok { // a fused bias, split likewise
		vals, bread := b.Shape, b.Raw
		if len(vals) != 1 || vals[0] != q+2*kv {
			return fmt.Errorf("tensor %s has shape %v, want [%d]", b.Name, b.Shape, q+2*kv)
		}
		for _, p := range []struct {
			kind  string
			r0, n int
		}{{AttnQ, 0, q}, {AttnK, q, kv}, {AttnV, q + kv, kv}} {
			nm := LayerBias(l, p.kind)
			r0, n := p.r0, p.n
			m.Tensors[nm] = NewTensor(nm, []int{n}, b.Type, func() ([]byte, error) {
				raw, err := bread()
				if err != nil {
					return nil, err
				}
				el := len(raw) / (q + 2*kv)
				return raw[r0*el : (r0+n)*el], nil
			})
		}
		delete(m.Tensors, b.Name)
	}
	return nil
}

// EncoderTensors lists the tensors an encoder of config c needs, with
// their shapes.
func EncoderTensors(c Config) []Tensor {
	e := c.Encoder
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	vec := func(name string, n int) []Tensor {
		return []Tensor{{Name: name + ".weight", Shape: []int{n}}, {Name: name + ".bias", Shape: []int{n}}}
	}
	ts := []Tensor{{Name: TokenEmbedding, Shape: []int{c.Vocab, c.Dim}}}
	ts = append(ts, vec(TokenEmbedNorm, c.Dim)...)
	if e.TokenTypes > 0 {
		ts = append(ts, Tensor{Name: TokenTypes, Shape: []int{e.TokenTypes, c.Dim}})
	}
	if e.Positions {
		ts = append(ts, Tensor{Name: PositionEmbed, Shape: []int{c.Context, c.Dim}})
	}
	for l := range c.Layers {
		layer := func(kind string, shape ...int) Tensor { return Tensor{Name: LayerTensor(l, kind), Shape: shape} }
		bias := func(kind string, n int) Tensor { return Tensor{Name: LayerBias(l, kind), Shape: []int{n}} }
		ts = append(ts, layer(AttnQ, q, c.Dim), layer(AttnK, kv, c.Dim), layer(AttnV, kv, c.Dim),
			layer(AttnOutput, c.Dim, q), layer(FFNUp, c.FFN, c.Dim), layer(FFNDown, c.Dim, c.FFN),
			layer(AttnOutputNorm, c.Dim), bias(AttnOutputNorm, c.Dim),
			layer(LayerOutputNorm, c.Dim), bias(LayerOutputNorm, c.Dim))
		if e.Gated {
			ts = append(ts, layer(FFNGate, c.FFN, c.Dim))
		}
		if e.Biases {
			ts = append(ts, bias(AttnQ, q), bias(AttnK, kv), bias(AttnV, kv), bias(AttnOutput, c.Dim),
				bias(FFNUp, c.FFN), bias(FFNDown, c.Dim))
		}
	}
	if e.Classes > 0 {
		ts = append(ts, Tensor{Name: ClassifierHidden + ".weight", Shape: []int{c.Dim, c.Dim}},
			Tensor{Name: ClassifierHidden + ".bias", Shape: []int{c.Dim}},
			Tensor{Name: ClassifierOutput + ".weight", Shape: []int{e.Classes, c.Dim}},
			Tensor{Name: ClassifierOutput + ".bias", Shape: []int{e.Classes}})
	}
	return ts
}
