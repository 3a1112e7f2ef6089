package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// visionTower is the forward pass of a SigLIP vision tower and its
// projector (llama.cpp's clip_graph_siglip, for PROJECTOR_TYPE_GEMMA3 and
// PROJECTOR_TYPE_IDEFICS3) on the engine's backend: image in, one
// embedding row per image token out, in the language model's embedding
// space. The tower is one pass for both; the projectors differ after its
// last LayerNorm. It runs on the ops the language model and the BERT
// encoder already use: the patch convolution is a product (the image laid
// out as one row per patch, vision.Patches), the attention bidirectional
// over one sequence; gemma3's 2-D average pool is a MeanPool over rows
// grouped by their pooling window, and idefics3's pixel shuffle is no op
// at all: the patches enter the tower in the shuffle's order
// (vision.Config.PatchOrder, with the position table permuted to match),
// so that its output seen Merge² rows to a row (backend.View) is the
// shuffle's, ready for the projection. An image of several tiles
// (idefics3) runs the tower once a tile.
type visionTower struct {
	cfg vision.Config
	be  backend.Backend

	patchW, patchB, pos backend.Weight
	layers              []vitLayer
	post                norm
	// The projection, [OutDim, in]: gemma3's (after softNorm) reads the
	// pooled rows, idefics3's (mm.model.fc) the shuffled ones.
	softNorm, projection backend.Weight

	patches, x, xb, xn, q, k, v, att, up backend.Tensor // one row a patch
	pooled, normed, out                  backend.Tensor // one row an image token
	merged                               backend.Tensor // idefics3: xn seen as [Tokens, Merge²·Dim]
	kv                                   backend.KV
	attn                                 backend.Attention
	vit, head                            backend.Batch

	// marks are the ids of the marker tokens vision.Layout looks up in the
	// language model's vocabulary (openProjector).
	marks map[string]int32

	qwen *qwenTower   // Qwen2-VL's tower instead (vision_qwen.go)
	g4   *gemma4Tower // Gemma 4's instead (vision_gemma4.go)
}

// dynamic reports whether the tower encodes an image at its own size in
// one go (Qwen-VL, Gemma 4), not a fixed-size picture at a time.
func (t *visionTower) dynamic() bool { return t.qwen != nil || t.g4 != nil }

type vitLayer struct {
	wq, wk, wv, wo, up, down backend.Weight
	bq, bk, bv, bo, bUp, bDn backend.Weight
	ln1, ln2                 norm
	gate, bGate              backend.Weight // a gated feed-forward's (Qwen2.5-VL), or nil
}

// vitBlock is the attention's scratch cache's block size.
const vitBlock = 16

// newVisionTower uploads m's weights (all f32: the tower is small beside
// the language model) to a backend of its own on the device of lm, the
// language model's (a backend holds one KV cache, and the tower's steps
// are as long as an image has patches): lm's backend.Sibling, which on
// the CPU has lm's threads.
func newVisionTower(m *vision.Model, lm backend.Backend) (*visionTower, error) {
	c := m.Config
	if !slices.Contains(vision.Projectors, c.Projector) {
		return nil, fmt.Errorf("%w %q", vision.ErrUnsupported, c.Projector)
	}
	n := c.Patches()
	rows := n * n
	switch {
	case c.Projector == vision.Gemma4V:
		rows = gemma4MaxPatches(c)
	case c.Dynamic():
		rows = qwenMaxPatches(c)
	}
	be, ok, err := backend.NewSibling(lm, rows)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("the vision tower needs a backend of its own on the device of %s, which cannot open one", lm.Name())
	}
	var t *visionTower
	switch {
	case c.Projector == vision.Gemma4V:
		t = &visionTower{cfg: c, be: be}
		t.g4, err = newGemma4Tower(m, be)
	case c.Dynamic():
		t = &visionTower{cfg: c, be: be}
		t.qwen, err = newQwenTower(m, be)
	default:
		t, err = buildTower(m, be)
	}
	if err != nil {
		be.Close()
		return nil, err
	}
	return t, nil
}

// towerActs are the shapes (rows, columns) of the activations of a
// gemma3 or idefics3 tower for steps of rows patches, in buildTower's
// order: patches, x, xb, xn, q, k, v, att, up, then one row an image
// token: pooled, normed, out.
func towerActs(c vision.Config, rows int) [][2]int {
	p, toks := c.PatchSize, c.Tokens()
	return [][2]int{{rows, 3 * p * p}, {rows, c.Dim}, {rows, c.Dim}, {rows, c.Dim}, {rows, c.Dim}, {rows, c.Dim},
		{rows, c.Dim}, {rows, c.Dim}, {rows, c.FFN}, {toks, c.Dim}, {toks, c.Dim}, {toks, c.OutDim}}
}

