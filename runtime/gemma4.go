package runtime

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// Gemma 4's forward pass (models/gemma4.go describes the architecture),
// from the backend's ops as they are:
//   - two caches, one a kind of layer (the sliding layers' heads are
//     narrower than the global layers'), sharing the sequences' block
//     tables; a layer that shares keys and values attends over its
//     source's cache layer and stores nothing;
//   - activations for each attention shape and each feed-forward width;
//   - the per-layer inputs: one projection and one embedding table a
//     layer (row views of the projection, column views of the table), so
//     that no op needs a view of part of a row;
//   - with experts (26B-A4B), the MoE ops of moe.go, Combine writing the
//     experts' sum to a tensor of its own (Set) for its norm, with each
//     expert's output scale (gemma4MoE).

// gemma4Net is what a Gemma 4 adds to the llama struct.
type gemma4Net struct {
	moeSum backend.Tensor // with experts: their weighted sum, Dim wide

	local  backend.KV // the sliding layers' cache; llama.kv holds the global layers'
	layers []gemma4Layer

	// Per-layer inputs (PerLayer > 0): each layer's embedding table and
	// projection of the embeddings, their norm, and each layer's input.
	tables, projs []backend.Weight
	projNorm      backend.Weight
	in            []backend.Tensor
	tok, gate     backend.Tensor // PerLayer wide: an embedding, a layer's gate
	extra         []backend.Weight
}

// gemma4Layer is one layer's part beyond layerWeights.
type gemma4Layer struct {
	kv      backend.KV // the cache the layer attends over
	kvLayer int        // its layer there
	own     bool       // the layer stores its keys and values
	acts    *gemma4Acts
	gate    backend.Tensor // the feed-forward's, its width
	vNorm   backend.Weight // ones: v is normalised without a weight
	headDim int

	inpGate, proj, postNorm backend.Weight // the per-layer input's
	outScale                float32

	moe *gemma4Experts // the 26B-A4B's, or nil
}

// gemma4Experts are a mixture-of-experts layer's weights beyond
// layerWeights (whose experts, gateUp and down are the routed experts and
// the dense MLP): the norms of the experts' input and of the two outputs,
// the router's input norm (its scale over √dim), each expert's output
// scale. (llama.cpp reads ffn_down_exps.scale where a file has it; the
// converter writes it from every Gemma 4 checkpoint's per_expert_scale
// but folds it into NVFP4 weights, a type Tessera does not read, so it is
// required here.)
type gemma4Experts struct {
	preNorm, mlpNorm, expertNorm, routerNorm, outScale backend.Weight
}

// gemma4Acts are the attention activations of one shape.
type gemma4Acts struct{ q, k, v, att backend.Tensor }

