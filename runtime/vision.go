package runtime

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// visionTower is the forward pass of a SigLIP vision tower and Gemma 3's
// projector (llama.cpp's clip_graph_siglip for PROJECTOR_TYPE_GEMMA3) on
// the engine's backend: image in, one embedding row per image token out,
// in the language model's embedding space. It runs on the ops the
// language model and the BERT encoder already use: the patch convolution
// is a product (the image laid out as one row per patch,
// vision.Patches), the 2-D average pool a MeanPool over rows grouped by
// their pooling window, the attention bidirectional over one sequence.
type visionTower struct {
	cfg vision.Config
	be  backend.Backend

	patchW, patchB, pos  backend.Weight
	layers               []vitLayer
	post                 norm
	softNorm, projection backend.Weight

	patches, x, xb, xn, q, k, v, att, up backend.Tensor // one row a patch
	pooled, normed, out                  backend.Tensor // one row an image token
	kv                                   backend.KV
	attn                                 backend.Attention
	vit, pool                            backend.Batch

	qwen *qwenTower // Qwen2-VL's tower instead (vision_qwen.go)
}

type vitLayer struct {
	wq, wk, wv, wo, up, down backend.Weight
	bq, bk, bv, bo, bUp, bDn backend.Weight
	ln1, ln2                 norm
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
	if c.Projector != vision.Gemma3 && c.Projector != vision.Qwen2VL {
		return nil, fmt.Errorf("%w %q", vision.ErrUnsupported, c.Projector)
	}
	n := c.Patches()
	rows := n * n
	if c.Projector == vision.Qwen2VL {
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
	if c.Projector == vision.Qwen2VL {
		t = &visionTower{cfg: c, be: be}
		t.qwen, err = newQwenTower(m, be)
	} else {
		t, err = buildTower(m, be)
	}
	if err != nil {
		be.Close()
		return nil, err
	}
	return t, nil
}

// buildTower uploads m's weights to be and allocates the activations.
func buildTower(m *vision.Model, be backend.Backend) (*visionTower, error) {
	c := m.Config
	t := &visionTower{cfg: c, be: be}
	up := func(dst *backend.Weight, name string, shape ...int) error {
		src, err := m.Tensor(name)
		if err != nil {
			return err
		}
		if shape != nil { // the same values seen as another shape (the convolution's kernel as a matrix)
			src = models.NewTensor(name, shape, src.Type, src.Raw)
		}
		if *dst, err = be.UploadAs(src, backend.F32); err != nil {
			return fmt.Errorf("upload %s: %w", name, err)
		}
		return nil
	}
	p, n := c.PatchSize, c.Patches()
	if err := up(&t.patchW, vision.PatchEmbd, c.Dim, 3*p*p); err != nil {
		return nil, err
	}
	type named struct {
		dst  *backend.Weight
		name string
	}
	ws := []named{{&t.patchB, vision.PatchBias}, {&t.pos, vision.PositionEmbd},
		{&t.post.w, vision.PostLN + ".weight"}, {&t.post.b, vision.PostLN + ".bias"}, {&t.softNorm, vision.SoftEmbNorm}}
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
	for _, w := range ws {
		if err := up(w.dst, w.name); err != nil {
			return nil, err
		}
	}
	// The projection is stored as Hugging Face keeps it, [Dim, OutDim]
	// (clip.cpp transposes it in the graph): transpose it once here.
	proj, err := m.Tensor(vision.InputProj)
	if err != nil {
		return nil, err
	}
	vals, err := proj.Float32()
	if err != nil {
		return nil, err
	}
	tr := make([]float32, len(vals))
	for i := range c.Dim {
		for o := range c.OutDim {
			tr[o*c.Dim+i] = vals[i*c.OutDim+o]
		}
	}
	raw, err := dtype.Quantize(dtype.F32, tr)
	if err != nil {
		return nil, err
	}
	pt := models.NewTensor(vision.InputProj, []int{c.OutDim, c.Dim}, dtype.F32, func() ([]byte, error) { return raw, nil })
	if t.projection, err = be.UploadAs(pt, backend.F32); err != nil {
		return nil, fmt.Errorf("upload %s: %w", vision.InputProj, err)
	}

	rows, toks := n*n, c.Tokens()
	for _, a := range []struct {
		dst        *backend.Tensor
		rows, cols int
	}{
		{&t.patches, rows, 3 * p * p}, {&t.x, rows, c.Dim}, {&t.xb, rows, c.Dim}, {&t.xn, rows, c.Dim},
		{&t.q, rows, c.Dim}, {&t.k, rows, c.Dim}, {&t.v, rows, c.Dim}, {&t.att, rows, c.Dim}, {&t.up, rows, c.FFN},
		{&t.pooled, toks, c.Dim}, {&t.normed, toks, c.Dim}, {&t.out, toks, c.OutDim},
	} {
		if *a.dst, err = be.NewTensor(a.rows, a.cols); err != nil {
			return nil, err
		}
	}
	blocks := (rows + vitBlock - 1) / vitBlock
	if t.kv, err = be.NewKV(backend.KVShape{Layers: 1, Blocks: blocks, BlockSize: vitBlock, Heads: c.Heads, HeadDim: c.HeadDim()}); err != nil {
		return nil, err
	}
	t.attn = backend.Attention{Heads: c.Heads, KVHeads: c.Heads, HeadDim: c.HeadDim(),
		Scale: float32(1 / math.Sqrt(float64(c.HeadDim()))), Bidirectional: true}

	// The tower's step: every patch a row of one sequence at its index
	// (which the position embeddings' Lookup reads).
	t.vit = backend.Batch{BlockSize: vitBlock, Tables: [][]int32{make([]int32, blocks)}}
	for b := range blocks {
		t.vit.Tables[0][b] = int32(b)
	}
	for i := range rows {
		t.vit.Tokens, t.vit.Pos, t.vit.Seq = append(t.vit.Tokens, 0), append(t.vit.Pos, int32(i)), append(t.vit.Seq, 0)
	}
	// The pooling step: patch (x, y) belongs to "sequence" (y/k)·(n/k) +
	// x/k, so that MeanPool averages each k×k window (ggml_pool_2d's
	// average, windows in row-major order).
	k, side := c.Merge, n/c.Merge
	t.pool = backend.Batch{BlockSize: vitBlock, Tables: make([][]int32, toks)}
	for s := range toks {
		t.pool.Tables[s] = []int32{0}
	}
	for i := range rows {
		x, y := i%n, i/n
		t.pool.Tokens, t.pool.Pos = append(t.pool.Tokens, 0), append(t.pool.Pos, 0)
		t.pool.Seq = append(t.pool.Seq, int32((y/k)*side+x/k))
	}
	return t, nil
}

// encode returns img's embeddings: Tokens() rows of OutDim values (for
// a dynamic tower, one for each token of the image's Grid).
func (t *visionTower) encode(img *vision.Image) ([]float32, error) {
	if t.qwen != nil {
		return t.qwen.encode(img)
	}
	be, c := t.be, t.cfg
	patches := vision.Patches(vision.Preprocess(img, c), c)
	if err := be.Write(t.patches, patches); err != nil {
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
	// Gemma 3's projector: a Merge×Merge average pool, RMSNorm with the
	// soft embedding norm's weight, then the projection.
	if err := be.Begin(t.pool); err != nil {
		return nil, err
	}
	be.MeanPool(t.pooled, t.xn)
	be.RMSNorm(t.normed, t.pooled, t.softNorm, c.Eps)
	be.MatMul(t.out, t.normed, t.projection)
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
