// Package runtime is the engine: it loads a model onto a backend, runs the
// forward pass, samples and streams tokens.
package runtime

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// llama is the Llama-family forward pass over one backend: the weights, the
// activations (allocated once for a batch of up to maxBatch tokens) and one
// sequence's KV cache.
type llama struct {
	cfg      models.Config
	be       backend.Backend
	maxBatch int
	maxOut   int // rows of logits one step computes at most

	embed, outNorm, output backend.Weight
	layers                 []layerWeights

	headLoRA backend.LoRA // the output head's adapters, or nil
	adapted  bool         // the step being queued has rows with adapters

	x, xb, q, k, v, att, gate, up backend.Tensor // maxBatch rows
	post                          backend.Tensor // maxBatch rows, with PostNorms
	last, logits                  backend.Tensor // output rows: only the batch's Out rows are scored
	kv                            backend.KV
}

type layerWeights struct {
	attnNorm, wq, wk, wv, wo, ffnNorm, gate, up, down backend.Weight
	bq, bk, bv                                        backend.Weight // with QKVBias
	qNorm, kNorm                                      backend.Weight // with QKNorm
	attnPost, ffnPost                                 backend.Weight // with PostNorms

	// The projections' LoRA adapters (nil: none loaded), grouped by input
	// as loraGroups: q, k and v; o; gate and up; down.
	lora [4]backend.LoRA

	// How the layer attends: global layers rotate with the model's RoPE
	// and see every position; sliding-window layers (Gemma) rotate with
	// the local base and see the last SlidingWindow positions.
	rope, ropeKV backend.Rope
	attn         backend.Attention
}

// newLlama uploads m's weights to be and allocates what a forward pass
// needs, with a paged cache of blocks × blockSize slots.
func newLlama(m *models.Model, be backend.Backend, ws WeightStorage, maxBatch, blocks, blockSize int) (*llama, error) {
	c := m.Config
	n := &llama{cfg: c, be: be, maxBatch: maxBatch, maxOut: min(maxBatch, MaxOutputs)}
	upload := func(name string) (backend.Weight, error) {
		t, err := m.Tensor(name)
		if err != nil {
			return nil, err
		}
		s := ws.For(t, c)
		w, err := be.UploadAs(t, s)
		if err != nil {
			return nil, fmt.Errorf("upload %s as %s: %w", name, s, err)
		}
		return w, nil
	}
	var err error
	if n.embed, err = upload(models.TokenEmbedding); err != nil {
		return nil, err
	}
	if n.outNorm, err = upload(models.OutputNorm); err != nil {
		return nil, err
	}
	n.output = n.embed
	if !c.TiedEmbeddings {
		if n.output, err = upload(models.Output); err != nil {
			return nil, err
		}
	}
	n.layers = make([]layerWeights, c.Layers)
	type named struct {
		dst  *backend.Weight
		name string
	}
	for l := range n.layers {
		lw := &n.layers[l]
		ws := []named{
			{&lw.attnNorm, models.LayerTensor(l, models.AttnNorm)}, {&lw.wq, models.LayerTensor(l, models.AttnQ)},
			{&lw.wk, models.LayerTensor(l, models.AttnK)}, {&lw.wv, models.LayerTensor(l, models.AttnV)},
			{&lw.wo, models.LayerTensor(l, models.AttnOutput)}, {&lw.ffnNorm, models.LayerTensor(l, models.FFNNorm)},
			{&lw.gate, models.LayerTensor(l, models.FFNGate)}, {&lw.up, models.LayerTensor(l, models.FFNUp)},
			{&lw.down, models.LayerTensor(l, models.FFNDown)},
		}
		if c.QKVBias {
			ws = append(ws, named{&lw.bq, models.LayerBias(l, models.AttnQ)},
				named{&lw.bk, models.LayerBias(l, models.AttnK)}, named{&lw.bv, models.LayerBias(l, models.AttnV)})
		}
		if c.QKNorm {
			ws = append(ws, named{&lw.qNorm, models.LayerTensor(l, models.AttnQNorm)},
				named{&lw.kNorm, models.LayerTensor(l, models.AttnKNorm)})
		}
		if c.PostNorms {
			ws = append(ws, named{&lw.attnPost, models.LayerTensor(l, models.AttnPostNorm)},
				named{&lw.ffnPost, models.LayerTensor(l, models.FFNPostNorm)})
		}
		for _, w := range ws {
			if *w.dst, err = upload(w.name); err != nil {
				return nil, err
			}
		}
		lw.rope, lw.ropeKV, lw.attn = attention(c, l)
	}
	qDim, kvDim := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	for _, t := range []struct {
		dst        *backend.Tensor
		rows, cols int
	}{
		{&n.x, maxBatch, c.Dim}, {&n.xb, maxBatch, c.Dim}, {&n.q, maxBatch, qDim},
		{&n.k, maxBatch, kvDim}, {&n.v, maxBatch, kvDim}, {&n.att, maxBatch, qDim},
		{&n.gate, maxBatch, c.FFN}, {&n.up, maxBatch, c.FFN},
	} {
		if *t.dst, err = be.NewTensor(t.rows, t.cols); err != nil {
			return nil, err
		}
	}
	if c.PostNorms {
		if n.post, err = be.NewTensor(maxBatch, c.Dim); err != nil {
			return nil, err
		}
	}
	if n.last, err = be.NewOutputTensor(n.maxOut, c.Dim); err != nil {
		return nil, err
	}
	if n.logits, err = be.NewOutputTensor(n.maxOut, c.Vocab); err != nil {
		return nil, err
	}
	if n.kv, err = be.NewKV(c.Layers, blocks, blockSize, kvDim); err != nil {
		return nil, err
	}
	return n, nil
}