// newGemma4 loads a Gemma 4: llama's weights and activations where they
// fit every layer, the rest per layer and per shape.
func newGemma4(m *models.Model, be backend.Backend, ws WeightStorage, maxBatch, maxSeqs int, kv backend.KVShape, win windowing) (*llama, error) {
	c := m.Config
	g := &gemma4Net{}
	n := &llama{cfg: c, be: be, maxBatch: maxBatch, maxOut: min(maxBatch, maxSeqs), g4: g}
	uploadT := func(t *models.Tensor) (backend.Weight, error) {
		s := ws.For(t, c)
		w, err := be.UploadAs(t, s)
		if err != nil {
			return nil, fmt.Errorf("upload %s as %s: %w", t.Name, s, err)
		}
		return w, nil
	}
	upload := func(name string) (backend.Weight, error) {
		t, err := m.Tensor(name)
		if err != nil {
			return nil, err
		}
		return uploadT(t)
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

	// The caches: the layers of each kind that store keys and values, in
	// order; a shared layer reads its source's.
	kinds := map[bool]*struct {
		layers []int
		kv     backend.KV
	}{false: {}, true: {}}
	for l := range c.Layers {
		if c.KVSource(l) == l {
			k := kinds[c.LayerSliding(l)]
			k.layers = append(k.layers, l)
		}
	}
	for _, sliding := range []bool{false, true} { // the pool's first: a windowed cache shares its tables' width
		k := kinds[sliding]
		if len(k.layers) == 0 && (sliding || !win.on()) {
			continue
		}
		s := kv
		s.Layers = len(k.layers) // none: the pool's tables alone, every layer in rings (window.go)
		if len(k.layers) > 0 {
			s.Heads, s.HeadDim = c.LayerKVHeads(k.layers[0]), c.LayerHeadDim(k.layers[0])
		}
		if sliding && win.on() { // the sliding layers keep their windows only (window.go)
			s = win.Shape
		}
		if k.kv, err = be.NewKV(s); err != nil {
			return nil, err
		}
		if sliding {
			g.local = k.kv
		} else {
			n.kv = k.kv
		}
	}
	if win.on() {
		n.win, n.ring, n.winRunning = g.local, win.Ring, win.Running
	}
	if n.kv == nil { // every layer sliding: llama.kv is the one cache
		n.kv, g.local = g.local, nil
	}
	cacheOf := func(l int) (backend.KV, int) {
		k := kinds[c.LayerSliding(l)]
		for i, o := range k.layers {
			if o == l {
				return k.kv, i
			}
		}
		return nil, -1
	}

	acts := map[[2]int]*gemma4Acts{} // by head dim and kv heads
	gates := map[int]backend.Tensor{}
	ups := map[int]backend.Tensor{}
	ones := map[int]backend.Weight{}
	tensor := func(cols int) (backend.Tensor, error) { return be.NewTensor(maxBatch, cols) }
	n.layers = make([]layerWeights, c.Layers)
	g.layers = make([]gemma4Layer, c.Layers)
	for l := range c.Layers {
		lw, gl := &n.layers[l], &g.layers[l]
		src := c.KVSource(l)
		gl.own, gl.headDim = src == l, c.LayerHeadDim(l)
		if gl.kv, gl.kvLayer = cacheOf(src); gl.kv == nil {
			return nil, fmt.Errorf("layer %d reads the keys and values of layer %d, which stores none", l, src)
		}
		for _, w := range []struct {
			dst  *backend.Weight
			name string
		}{{&lw.attnNorm, models.LayerTensor(l, models.AttnNorm)}, {&lw.wo, models.LayerTensor(l, models.AttnOutput)},
			{&lw.qNorm, models.LayerTensor(l, models.AttnQNorm)},
			{&lw.ffnNorm, models.LayerTensor(l, models.FFNNorm)}, {&lw.down, models.LayerTensor(l, models.FFNDown)},
			{&lw.attnPost, models.LayerTensor(l, models.AttnPostNorm)}, {&lw.ffnPost, models.LayerTensor(l, models.FFNPostNorm)}} {
			if *w.dst, err = upload(w.name); err != nil {
				return nil, err
			}
		}
		q := models.LayerTensor(l, models.AttnQ)
		if gl.own {
			v := models.LayerTensor(l, models.AttnV)
			if c.Gemma4.LayerVFromK(l) { // attention_k_eq_v: v is k's projection (normalised as v, not rotated)
				v = models.LayerTensor(l, models.AttnK)
			}
			if lw.qkv, err = n.fuse(m, ws, false, q, models.LayerTensor(l, models.AttnK), v); err != nil {
				return nil, err
			}
			if lw.kNorm, err = upload(models.LayerTensor(l, models.AttnKNorm)); err != nil {
				return nil, err
			}
		} else if lw.qkv, err = upload(q); err != nil {
			return nil, err
		}
		if lw.gateUp, err = n.fuse(m, ws, true, models.LayerTensor(l, models.FFNGate), models.LayerTensor(l, models.FFNUp)); err != nil {
			return nil, err
		}
		if c.MoE.On() {
			if lw.experts, err = n.uploadExperts(m, ws, l); err != nil {
				return nil, err
			}
			if gl.moe, err = gemma4LoadExperts(m, be, upload, l); err != nil {
				return nil, err
			}
		}
		lw.rope, lw.ropeKV, lw.attn = gemma4Attention(c, l)
		if gl.outScale, err = scalar(m, models.LayerTensor(l, models.LayerOutScale), 1); err != nil {
			return nil, err
		}

		hd, kvh := gl.headDim, c.LayerKVHeads(l)
		key := [2]int{hd, kvh}
		if acts[key] == nil {
			a := &gemma4Acts{}
			for _, t := range []struct {
				dst  *backend.Tensor
				cols int
			}{{&a.q, c.Heads * hd}, {&a.k, kvh * hd}, {&a.v, kvh * hd}, {&a.att, c.Heads * hd}} {
				if *t.dst, err = tensor(t.cols); err != nil {
					return nil, err
				}
			}
			acts[key] = a
		}
		gl.acts = acts[key]
		if ones[hd] == nil {
			if ones[hd], err = uploadT(onesTensor(fmt.Sprintf("gemma4.v_norm.%d", hd), hd)); err != nil {
				return nil, err
			}
			g.extra = append(g.extra, ones[hd])
		}
		gl.vNorm = ones[hd]
		f := c.LayerFFN(l)
		if gates[f] == nil {
			if gates[f], err = tensor(f); err != nil {
				return nil, err
			}
			if ups[f], err = tensor(f); err != nil {
				return nil, err
			}
		}
		gl.gate = gates[f]
	}
	if err := g.loadPerLayer(m, c, upload, uploadT, tensor); err != nil {
		return nil, err
	}
	if c.MoE.On() {
		if n.moe, err = newMoEActs(be, c, maxBatch); err != nil {
			return nil, err
		}
		if g.moeSum, err = tensor(c.Dim); err != nil {
			return nil, err
		}
	}
	// llama's own activations: the residual stream, the post-norms' and
	// the head's; its q..up name the global layers' shapes and the widest
	// feed-forward for code that reads their widths.
	global := acts[[2]int{c.HeadDim, c.KVHeads}]
	if global == nil {
		global = g.layers[0].acts
	}
	n.q, n.k, n.v, n.att = global.q, global.k, global.v, global.att
	n.gate, n.up = gates[c.FFN], ups[c.FFN]
	for _, t := range []struct {
		dst        *backend.Tensor
		rows, cols int
		out        bool
	}{{&n.x, maxBatch, c.Dim, false}, {&n.xb, maxBatch, c.Dim, false}, {&n.post, maxBatch, c.Dim, false},
		{&n.last, n.maxOut, c.Dim, true}, {&n.lastNormed, n.maxOut, c.Dim, true}, {&n.logits, n.maxOut, c.Vocab, true}} {
		if t.out {
			*t.dst, err = be.NewOutputTensor(t.rows, t.cols)
		} else {
			*t.dst, err = be.NewTensor(t.rows, t.cols)
		}
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

// loadPerLayer uploads the per-layer inputs' weights: layer l's slice of
// the token table (columns l·P..(l+1)·P) and of the projection (rows),
// each table read once for all layers (models.SplitColumns), and each
// layer's gate, projection and norm.
func (g *gemma4Net) loadPerLayer(m *models.Model, c models.Config, upload func(string) (backend.Weight, error),
	uploadT func(*models.Tensor) (backend.Weight, error), tensor func(int) (backend.Tensor, error)) error {
	p := c.Gemma4.PerLayer
	if p == 0 {
		return nil
	}
	table, err := m.Tensor(models.PerLayerTokenEmbd)
	if err != nil {
		return err
	}
	proj, err := m.Tensor(models.PerLayerModelProj)
	if err != nil {
		return err
	}
	if g.projNorm, err = upload(models.PerLayerProjNorm); err != nil {
		return err
	}
	tables, err := models.SplitColumns(table, c.Layers)
	if err != nil {
		return err
	}
	projs, err := models.SplitRows(proj, c.Layers)
	if err != nil {
		return err
	}
	g.tables, g.projs, g.in = make([]backend.Weight, c.Layers), make([]backend.Weight, c.Layers), make([]backend.Tensor, c.Layers)
	for l := range c.Layers {
		if g.tables[l], err = uploadT(tables[l]); err != nil {
			return err
		}
		if g.projs[l], err = uploadT(projs[l]); err != nil {
			return err
		}
		if g.in[l], err = tensor(p); err != nil {
			return err
		}
		gl := &g.layers[l]
		for _, w := range []struct {
			dst  *backend.Weight
			kind string
		}{{&gl.inpGate, models.PerLayerInpGate}, {&gl.proj, models.PerLayerProj}, {&gl.postNorm, models.PerLayerPostNorm}} {
			if *w.dst, err = upload(models.LayerTensor(l, w.kind)); err != nil {
				return err
			}
		}
	}
	if g.tok, err = tensor(p); err != nil {
		return err
	}
	g.gate, err = tensor(p)
	return err
}

// gemma4LoadExperts uploads layer l's expert norms and scales (the
// experts themselves are uploadExperts'). The router's input norm is
// ffn_gate_inp.scale/√dim, llama.cpp's rms_norm(x) · (1/√dim) · scale as
// one weight.
func gemma4LoadExperts(m *models.Model, be backend.Backend, upload func(string) (backend.Weight, error), l int) (*gemma4Experts, error) {
	e := &gemma4Experts{}
	var err error
	for _, w := range []struct {
		dst  *backend.Weight
		kind string
	}{{&e.preNorm, models.FFNPreNorm2}, {&e.mlpNorm, models.FFNPostNorm1}, {&e.expertNorm, models.FFNPostNorm2}} {
		if *w.dst, err = upload(models.LayerTensor(l, w.kind)); err != nil {
			return nil, err
		}
	}
	scale, err := m.Tensor(models.LayerScale(l, models.FFNRouter), m.Config.Dim)
	if err != nil {
		return nil, err
	}
	s, err := scale.Float32()
	if err != nil {
		return nil, err
	}
	inv := float32(1 / math.Sqrt(float64(m.Config.Dim)))
	for i := range s {
		s[i] *= inv
	}
	if e.routerNorm, err = be.Upload(f32Tensor(scale.Name, s)); err != nil {
		return nil, fmt.Errorf("upload %s: %w", scale.Name, err)
	}
	t, err := m.Tensor(models.LayerScale(l, models.FFNDownExps), m.Config.MoE.Experts)
	if err != nil {
		return nil, err
	}
	v, err := t.Float32()
	if err != nil {
		return nil, err
	}
	if e.outScale, err = be.Upload(f32Tensor(t.Name, v)); err != nil {
		return nil, fmt.Errorf("upload %s: %w", t.Name, err)
	}
	return e, nil
}

// gemma4MoE queues layer l's feed-forward with experts (llama.cpp's
// gemma4 graph): x += post_ffw_norm(post_ffw_norm_1(mlp(ffn_norm(x))) +
// post_ffw_norm_2(Σ w·s·expert(pre_ffw_norm_2(x)))), the router reading
// norm(x)·scale/√dim.
func (n *llama) gemma4MoE(l int) {
	be, c, g := n.be, n.cfg, n.g4
	w, gl, a := &n.layers[l], &g.layers[l], n.moe
	e := gl.moe
	be.Project(backend.Projection{X: n.x, Norm: w.ffnNorm, Eps: c.NormEps, W: w.gateUp, Out: []backend.Tensor{gl.gate}, GLU: true, Act: c.Act})
	be.Project(backend.Projection{X: gl.gate, W: w.down, Out: []backend.Tensor{n.xb}})
	be.RMSNorm(n.post, n.xb, e.mlpNorm, c.NormEps)
	be.RMSNorm(n.xb, n.x, e.routerNorm, c.NormEps)
	be.MatMul(a.logits, n.xb, w.experts.router)
	be.Route(a.routes, a.logits, c.MoE.NormTopK)
	be.RMSNorm(n.xb, n.x, e.preNorm, c.NormEps)
	be.ExpertProject(backend.ExpertProjection{X: n.xb, W: w.experts.gateUp, R: a.routes, Out: a.act, GLU: true, Act: c.Act})
	be.ExpertProject(backend.ExpertProjection{X: a.act, Slots: true, W: w.experts.down, R: a.routes, Out: a.out})
	be.Combine(backend.MoECombine{Dst: g.moeSum, Y: a.out, R: a.routes, ExpertScale: e.outScale, Set: true})
	be.RMSNorm(n.xb, g.moeSum, e.expertNorm, c.NormEps)
	be.Add(n.post, n.xb)
	be.RMSNorm(n.xb, n.post, w.ffnPost, c.NormEps)
	be.Add(n.x, n.xb)
}

// gemma4Attention is layer l's RoPE of q and k and its attention, at
// the layer's own head width, kv heads and rotated dimensions.
func gemma4Attention(c models.Config, l int) (q, k backend.Rope, a backend.Attention) {
	q, _, a = attention(c, l)
	q.HeadDim, q.Dim = c.LayerHeadDim(l), c.LayerRopeDim(l)
	k = q
	k.Heads = c.LayerKVHeads(l)
	a.KVHeads, a.HeadDim = c.LayerKVHeads(l), c.LayerHeadDim(l)
	return q, k, a
}

// gemma4Layer queues layer l (llama.cpp's gemma4 graph): attention with
// q, k and v normalised per head, the feed-forward, the per-layer input
// through its gate, the layer's output scale. The per-layer inputs are
// computed before the first layer, from the scaled embeddings in x.
func (n *llama) gemma4Layer(l int) {
	be, c, g := n.be, n.cfg, n.g4
	w, gl := &n.layers[l], &g.layers[l]
	if l == 0 && g.in != nil {
		n.perLayerInputs()
	}
	a, hd := gl.acts, gl.headDim
	if gl.own {
		be.Project(backend.Projection{X: n.x, Norm: w.attnNorm, Eps: c.NormEps, W: w.qkv, Out: []backend.Tensor{a.q, a.k, a.v}})
		be.HeadNorm(a.q, w.qNorm, hd, c.NormEps)
		be.HeadNorm(a.k, w.kNorm, hd, c.NormEps)
		be.HeadNorm(a.v, gl.vNorm, hd, c.NormEps)
		be.RopeStore(a.q, a.k, a.v, gl.kv, gl.kvLayer, w.rope, w.ropeKV)
	} else {
		be.Project(backend.Projection{X: n.x, Norm: w.attnNorm, Eps: c.NormEps, W: w.qkv, Out: []backend.Tensor{a.q}})
		be.HeadNorm(a.q, w.qNorm, hd, c.NormEps)
		be.Rope(a.q, w.rope)
	}
	be.Attend(a.att, a.q, gl.kv, gl.kvLayer, n.stepAttention(w.attn)) // an image's rows both ways
	n.residual(a.att, w.wo, nil, nil, w.attnPost, nil)
	if gl.moe != nil {
		n.gemma4MoE(l)
	} else {
		be.Project(backend.Projection{X: n.x, Norm: w.ffnNorm, Eps: c.NormEps, W: w.gateUp, Out: []backend.Tensor{gl.gate}, GLU: true, Act: c.Act})
		n.residual(gl.gate, w.down, nil, nil, w.ffnPost, nil)
	}
	if g.in != nil { // x += norm(proj(gelu(gate·x) * in_l))
		be.Project(backend.Projection{X: n.x, W: gl.inpGate, Out: []backend.Tensor{g.gate}})
		be.GLU(g.gate, g.in[l], models.GELUTanh)
		n.residual(g.gate, gl.proj, nil, nil, gl.postNorm, nil)
	}
	if gl.outScale != 1 {
		be.Scale(n.x, gl.outScale)
	}
}

// perLayerInputs sets each layer's input: (norm(proj_l·x/√dim) +
// √P·table_l[token]) / √2, x the scaled embeddings (llama.cpp's
// project_per_layer_inputs).
func (n *llama) perLayerInputs() {
	be, c, g := n.be, n.cfg, n.g4
	p := c.Gemma4.PerLayer
	for l, in := range g.in {
		be.Project(backend.Projection{X: n.x, W: g.projs[l], Out: []backend.Tensor{in}})
		be.Scale(in, float32(1/math.Sqrt(float64(c.Dim))))
		be.HeadNorm(in, g.projNorm, p, c.NormEps)
		be.Embed(g.tok, g.tables[l])
		be.Scale(g.tok, float32(math.Sqrt(float64(p))))
		be.Add(in, g.tok)
		be.Scale(in, float32(1/math.Sqrt2))
	}
}

// copyBlock copies block src to dst in every cache that the pool's block
// tables reach (copy on write): not the windowed rings, which no two
// sequences share.
func (n *llama) copyBlock(src, dst int) {
	n.be.CopyBlock(n.kv, src, dst)
	if n.g4 != nil && n.g4.local != nil && n.g4.local != n.win {
		n.be.CopyBlock(n.g4.local, src, dst)
	}
}

// kvBytes is the memory of every cache.
func (n *llama) kvBytes() int64 {
	b := n.kv.Shape().Bytes()
	if n.g4 != nil && n.g4.local != nil {
		b += n.g4.local.Shape().Bytes()
	} else if n.win != nil {
		b += n.win.Shape().Bytes()
	}
	return b
}

// bytes is the size of the weights beyond llama's layerWeights.
func (g *gemma4Net) bytes() int64 {
	var total int64
	ws := append(append(append([]backend.Weight{g.projNorm}, g.tables...), g.projs...), g.extra...)
	for _, l := range g.layers {
		ws = append(ws, l.inpGate, l.proj, l.postNorm)
		if e := l.moe; e != nil {
			ws = append(ws, e.preNorm, e.mlpNorm, e.expertNorm, e.routerNorm, e.outScale)
		}
	}
	for _, w := range ws {
		if w != nil {
			total += w.Bytes()
		}
	}
	return total
}

// gemma4KVBlockBytes is the memory of one block of c's caches: keys and
// values of the layers that store them, each at its kind's shape.
func gemma4KVBlockBytes(c models.Config, blockSize int, t backend.KVType) int64 {
	var total int64
	for l := range c.Layers {
		if c.KVSource(l) == l {
			total += backend.KVShape{Layers: 1, Blocks: 1, BlockSize: blockSize, Heads: c.LayerKVHeads(l), HeadDim: c.LayerHeadDim(l), Type: t}.Bytes()
		}
	}
	return total
}

// scalar reads a one-value tensor (a layer's output scale), def when the
// file has none.
func scalar(m *models.Model, name string, def float32) (float32, error) {
	t, ok := m.Tensors[name]
	if !ok {
		return def, nil
	}
	if t.Elements() != 1 {
		return 0, fmt.Errorf("tensor %s has %d values, want 1", name, t.Elements())
	}
	v, err := t.Float32()
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// onesTensor is a vector of n ones: the weight of a norm without one.
func onesTensor(name string, n int) *models.Tensor {
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	return f32Tensor(name, ones)
}

// f32Tensor is vector v as an f32 tensor.
func f32Tensor(name string, v []float32) *models.Tensor {
	return models.NewTensor(name, []int{len(v)}, dtype.F32, func() ([]byte, error) {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b, nil
	})
}

// idleTableBytes is what a decode step does not read of the per-layer
// token tables: all but one row of each (like the token embeddings').
func (n *llama) idleTableBytes() int64 {
	if n.g4 == nil {
		return 0
	}
	var idle int64
	for _, t := range n.g4.tables {
		idle += t.Bytes() - t.Bytes()/int64(n.cfg.Vocab)
	}
	return idle
}
