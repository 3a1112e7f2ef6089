package runtime

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// encoder is the forward pass of BERT-family encoders (GGUF bert and
// nomic-bert) over one backend: every sequence of a batch is whole, its
// attention bidirectional, and what comes out is one pooled row per
// sequence (or a reranker's scores), not logits. Keys and values go to a
// scratch cache that only lives for the step: one block table per
// sequence, no cache across steps.
type encoder struct {
	cfg     models.Config
	be      backend.Backend
	maxRows int // tokens per forward
	maxSeqs int // sequences per forward

	embed, types, positions backend.Weight
	embedNorm               norm
	layers                  []encoderLayer
	cls, clsBias            backend.Weight // a reranker's head
	clsOut, clsOutBias      backend.Weight

	x, xb, q, k, v, att, up, gate backend.Tensor // maxRows rows
	pooled, hidden, scores        backend.Tensor // maxSeqs rows
	kv                            backend.KV
	rope                          backend.Rope
	attn                          backend.Attention
}

// norm is a LayerNorm's gain and bias.
type norm struct{ w, b backend.Weight }

type encoderLayer struct {
	wq, wk, wv, wo, up, gate, down backend.Weight
	bq, bk, bv, bo, bUp, bDown     backend.Weight // with Encoder.Biases
	attnNorm, outNorm              norm
}

// encoderBlock is the scratch cache's block size.
const encoderBlock = 16

// newEncoder uploads m's weights to be for batches of up to maxRows tokens
// in up to maxSeqs sequences.
func newEncoder(m *models.Model, be backend.Backend, ws WeightStorage, maxRows, maxSeqs int) (*encoder, error) {
	c := m.Config
	e := c.Encoder
	n := &encoder{cfg: c, be: be, maxRows: maxRows, maxSeqs: maxSeqs}
	upload := func(name string, matrix bool) (backend.Weight, error) {
		t, err := m.Tensor(name)
		if err != nil {
			return nil, err
		}
		s := backend.F32
		if matrix {
			s = ws.For(t, c)
		}
		w, err := be.UploadAs(t, s)
		if err != nil {
			return nil, fmt.Errorf("upload %s as %s: %w", name, s, err)
		}
		return w, nil
	}
	type named struct {
		dst    *backend.Weight
		name   string
		matrix bool // stored as WeightStorage says; vectors and lookup tables stay f32
	}
	ws0 := []named{{&n.embed, models.TokenEmbedding, true},
		{&n.embedNorm.w, models.TokenEmbedNorm + ".weight", false}, {&n.embedNorm.b, models.TokenEmbedNorm + ".bias", false}}
	if e.TokenTypes > 0 {
		ws0 = append(ws0, named{&n.types, models.TokenTypes, false})
	}
	if e.Positions {
		ws0 = append(ws0, named{&n.positions, models.PositionEmbed, false})
	}
	if e.Classes > 0 {
		ws0 = append(ws0, named{&n.cls, models.ClassifierHidden + ".weight", true}, named{&n.clsBias, models.ClassifierHidden + ".bias", false},
			named{&n.clsOut, models.ClassifierOutput + ".weight", false}, named{&n.clsOutBias, models.ClassifierOutput + ".bias", false})
	}
	n.layers = make([]encoderLayer, c.Layers)
	for l := range n.layers {
		lw := &n.layers[l]
		w, b := models.LayerTensor, models.LayerBias
		ws0 = append(ws0, named{&lw.wq, w(l, models.AttnQ), true}, named{&lw.wk, w(l, models.AttnK), true},
			named{&lw.wv, w(l, models.AttnV), true}, named{&lw.wo, w(l, models.AttnOutput), true},
			named{&lw.up, w(l, models.FFNUp), true}, named{&lw.down, w(l, models.FFNDown), true},
			named{&lw.attnNorm.w, w(l, models.AttnOutputNorm), false}, named{&lw.attnNorm.b, b(l, models.AttnOutputNorm), false},
			named{&lw.outNorm.w, w(l, models.LayerOutputNorm), false}, named{&lw.outNorm.b, b(l, models.LayerOutputNorm), false})
		if e.Gated {
			ws0 = append(ws0, named{&lw.gate, w(l, models.FFNGate), true})
		}
		if e.Biases {
			ws0 = append(ws0, named{&lw.bq, b(l, models.AttnQ), false}, named{&lw.bk, b(l, models.AttnK), false},
				named{&lw.bv, b(l, models.AttnV), false}, named{&lw.bo, b(l, models.AttnOutput), false},
				named{&lw.bUp, b(l, models.FFNUp), false}, named{&lw.bDown, b(l, models.FFNDown), false})
		}
	}
	var err error
	for _, w := range ws0 {
		if *w.dst, err = upload(w.name, w.matrix); err != nil {
			return nil, err
		}
	}
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	for _, t := range []struct {
		dst        *backend.Tensor
		rows, cols int
	}{
		{&n.x, maxRows, c.Dim}, {&n.xb, maxRows, c.Dim}, {&n.q, maxRows, qDim}, {&n.k, maxRows, kvDim},
		{&n.v, maxRows, kvDim}, {&n.att, maxRows, qDim}, {&n.up, maxRows, c.FFN}, {&n.gate, maxRows, c.FFN},
		{&n.pooled, maxSeqs, c.Dim}, {&n.hidden, maxSeqs, c.Dim}, {&n.scores, maxSeqs, max(e.Classes, 1)},
	} {
		if *t.dst, err = be.NewTensor(t.rows, t.cols); err != nil {
			return nil, err
		}
	}
	// Each sequence wastes at most one partial block.
	if n.kv, err = be.NewKV(backend.KVShape{Layers: 1, Blocks: maxRows/encoderBlock + maxSeqs, BlockSize: encoderBlock,
		Heads: c.KVHeads, HeadDim: c.HeadDim}); err != nil {
		return nil, err
	}
	n.rope = backend.Rope{Heads: c.Heads, HeadDim: c.HeadDim, Dim: c.RopeDim, Theta: c.RopeTheta, Layout: c.Rope}
	n.attn = backend.Attention{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		Scale: float32(1 / math.Sqrt(float64(c.HeadDim))), Bidirectional: true}
	return n, nil
}