// attention returns the RoPE of q and of k, and the attention, of layer l.
func attention(c models.Config, l int) (q, k backend.Rope, a backend.Attention) {
	q = backend.Rope{Heads: c.Heads, HeadDim: c.HeadDim, Dim: c.RopeDim, Theta: c.RopeTheta, Layout: c.Rope, Factors: c.RopeFactors}
	a = backend.Attention{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		Scale: float32(1 / math.Sqrt(float64(c.HeadDim))), Softcap: c.AttnSoftcap}
	if c.QueryScale > 0 {
		a.Scale = c.QueryScale
	}
	if c.LayerSliding(l) {
		q.Theta, q.Factors = c.LocalRopeTheta, nil
		a.Window = c.SlidingWindow
	}
	k = q
	k.Heads = c.KVHeads
	return q, k, a
}

// forward queues the forward pass of batch; the logits of its Out rows end
// up in n.logits, in order. The batch must fit in maxBatch and in the
// context.
func (n *llama) forward(batch backend.Batch) error {
	if err := n.be.Begin(batch); err != nil {
		return err
	}
	n.layersAndHead(batch)
	return nil
}

// forwardChained is forward for the next step of a chain: its tokens are
// the ids the previous step kept on the device.
func (n *llama) forwardChained(batch backend.Batch) error {
	if err := n.be.BeginChained(batch); err != nil {
		return err
	}
	n.layersAndHead(batch)
	return nil
}

// layersAndHead queues the ops of a step begun on the backend.
func (n *llama) layersAndHead(batch backend.Batch) {
	be, c := n.be, n.cfg
	n.adapted = batch.HasAdapters()
	be.Embed(n.x, n.embed)
	if c.EmbedScale > 0 {
		be.Scale(n.x, c.EmbedScale)
	}
	for l, w := range n.layers {
		// Attention block: x += Wo · attend(rope(Wq·h), rope(Wk·h), Wv·h), h = norm(x).
		be.RMSNorm(n.xb, n.x, w.attnNorm, c.NormEps)
		be.MatMul(n.q, n.xb, w.wq)
		be.MatMul(n.k, n.xb, w.wk)
		be.MatMul(n.v, n.xb, w.wv)
		n.addLoRA(n.xb, w.lora[0], n.q, n.k, n.v)
		if c.QKVBias {
			be.AddBias(n.q, w.bq)
			be.AddBias(n.k, w.bk)
			be.AddBias(n.v, w.bv)
		}
		if c.QKNorm {
			be.HeadNorm(n.q, w.qNorm, c.HeadDim, c.NormEps)
			be.HeadNorm(n.k, w.kNorm, c.HeadDim, c.NormEps)
		}
		be.Rope(n.q, w.rope)
		be.Rope(n.k, w.ropeKV)
		be.StoreKV(n.kv, l, n.k, n.v)
		be.Attend(n.att, n.q, n.kv, l, w.attn)
		be.MatMul(n.xb, n.att, w.wo)
		n.addLoRA(n.att, w.lora[1], n.xb)
		n.residual(w.attnPost)

		// Feed-forward block: x += W_down · (act(W_gate·h) * W_up·h), h = norm(x).
		be.RMSNorm(n.xb, n.x, w.ffnNorm, c.NormEps)
		be.MatMul(n.gate, n.xb, w.gate)
		be.MatMul(n.up, n.xb, w.up)
		n.addLoRA(n.xb, w.lora[2], n.gate, n.up)
		be.GLU(n.gate, n.up, c.Act)
		be.MatMul(n.xb, n.gate, w.down)
		n.addLoRA(n.gate, w.lora[3], n.xb)
		n.residual(w.ffnPost)
	}
	// The head: only the rows whose logits are wanted.
	be.RMSNorm(n.xb, n.x, n.outNorm, c.NormEps)
	for i, r := range batch.Out {
		be.CopyRow(n.last, i, n.xb, int(r))
	}
	be.MatMul(n.logits, n.last, n.output)
	n.addLoRA(n.last, n.headLoRA, n.logits)
	if c.FinalSoftcap > 0 {
		be.Softcap(n.logits, c.FinalSoftcap)
	}
}

// addLoRA adds the adapters of the weights that just computed dsts from
// x, for the rows that run with one.
func (n *llama) addLoRA(x backend.Tensor, l backend.LoRA, dsts ...backend.Tensor) {
	if n.adapted && l != nil {
		n.be.AddLoRA(x, l, dsts...)
	}
}

// residual adds a block's output, in xb, to the residual stream x, through
// the block's post-norm when the model has them (Gemma).
func (n *llama) residual(postNorm backend.Weight) {
	if postNorm == nil {
		n.be.Add(n.x, n.xb)
		return
	}
	n.be.RMSNorm(n.post, n.xb, postNorm, n.cfg.NormEps)
	n.be.Add(n.x, n.post)
}

// weightBytes adds up the sizes of the uploaded weights.
func (n *llama) weightBytes() int64 {
	total := n.embed.Bytes() + n.outNorm.Bytes()
	if n.output != n.embed {
		total += n.output.Bytes()
	}
	for _, w := range n.layers {
		for _, x := range []backend.Weight{w.attnNorm, w.wq, w.wk, w.wv, w.wo, w.ffnNorm, w.gate, w.up, w.down, w.bq, w.bk, w.bv, w.qNorm, w.kNorm, w.attnPost, w.ffnPost} {
			if x != nil {
				total += x.Bytes()
			}
		}
	}
	return total
}