// TowerBytes is what m's vision tower takes of its device: its weights,
// all in f32 (newVisionTower), and its activations and attention cache
// at the most patches a step takes; a Qwen or Gemma 4 tower's activations per
// power-of-two patch count are counted as though an image of every size
// had been seen (at most twice the largest's).
func TowerBytes(m *vision.Model) (weights, acts int64) {
	for _, t := range m.Tensors {
		weights += 4 * int64(t.Elements())
	}
	c := m.Config
	if c.Standardize { // Gemma 4's scale as a diagonal matrix
		weights += 4 * int64(c.Dim) * int64(c.Dim)
	}
	var shapes [][2]int
	rows := c.Patches() * c.Patches()
	switch {
	case c.Projector == vision.Gemma4V:
		rows = gemma4MaxPatches(c)
		for r := 16; r < 2*rows; r *= 2 {
			shapes = append(shapes, gemma4ActShapes(c, r)...)
		}
	case c.Dynamic():
		rows = qwenMaxPatches(c)
		for r := 16; r < 2*rows; r *= 2 {
			shapes = append(shapes, qwenActShapes(c, r)...)
		}
	default:
		shapes = towerActs(c, rows)
	}
	for _, a := range shapes {
		acts += 4 * int64(a[0]) * int64(a[1])
	}
	blocks := (rows + vitBlock - 1) / vitBlock
	if c.Dynamic() {
		blocks = qwenKVBlocks(c)
	}
	kv := backend.KVShape{Layers: 1, Blocks: blocks, BlockSize: vitBlock, Heads: c.Heads, HeadDim: c.HeadDim()}
	return weights, acts + kv.Bytes()
}

// uploadF32 uploads vals as an F32 weight of the given shape.
func uploadF32(be backend.Backend, name string, vals []float32, shape ...int) (backend.Weight, error) {
	raw, err := dtype.Quantize(dtype.F32, vals)
	if err != nil {
		return nil, err
	}
	w, err := be.UploadAs(models.NewTensor(name, shape, dtype.F32, func() ([]byte, error) { return raw, nil }), backend.F32)
	if err != nil {
		return nil, fmt.Errorf("upload %s: %w", name, err)
	}
	return w, nil
}

// towerUploader returns a function that uploads m's tensor name to dst
// in f32 (a tower's weights are few and its products many), seen as shape
// where one is given (the patch convolution's kernel as a matrix).
func towerUploader(m *vision.Model, be backend.Backend) func(dst *backend.Weight, name string, shape ...int) error {
	return func(dst *backend.Weight, name string, shape ...int) error {
		src, err := m.Tensor(name)
		if err != nil {
			return err
		}
		if shape != nil {
			src = models.NewTensor(name, shape, src.Type, src.Raw)
		}
		if *dst, err = be.UploadAs(src, backend.F32); err != nil {
			return fmt.Errorf("upload %s: %w", name, err)
		}
		return nil
	}
}

// towerKV is a tower's attention cache of blocks blocks (one sequence,
// every patch a row) and its block table, block b at b.
func towerKV(be backend.Backend, c vision.Config, blocks int) (backend.KV, []int32, error) {
	kv, err := be.NewKV(backend.KVShape{Layers: 1, Blocks: blocks, BlockSize: vitBlock, Heads: c.Heads, HeadDim: c.HeadDim()})
	if err != nil {
		return nil, nil, err
	}
	table := make([]int32, blocks)
	for b := range table {
		table[b] = int32(b)
	}
	return kv, table, nil
}

