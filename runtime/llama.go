// Package runtime is the engine: it loads a model onto a backend, runs the
// forward pass, samples and streams tokens.
package runtime

import (
	"fmt"
	"math"
	"slices"
	"strings"

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

	headLoRA  backend.LoRA // the output head's adapters, or nil
	embedLoRA backend.LoRA // the token embeddings' adapters, or nil
	adapted   bool         // the step being queued has rows with adapters

	x, xb, q, k, v, att, gate, up backend.Tensor     // maxBatch rows
	outLists                      [][]backend.Tensor // the projections' Out lists (outs)
	post                          backend.Tensor     // maxBatch rows, with PostNorms
	moe                           *moeActs           // with experts
	last, logits                  backend.Tensor     // output rows: only the batch's Out rows are scored
	out                           backend.Tensor     // the last step's Out rows (outRows): x or last
	lastNormed                    backend.Tensor     // output rows: last normalised, for embeddings
	kv                            backend.KV
	g4                            *gemma4Net // Gemma 4's layers (gemma4.go), or nil

	// The sliding layers' windowed cache (window.go): a ring of ring
	// blocks per sequence slot, winRunning of them for running sequences;
	// nil where the sliding layers are in kv with the rest.
	win        backend.KV
	ring       int
	winRunning int

	// Qwen3.5's linear layers (models.LinearConfig): their activations and
	// the recurrent states (a slot per running sequence, the scratch slot
	// of one-off passes and the prefix snapshots: stateSlots in linear.go).
	lin *linearActs
	rec backend.Recurrent
	// qGate is the gated attention's gate half of q (Config.AttnGate).
	qGate backend.Tensor

	// Images (runtime/images.go): the step's image rows and their
	// embeddings, and whether the step attends both ways.
	img           backend.Tensor // maxBatch rows, allocated at the first image
	images        *imageRows
	bidirectional bool
	// deep are Qwen3-VL's deepstack slices of the step's rows (zero for
	// text), deep[k] added to the hidden state after layer k.
	deep []backend.Tensor
}

// linearActs are a linear layer's activations, maxBatch rows each.
type linearActs struct {
	mixed, conv backend.Tensor // q, k and v before and after the convolution
	z, o        backend.Tensor // the output gate and the recurrence's output
	gates       backend.Tensor // per value head β's logit, then α's
}

type layerWeights struct {
	attnNorm, ffnNorm backend.Weight
	// q, k and v are one weight (backend.Fuse) read in one pass, gate and
	// up another; their biases (QKVBias) are one vector.
	qkv, bqkv, wo, gateUp, down backend.Weight
	qNorm, kNorm                backend.Weight // with QKNorm
	sinks, bo                   backend.Weight // with AttnSinks, AttnOutBias (gpt-oss)
	experts                     moeWeights     // with experts: instead of gateUp and down
	linear                      *linearWeights // a linear layer's (Qwen3.5): instead of qkv and wo
	qGate                       backend.Weight // with AttnGate: the gate half of q's projection
	attnPost, ffnPost           backend.Weight // with PostNorms

	// The projections' LoRA adapters (nil: none loaded), grouped by input
	// as loraGroups: q, k and v; o; gate and up; down.
	lora [4]backend.LoRA

	// How the layer attends: global layers rotate with the model's RoPE
	// and see every position; sliding-window layers (Gemma) rotate with
	// the local base and see the last SlidingWindow positions.
	rope, ropeKV backend.Rope
	attn         backend.Attention
	kvLayer      int  // the layer's in its KV cache (linear layers have none)
	windowed     bool // its cache is the windowed one (llama.win), not llama.kv
}

// linearWeights are a Gated DeltaNet layer's: in is W_qkv and W_gate
// fused (one input, two outputs), gates W_beta's rows then W_alpha's, decay
// dt then a; index is the layer's among the linear layers (its state's).
type linearWeights struct {
	in, gates, conv, decay, norm, out backend.Weight
	index                             int
}