// encoderInput is one sequence to encode: its tokens and their types (nil:
// all 0).
type encoderInput struct{ tokens, types []int32 }

// batch lays out inputs as one step: rows in order, sequence s in blocks
// of its own.
func (n *encoder) batch(inputs []encoderInput) backend.Batch {
	b := backend.Batch{BlockSize: encoderBlock}
	block, typed := int32(0), false
	for _, in := range inputs {
		typed = typed || in.types != nil
	}
	for s, in := range inputs {
		var table []int32
		for range (len(in.tokens) + encoderBlock - 1) / encoderBlock {
			table = append(table, block)
			block++
		}
		b.Tables = append(b.Tables, table)
		for p, t := range in.tokens {
			b.Tokens = append(b.Tokens, t)
			b.Pos = append(b.Pos, int32(p))
			b.Seq = append(b.Seq, int32(s))
			if typed {
				ty := int32(0)
				if in.types != nil {
					ty = in.types[p]
				}
				b.Types = append(b.Types, ty)
			}
		}
	}
	return b
}

// forward queues the encoder over inputs (at most maxSeqs sequences of at
// most maxRows tokens in all) and the pooling; the pooled rows end up in
// n.pooled, a reranker's scores in n.scores.
func (n *encoder) forward(inputs []encoderInput) error {
	be, c := n.be, n.cfg
	batch := n.batch(inputs)
	if err := be.Begin(batch); err != nil {
		return err
	}
	// Embeddings: token + token type + absolute position, then a LayerNorm.
	be.Embed(n.xb, n.embed)
	if n.types != nil {
		be.Lookup(n.x, n.types, backend.ByType)
		be.Add(n.xb, n.x)
	}
	if n.positions != nil {
		be.Lookup(n.x, n.positions, backend.ByPos)
		be.Add(n.xb, n.x)
	}
	be.LayerNorm(n.x, n.xb, n.embedNorm.w, n.embedNorm.b, c.NormEps)
	for _, w := range n.layers {
		// Attention block: x = LN(x + Wo·attend(Wq·x, Wk·x, Wv·x)), every
		// row seeing its whole sequence.
		n.linear(n.q, n.x, w.wq, w.bq)
		n.linear(n.k, n.x, w.wk, w.bk)
		n.linear(n.v, n.x, w.wv, w.bv)
		if n.positions == nil {
			be.Rope(n.q, n.rope)
			k := n.rope
			k.Heads = c.KVHeads
			be.Rope(n.k, k)
		}
		be.StoreKV(n.kv, 0, n.k, n.v)
		be.Attend(n.att, n.q, n.kv, 0, n.attn)
		n.linear(n.xb, n.att, w.wo, w.bo)
		be.Add(n.xb, n.x)
		be.LayerNorm(n.x, n.xb, w.attnNorm.w, w.attnNorm.b, c.NormEps)

		// Feed-forward block: x = LN(x + W_down·act(W_up·x)), or SwiGLU.
		n.linear(n.up, n.x, w.up, w.bUp)
		h := n.up
		if w.gate != nil {
			be.MatMul(n.gate, n.x, w.gate)
			be.GLU(n.gate, n.up, models.SiLU)
			h = n.gate
		} else {
			be.Activate(n.up, c.Act)
		}
		n.linear(n.xb, h, w.down, w.bDown)
		be.Add(n.xb, n.x)
		be.LayerNorm(n.x, n.xb, w.outNorm.w, w.outNorm.b, c.NormEps)
	}

	// Pooling: one row per sequence.
	switch c.Pooling {
	case models.PoolMean:
		be.MeanPool(n.pooled, n.x)
	case models.PoolCLS, models.PoolRank, models.PoolLast:
		row := 0
		for s, in := range inputs {
			at := row
			if c.Pooling == models.PoolLast {
				at = row + len(in.tokens) - 1
			}
			be.CopyRow(n.pooled, s, n.x, at)
			row += len(in.tokens)
		}
	default:
		return fmt.Errorf("encoder: pooling %s", c.Pooling)
	}
	if c.Pooling == models.PoolRank {
		// The classification head: tanh(W·cls + b), then the output layer.
		n.linear(n.hidden, n.pooled, n.cls, n.clsBias)
		be.Activate(n.hidden, models.Tanh)
		n.linear(n.scores, n.hidden, n.clsOut, n.clsOutBias)
	}
	return nil
}

// linear sets dst = x·wᵀ + b (b may be nil).
func (n *encoder) linear(dst, x backend.Tensor, w, b backend.Weight) {
	n.be.MatMul(dst, x, w)
	if b != nil {
		n.be.AddBias(dst, b)
	}
}

// weightBytes adds up the sizes of the uploaded weights.
func (n *encoder) weightBytes() int64 {
	var total int64
	add := func(ws ...backend.Weight) {
		for _, w := range ws {
			if w != nil {
				total += w.Bytes()
			}
		}
	}
	add(n.embed, n.types, n.positions, n.embedNorm.w, n.embedNorm.b, n.cls, n.clsBias, n.clsOut, n.clsOutBias)
	for _, w := range n.layers {
		add(w.wq, w.wk, w.wv, w.wo, w.up, w.gate, w.down, w.bq, w.bk, w.bv, w.bo, w.bUp, w.bDown,
			w.attnNorm.w, w.attnNorm.b, w.outNorm.w, w.outNorm.b)
	}
	return total
}