// buildTower uploads m's weights to be and allocates the activations.
func buildTower(m *vision.Model, be backend.Backend) (*visionTower, error) {
	c := m.Config
	t := &visionTower{cfg: c, be: be}
	up := towerUploader(m, be)
	values := func(name string) ([]float32, error) {
		w, err := m.Tensor(name)
		if err != nil {
			return nil, err
		}
		return w.Float32()
	}
	p, n := c.PatchSize, c.Patches()
	if err := up(&t.patchW, vision.PatchEmbd, c.Dim, 3*p*p); err != nil {
		return nil, err
	}
	type named struct {
		dst  *backend.Weight
		name string
	}
	ws := []named{{&t.patchB, vision.PatchBias}, {&t.post.w, vision.PostLN + ".weight"}, {&t.post.b, vision.PostLN + ".bias"}}
	t.layers = make([]vitLayer, c.Layers)
	for l := range t.layers {
		lw := &t.layers[l]
		for _, k := range []struct {
			w, b *backend.Weight
			kind string
		}{{&lw.wq, &lw.bq, "attn_q"}, {&lw.wk, &lw.bk, "attn_k"}, {&lw.wv, &lw.bv, "attn_v"}, {&lw.wo, &lw.bo, "attn_out"},
			{&lw.up, &lw.bUp, "ffn_up"}, {&lw.down, &lw.bDn, "ffn_down"}, {&lw.ln1.w, &lw.ln1.b, "ln1"}, {&lw.ln2.w, &lw.ln2.b, "ln2"}} {
			ws = append(ws, named{k.w, vision.LayerTensor(l, k.kind, "weight")}, named{k.b, vision.LayerTensor(l, k.kind, "bias")})
		}
	}
	switch c.Projector {
	case vision.Gemma3:
		ws = append(ws, named{&t.softNorm, vision.SoftEmbNorm})
	case vision.Idefics3:
		ws = append(ws, named{&t.projection, vision.FC}) // [OutDim, Merge²·Dim] already
	}
	for _, w := range ws {
		if err := up(w.dst, w.name); err != nil {
			return nil, err
		}
	}
	// The position embeddings, row r that of the patch the tower's row r
	// holds (vision.Config.PatchOrder).
	pos, err := values(vision.PositionEmbd)
	if err != nil {
		return nil, err
	}
	order := c.PatchOrder()
	perm := make([]float32, 0, len(pos))
	for _, i := range order {
		perm = append(perm, pos[i*c.Dim:(i+1)*c.Dim]...)
	}
	if t.pos, err = uploadF32(be, vision.PositionEmbd, perm, n*n, c.Dim); err != nil {
		return nil, err
	}
	if c.Projector == vision.Gemma3 {
		// The projection is stored as Hugging Face keeps it, [Dim, OutDim]
		// (clip.cpp transposes it in the graph): transpose it once here.
		vals, err := values(vision.InputProj)
		if err != nil {
			return nil, err
		}
		tr := make([]float32, len(vals))
		for i := range c.Dim {
			for o := range c.OutDim {
				tr[o*c.Dim+i] = vals[i*c.OutDim+o]
			}
		}
		if t.projection, err = uploadF32(be, vision.InputProj, tr, c.OutDim, c.Dim); err != nil {
			return nil, err
		}
	}

	rows, toks := n*n, c.Tokens()
	dsts := []*backend.Tensor{&t.patches, &t.x, &t.xb, &t.xn, &t.q, &t.k, &t.v, &t.att, &t.up, &t.pooled, &t.normed, &t.out}
	for i, a := range towerActs(c, rows) {
		if *dsts[i], err = be.NewTensor(a[0], a[1]); err != nil {
			return nil, err
		}
	}
	blocks := (rows + vitBlock - 1) / vitBlock
	var table []int32
	if t.kv, table, err = towerKV(be, c, blocks); err != nil {
		return nil, err
	}
	t.attn = backend.Attention{Heads: c.Heads, KVHeads: c.Heads, HeadDim: c.HeadDim(),
		Scale: float32(1 / math.Sqrt(float64(c.HeadDim()))), Bidirectional: true}

	// The tower's step: every patch a row of one sequence at its row's
	// index (which the position embeddings' Lookup reads).
	t.vit = backend.Batch{BlockSize: vitBlock, Tables: [][]int32{table}}
	for i := range rows {
		t.vit.Tokens, t.vit.Pos, t.vit.Seq = append(t.vit.Tokens, 0), append(t.vit.Pos, int32(i)), append(t.vit.Seq, 0)
	}
	switch c.Projector {
	case vision.Gemma3:
		// The pooling step: patch (x, y) belongs to "sequence" (y/k)·(n/k)
		// + x/k, so that MeanPool averages each k×k window (ggml_pool_2d's
		// average, windows in row-major order).
		k, side := c.Merge, n/c.Merge
		t.head = backend.Batch{BlockSize: vitBlock, Tables: make([][]int32, toks)}
		for s := range toks {
			t.head.Tables[s] = []int32{0}
		}
		for i := range rows {
			x, y := i%n, i/n
			t.head.Tokens, t.head.Pos = append(t.head.Tokens, 0), append(t.head.Pos, 0)
			t.head.Seq = append(t.head.Seq, int32((y/k)*side+x/k))
		}
	case vision.Idefics3:
		// The projection's step: one row a token, each the Merge² rows of
		// its window side by side (no attention: every row at position 0,
		// in the one block of the table).
		if t.merged, err = backend.View(be, t.xn, toks, c.Merge*c.Merge*c.Dim); err != nil {
			return nil, err
		}
		t.head = backend.Batch{BlockSize: vitBlock, Tables: [][]int32{{0}}}
		for range toks {
			t.head.Tokens, t.head.Pos, t.head.Seq = append(t.head.Tokens, 0), append(t.head.Pos, 0), append(t.head.Seq, 0)
		}
	}
	return t, nil
}