// newLlama uploads m's weights to be and allocates what a forward pass
// needs for steps of up to maxBatch tokens and maxSeqs rows of logits,
// with a paged cache of kv's shape (for every layer that stores keys and
// values), or where win is on, that for the global layers and win's rings
// for the sliding ones.
func newLlama(m *models.Model, be backend.Backend, ws WeightStorage, maxBatch, maxSeqs int, kv backend.KVShape, win windowing) (*llama, error) {
	c := m.Config
	if c.Gemma4 != nil {
		return newGemma4(m, be, ws, maxBatch, maxSeqs, kv, win)
	}
	n := &llama{cfg: c, be: be, maxBatch: maxBatch, maxOut: min(maxBatch, maxSeqs)}
	global, sliding := kvLayerKinds(c)
	cacheIndex := map[int]int{} // a layer's index in its cache
	for i, l := range global {
		cacheIndex[l] = i
	}
	for i, l := range sliding {
		cacheIndex[l] = i
	}
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
	fuse := func(glu bool, kinds ...string) (backend.Weight, error) {
		return n.fuse(m, ws, glu, kinds...)
	}
	storage := ws
	for l := range n.layers {
		lw := &n.layers[l]
		if c.LayerLinear(l) {
			if err := n.uploadLinear(m, ws, lw, l); err != nil {
				return nil, err
			}
			continue
		}
		type named struct {
			dst  *backend.Weight
			name string
		}
		ws := []named{{&lw.attnNorm, models.LayerTensor(l, models.AttnNorm)}, {&lw.wo, models.LayerTensor(l, models.AttnOutput)},
			{&lw.ffnNorm, models.LayerTensor(l, models.FFNNorm)}}
		if !c.MoE.On() {
			ws = append(ws, named{&lw.down, models.LayerTensor(l, models.FFNDown)})
		}
		if c.QKNorm {
			ws = append(ws, named{&lw.qNorm, models.LayerTensor(l, models.AttnQNorm)},
				named{&lw.kNorm, models.LayerTensor(l, models.AttnKNorm)})
		}
		if c.PostNorms {
			ws = append(ws, named{&lw.attnPost, models.LayerTensor(l, models.AttnPostNorm)},
				named{&lw.ffnPost, models.LayerTensor(l, models.FFNPostNorm)})
		}
		if c.AttnSinks {
			ws = append(ws, named{&lw.sinks, models.LayerTensor(l, models.AttnSinks)})
		}
		if c.AttnOutBias {
			ws = append(ws, named{&lw.bo, models.LayerBias(l, models.AttnOutput)})
		}
		for _, w := range ws {
			if *w.dst, err = upload(w.name); err != nil {
				return nil, err
			}
		}
		if lw.qkv, err = fuse(false, models.LayerTensor(l, models.AttnQ), models.LayerTensor(l, models.AttnK), models.LayerTensor(l, models.AttnV)); err != nil {
			return nil, err
		}
		if c.AttnGate {
			if lw.qGate, err = upload(models.LayerTensor(l, models.AttnQGate)); err != nil {
				return nil, err
			}
		}
		if c.QKVBias {
			if lw.bqkv, err = fuse(false, models.LayerBias(l, models.AttnQ), models.LayerBias(l, models.AttnK), models.LayerBias(l, models.AttnV)); err != nil {
				return nil, err
			}
		}
		if c.MoE.On() {
			if lw.experts, err = n.uploadExperts(m, storage, l); err != nil {
				return nil, err
			}
		} else if lw.gateUp, err = fuse(true, models.LayerTensor(l, models.FFNGate), models.LayerTensor(l, models.FFNUp)); err != nil {
			return nil, err
		}
		lw.rope, lw.ropeKV, lw.attn = attention(c, l)
		lw.kvLayer = l - c.Linear.CountBefore(l)
		if win.on() {
			lw.kvLayer, lw.windowed = cacheIndex[l], c.LayerSliding(l)
		}
		lw.attn.Sinks = lw.sinks
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
	if c.MoE.On() {
		if n.moe, err = newMoEActs(be, c, maxBatch); err != nil {
			return nil, err
		}
	}
	if c.AttnGate {
		if n.qGate, err = be.NewTensor(maxBatch, qDim); err != nil {
			return nil, err
		}
	}
	if c.Linear.On() {
		if err := n.newLinear(maxBatch); err != nil {
			return nil, err
		}
	}
	if n.last, err = be.NewOutputTensor(n.maxOut, c.Dim); err != nil {
		return nil, err
	}
	if n.lastNormed, err = be.NewOutputTensor(n.maxOut, c.Dim); err != nil {
		return nil, err
	}
	if n.logits, err = be.NewOutputTensor(n.maxOut, c.Vocab); err != nil {
		return nil, err
	}
	if win.on() {
		kv.Layers = len(global)
	}
	if n.kv, err = be.NewKV(kv); err != nil {
		return nil, err
	}
	if win.on() { // after the pool's cache, whose tables' width the rings' share
		if n.win, err = be.NewKV(win.Shape); err != nil {
			return nil, err
		}
		n.ring, n.winRunning = win.Ring, win.Running
	}
	return n, nil
}

// cache is the KV cache layer w attends over.
func (n *llama) cache(w *layerWeights) backend.KV {
	if w.windowed {
		return n.win
	}
	return n.kv
}

// fuse uploads the named tensors as one weight (backend.Fuse), in the
// widest storage any of them would have alone (WeightStorage.Fused).
func (n *llama) fuse(m *models.Model, ws WeightStorage, glu bool, names ...string) (backend.Weight, error) {
	ts := make([]*models.Tensor, len(names))
	for i, name := range names {
		t, err := m.Tensor(name)
		if err != nil {
			return nil, err
		}
		ts[i] = t
	}
	s := ws.Fused(ts, n.cfg)
	w, err := n.be.Fuse(ts, s, glu)
	if err != nil {
		return nil, fmt.Errorf("upload %s as %s: %w", strings.Join(names, "+"), s, err)
	}
	return w, nil
}

// attention returns the RoPE of q and of k, and the attention, of layer l.
func attention(c models.Config, l int) (q, k backend.Rope, a backend.Attention) {
	q = backend.Rope{Heads: c.Heads, HeadDim: c.HeadDim, Dim: c.RopeDim, Theta: c.RopeTheta, Layout: c.Rope, Factors: c.RopeFactors, Scale: c.RopeScale,
		Sections: c.RopeSections}
	if c.RopeInterleaved {
		q.Axes = backend.IMRope
	}
	a = backend.Attention{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		Scale: float32(1 / math.Sqrt(float64(c.HeadDim))), Softcap: c.AttnSoftcap}
	if c.QueryScale > 0 {
		a.Scale = c.QueryScale
	}
	if c.LayerSliding(l) {
		q.Theta = c.LocalRopeTheta
		if !c.LocalRopeScaled {
			q.Factors, q.Scale = nil, 0
		}
		a.Window = c.SlidingWindow
	}
	if !c.LayerRope(l) { // NoPE (SmolLM3): q and k as projected
		q.Dim, q.Factors, q.Scale = 0, nil, 0
	}
	k = q
	k.Heads = c.KVHeads
	return q, k, a
}

// forward queues the forward pass of batch; the logits of its Out rows end
// up in n.logits, in order. The batch must fit in maxBatch and in the
// context.
func (n *llama) forward(batch backend.Batch) error {
	if err := n.checkStates(batch); err != nil {
		return err
	}
	if err := n.be.Begin(batch); err != nil {
		return err
	}
	n.layersAndHead(batch)
	return nil
}

// forwardChained is forward for the next step of a chain: its tokens are
// the ids the previous step kept on the device.
func (n *llama) forwardChained(batch backend.Batch) error {
	if err := n.checkStates(batch); err != nil {
		return err
	}
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
	if l := n.lora(n.embedLoRA); l != nil {
		be.EmbedLoRA(n.x, l) // before any scale, as llama.cpp's inp_embd and a merged table
	}
	if c.EmbedScale > 0 {
		be.Scale(n.x, c.EmbedScale)
	}
	n.injectImages()
	for l, w := range n.layers {
		if n.g4 != nil {
			n.gemma4Layer(l)
			continue
		}
		if lw := w.linear; lw != nil {
			// Linear attention (Gated DeltaNet, Qwen3.5): x += W_out · (norm(o) · silu(z)),
			// o the delta rule over conv1d(W_qkv·h), z = W_gate·h, h = norm(x).
			a := n.lin
			be.Project(backend.Projection{X: n.x, Norm: w.attnNorm, Eps: c.NormEps, W: lw.in, Out: n.outs(a.mixed, a.z)})
			be.Project(backend.Projection{X: n.x, Norm: w.attnNorm, Eps: c.NormEps, W: lw.gates, Out: n.outs(a.gates)})
			be.Conv1D(a.conv, a.mixed, lw.conv, n.rec, lw.index)
			be.DeltaNet(a.o, a.conv, a.gates, lw.decay, n.rec, lw.index,
				backend.DeltaNet{KHeads: c.Linear.KHeads, VHeads: c.Linear.VHeads, HeadDim: c.Linear.HeadDim, Eps: c.NormEps})
			be.HeadNorm(a.o, lw.norm, c.Linear.HeadDim, c.NormEps)
			be.GLU(a.z, a.o, models.SiLU)
			var next backend.Weight
			if !c.MoE.On() {
				next = w.ffnNorm
			}
			n.residual(a.z, lw.out, nil, nil, nil, next)
			n.feedForward(l, w)
			continue
		}
		// Attention block: x += Wo · attend(rope(Wq·h), rope(Wk·h), Wv·h), h = norm(x).
		be.Project(backend.Projection{X: n.x, Norm: w.attnNorm, Eps: c.NormEps, W: w.qkv, Bias: w.bqkv, Out: n.outs(n.q, n.k, n.v), LoRA: n.lora(w.lora[0])})
		if c.AttnGate { // Qwen3.5: q's projection also gives a gate per head
			be.Project(backend.Projection{X: n.x, Norm: w.attnNorm, Eps: c.NormEps, W: w.qGate, Out: n.outs(n.qGate)})
		}
		if c.QKNorm {
			qn, kn := c.HeadDim, c.HeadDim
			if c.QKNormFull { // OLMoE: all heads of a row together
				qn, kn = n.q.Cols(), n.k.Cols()
			}
			be.HeadNorm(n.q, w.qNorm, qn, c.NormEps)
			be.HeadNorm(n.k, w.kNorm, kn, c.NormEps)
		}
		kv := n.cache(&w)
		be.RopeAttend(n.att, n.q, n.k, n.v, kv, w.kvLayer, w.rope, w.ropeKV, n.stepAttention(w.attn))
		if c.ResidualScale > 0 { // Granite: x += s·Wo·a, as Wo·(s·a)
			be.Scale(n.att, c.ResidualScale)
		}
		att := n.att
		if c.AttnGate { // Qwen3.5: a = sigmoid(gate) · a
			be.GLU(n.qGate, n.att, models.Sigmoid)
			att = n.qGate
		}
		var next backend.Weight // the norm the feed-forward block starts with
		if !c.MoE.On() {
			next = w.ffnNorm
		}
		n.residual(att, w.wo, w.bo, w.lora[1], w.attnPost, next)
		n.feedForward(l, w)
		n.addDeepstack(l)
	}
	// The head: only the rows whose logits are wanted, normalised on the way.
	n.out = n.outRows(batch)
	be.Project(backend.Projection{X: n.out, Norm: n.outNorm, Eps: c.NormEps, W: n.output, Out: n.outs(n.logits), LoRA: n.lora(n.headLoRA)})
	if c.FinalSoftcap > 0 {
		be.Softcap(n.logits, c.FinalSoftcap)
	}
	if c.LogitScale > 0 && c.LogitScale != 1 { // Granite divides its logits
		be.Scale(n.logits, 1/c.LogitScale)
	}
}

// feedForward queues layer l's feed-forward block: through the routed
// experts, or x += W_down · (act(W_gate·h) * W_up·h), h = norm(x).
func (n *llama) feedForward(l int, w layerWeights) {
	if n.cfg.MoE.On() {
		n.experts(w)
		return
	}
	n.be.Project(backend.Projection{X: n.x, Norm: w.ffnNorm, Eps: n.cfg.NormEps, W: w.gateUp, Out: n.outs(n.gate), GLU: true, Act: n.cfg.Act, LoRA: n.lora(w.lora[2])})
	next := n.outNorm // the norm the next layer or the head starts with
	if l+1 < len(n.layers) {
		next = n.layers[l+1].attnNorm
	}
	n.residual(n.gate, w.down, nil, w.lora[3], w.ffnPost, next)
}

// outRows returns the tensor whose rows 0, 1, ... are the batch's Out
// rows of x: x itself when they are its first rows in order (a decode
// step, where every row is scored), else last with the rows copied in, one
// CopyRow each.
func (n *llama) outRows(batch backend.Batch) backend.Tensor {
	identity := true
	for i, r := range batch.Out {
		identity = identity && int(r) == i
	}
	if identity {
		return n.x
	}
	for i, r := range batch.Out {
		n.be.CopyRow(n.last, i, n.x, int(r))
	}
	return n.last
}

// lora is l for a projection of a step with adapter rows, else nil: a
// step without them runs no adapter at all.
func (n *llama) lora(l backend.LoRA) backend.LoRA {
	if n.adapted {
		return l
	}
	return nil
}

// outs returns ts as a Projection's Out, from the lists kept across
// steps: a list made at every projection of every step was an
// allocation a dispatch on the GPU (a Projection goes through an
// interface, so its Out escapes). A model has a few distinct lists.
func (n *llama) outs(ts ...backend.Tensor) []backend.Tensor {
	for _, o := range n.outLists {
		if slices.Equal(o, ts) {
			return o
		}
	}
	o := slices.Clone(ts)
	n.outLists = append(n.outLists, o)
	return o
}

// residual adds a block's output projection of x (plus bias b, when not
// nil: gpt-oss's) to the residual stream: in the projection's epilogue, or
// through the block's post-norm when the model has them (Gemma). next is
// the norm of the projection that reads the stream next (a hint:
// Projection.Next), or nil.
func (n *llama) residual(x backend.Tensor, w, b backend.Weight, l backend.LoRA, postNorm, next backend.Weight) {
	if postNorm == nil {
		n.be.Project(backend.Projection{X: x, W: w, Bias: b, Out: n.outs(n.x), Add: true, LoRA: n.lora(l), Next: next})
		return
	}
	n.be.Project(backend.Projection{X: x, W: w, Bias: b, Out: n.outs(n.xb), LoRA: n.lora(l)})
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
		if lw := w.linear; lw != nil {
			for _, x := range []backend.Weight{lw.in, lw.gates, lw.conv, lw.decay, lw.norm, lw.out} {
				total += x.Bytes()
			}
		}
		for _, x := range append(w.experts.all(), w.attnNorm, w.qkv, w.bqkv, w.wo, w.ffnNorm, w.gateUp, w.down, w.qNorm, w.kNorm, w.attnPost, w.ffnPost, w.sinks, w.bo, w.qGate) {
			if x != nil {
				total += x.Bytes()
			}
		}
	}
	if n.g4 != nil {
		total += n.g4.bytes()
	}
	return total
}