// tiles is how many pictures the tower encodes for img (a dynamic
// tower's image is one of its own size).
func (t *visionTower) tiles(img *vision.Image) int {
	if t.dynamic() {
		return 1
	}
	return t.cfg.TilingOf(img.W, img.H).Tiles()
}

// encode returns img's embeddings: Tokens() rows of OutDim values for
// each of its tiles (vision.Preprocess's pictures), tile after tile; for
// a dynamic tower one for each token of the image's Grid.
func (t *visionTower) encode(img *vision.Image) ([]float32, error) {
	switch {
	case t.qwen != nil:
		return t.qwen.encode(img)
	case t.g4 != nil:
		return t.g4.encode(img)
	}
	var out []float32
	for _, planar := range vision.Preprocess(img, t.cfg) {
		emb, err := t.encodeTile(planar)
		if err != nil {
			return nil, err
		}
		out = append(out, emb...)
	}
	return out, nil
}

// encodeTile runs the tower and projector on one preprocessed picture.
func (t *visionTower) encodeTile(planar []float32) ([]float32, error) {
	be, c := t.be, t.cfg
	if err := be.Write(t.patches, vision.Patches(planar, c)); err != nil {
		return nil, err
	}
	if err := be.Begin(t.vit); err != nil {
		return nil, err
	}
	// Patch embeddings (the convolution as a product) plus learned
	// absolute positions.
	t.linear(t.x, t.patches, t.patchW, t.patchB)
	be.Lookup(t.xb, t.pos, backend.ByPos)
	be.Add(t.x, t.xb)
	for _, w := range t.layers {
		// x += Wo·attend(Wq·h, Wk·h, Wv·h), h = LN1(x): every patch sees
		// every patch.
		be.LayerNorm(t.xn, t.x, w.ln1.w, w.ln1.b, c.Eps)
		t.linear(t.q, t.xn, w.wq, w.bq)
		t.linear(t.k, t.xn, w.wk, w.bk)
		t.linear(t.v, t.xn, w.wv, w.bv)
		be.StoreKV(t.kv, 0, t.k, t.v)
		be.Attend(t.att, t.q, t.kv, 0, t.attn)
		t.linear(t.xb, t.att, w.wo, w.bo)
		be.Add(t.x, t.xb)
		// x += W_down·GELU(W_up·h), h = LN2(x).
		be.LayerNorm(t.xn, t.x, w.ln2.w, w.ln2.b, c.Eps)
		t.linear(t.up, t.xn, w.up, w.bUp)
		be.Activate(t.up, models.GELUTanh)
		t.linear(t.xb, t.up, w.down, w.bDn)
		be.Add(t.x, t.xb)
	}
	be.LayerNorm(t.xn, t.x, t.post.w, t.post.b, c.Eps)
	if err := be.Begin(t.head); err != nil {
		return nil, err
	}
	switch c.Projector {
	case vision.Gemma3:
		// A Merge×Merge average pool, RMSNorm with the soft embedding
		// norm's weight, then the projection.
		be.MeanPool(t.pooled, t.xn)
		be.RMSNorm(t.normed, t.pooled, t.softNorm, c.Eps)
		be.MatMul(t.out, t.normed, t.projection)
	case vision.Idefics3:
		// The pixel shuffle (the rows already in its order), then fc.
		be.MatMul(t.out, t.merged, t.projection)
	}
	return be.Read(t.out, c.Tokens())
}

// linear sets dst = x·wᵀ + b.
func (t *visionTower) linear(dst, x backend.Tensor, w, b backend.Weight) {
	t.be.MatMul(dst, x, w)
	t.be.AddBias(dst, b)
}

// imageIDs are the token ids that stand for an image's n embeddings in a
// sequence: drawn from a generator seeded by the image's hash, so that the
// prefix cache, which keys blocks by their tokens, keys an image's blocks
// by the image (a repeated image finds its keys and values cached, a
// different one never matches) while the ids stay inside the vocabulary
// (the embedding lookup of the step reads them before the image's rows
// replace them).
func imageIDs(hash [32]byte, n, vocab int) []int32 {
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(hash[:8]), binary.LittleEndian.Uint64(hash[8:16])))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(rng.IntN(vocab))
	}
	return ids
}
