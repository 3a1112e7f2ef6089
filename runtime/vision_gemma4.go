package runtime

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// gemma4Tower is Gemma 4's vision encoder (llama.cpp's
// clip_graph_gemma4v) on the engine's backend. Like Qwen-VL's, an image
// keeps its aspect, so activations are made per size class (rows rounded
// up to a power of two) and the attention's cache once for the most
// patches.
//
// Its 2-D RoPE turns the first half of each head by the patch's column
// and the second by its row, each half in NeoX order (pairs e and e+hd/4
// of the half). A consistent permutation of q's and k's head dimensions
// leaves q·k unchanged, so the q and k weights (and their norms) are
// stored with the head's second and third quarters swapped: the pairs are
// then e and e+hd/2, the first hd/4 by the column and the rest by the row
// with frequencies starting again, which is the backend's VisionRope
// (Qwen-VL's) with sections hd/4, hd/4: no kernel of its own.
type gemma4Tower struct {
	cfg vision.Config
	be  backend.Backend

	patchW     backend.Weight // [Dim, 3·p·p], no bias
	posX, posY backend.Weight // [Positions, Dim]: by column, by row
	layers     []gemma4VisionLayer
	ones       backend.Weight // [HeadDim]: v's norm has no weight
	onesDim    backend.Weight // [Dim]: nor has the projection's
	// std: the pooled tokens' standardisation (x − bias)·scale, as
	// AddBias of −bias and a product with diag(scale); nil without.
	stdBias, stdScale backend.Weight
	proj              backend.Weight // [OutDim, Dim]
	rope              backend.Rope
	attn              backend.Attention
	acts              map[int]*gemma4VisionActs // by rows
	kv                backend.KV
	table             []int32
}

type gemma4VisionLayer struct {
	wq, wk, wv, wo, gate, up, down backend.Weight
	qNorm, kNorm                   backend.Weight // permuted as q and k
	ln1, ln2, attnPost, ffnPost    backend.Weight
	outScale                       float32
}

// gemma4VisionActs are the activations of images of up to rows patches.
type gemma4VisionActs struct {
	rows                                       int
	patches, x, xb, xn, q, k, v, att, gate, up backend.Tensor // one row a patch
	pooled, std, normed, out                   backend.Tensor // one row a token
}

// gemma4RopeSwap maps a head dimension of the stored (permuted) q and k
// to the file's: the second and third quarters swapped (its own inverse).
func gemma4RopeSwap(e, hd int) int {
	switch q := hd / 4; {
	case e >= q && e < 2*q:
		return e + q
	case e >= 2*q && e < 3*q:
		return e - q
	}
	return e
}

// newGemma4Tower uploads m's weights (f32) to be.
func newGemma4Tower(m *vision.Model, be backend.Backend) (*gemma4Tower, error) {
	c := m.Config
	hd := c.HeadDim()
	if hd%4 != 0 {
		return nil, fmt.Errorf("mmproj %s: heads of %d: the 2-D RoPE takes a multiple of 4", m.Path, hd)
	}
	t := &gemma4Tower{cfg: c, be: be, acts: map[int]*gemma4VisionActs{},
		rope: backend.Rope{Heads: c.Heads, HeadDim: hd, Dim: hd, Theta: c.RopeTheta(), Layout: models.RopeHalves,
			Sections: [4]int{hd / 4, hd / 4}, Axes: backend.VisionRope},
		attn: backend.Attention{Heads: c.Heads, KVHeads: c.Heads, HeadDim: hd, Scale: 1, Bidirectional: true}}
	values := func(name string) ([]float32, error) {
		w, err := m.Tensor(name)
		if err != nil {
			return nil, err
		}
		return w.Float32()
	}
	up := towerUploader(m, be)
	// permuted uploads a [rows, cols] tensor whose head dimensions
	// (rows, or the entries of a vector) are permuted by gemma4RopeSwap.
	permuted := func(dst *backend.Weight, name string, rows, cols int) error {
		v, err := values(name)
		if err != nil {
			return err
		}
		out := make([]float32, len(v))
		for r := range rows {
			h, e := r/hd, r%hd
			src := h*hd + gemma4RopeSwap(e, hd)
			copy(out[r*cols:(r+1)*cols], v[src*cols:(src+1)*cols])
		}
		shape := []int{rows, cols}
		if cols == 1 {
			shape = []int{rows}
		}
		*dst, err = uploadF32(be, name, out, shape...)
		return err
	}
	p, d := c.PatchSize, c.Dim
	if err := up(&t.patchW, vision.PatchEmbd, d, 3*p*p); err != nil {
		return nil, err
	}
	pos, err := values(vision.PositionEmbd)
	if err != nil {
		return nil, err
	}
	half := c.Positions * d
	if t.posX, err = uploadF32(be, vision.PositionEmbd+" (columns)", pos[:half], c.Positions, d); err != nil {
		return nil, err
	}
	if t.posY, err = uploadF32(be, vision.PositionEmbd+" (rows)", pos[half:], c.Positions, d); err != nil {
		return nil, err
	}
	if t.ones, err = be.UploadAs(onesTensor("v.norm", hd), backend.F32); err != nil {
		return nil, err
	}
	if t.onesDim, err = be.UploadAs(onesTensor("mm.norm", d), backend.F32); err != nil {
		return nil, err
	}
	t.layers = make([]gemma4VisionLayer, c.Layers)
	for l := range t.layers {
		lw := &t.layers[l]
		name := func(kind string) string { return vision.LayerTensor(l, kind, "weight") }
		for _, k := range []struct {
			dst  *backend.Weight
			kind string
		}{{&lw.wv, "attn_v"}, {&lw.wo, "attn_out"}, {&lw.gate, "ffn_gate"}, {&lw.up, "ffn_up"}, {&lw.down, "ffn_down"},
			{&lw.ln1, "ln1"}, {&lw.ln2, "ln2"}, {&lw.attnPost, "attn_post_norm"}, {&lw.ffnPost, "ffn_post_norm"}} {
			if err := up(k.dst, name(k.kind)); err != nil {
				return nil, err
			}
		}
		for _, k := range []struct {
			dst        *backend.Weight
			kind       string
			rows, cols int
		}{{&lw.wq, "attn_q", d, d}, {&lw.wk, "attn_k", d, d}, {&lw.qNorm, "attn_q_norm", hd, 1}, {&lw.kNorm, "attn_k_norm", hd, 1}} {
			if err := permuted(k.dst, name(k.kind), k.rows, k.cols); err != nil {
				return nil, err
			}
		}
		s, err := values(name("out_scale"))
		if err != nil {
			return nil, err
		}
		lw.outScale = s[0]
	}
	if c.Standardize {
		bias, err := values(vision.StdBias)
		if err != nil {
			return nil, err
		}
		for i := range bias {
			bias[i] = -bias[i]
		}
		if t.stdBias, err = uploadF32(be, vision.StdBias, bias, d); err != nil {
			return nil, err
		}
		scale, err := values(vision.StdScale)
		if err != nil {
			return nil, err
		}
		diag := make([]float32, d*d)
		for i, s := range scale {
			diag[i*d+i] = s
		}
		if t.stdScale, err = uploadF32(be, vision.StdScale, diag, d, d); err != nil {
			return nil, err
		}
	}
	if err := up(&t.proj, vision.Gemma4Proj); err != nil {
		return nil, err
	}
	return t, nil
}

// gemma4MaxPatches is the most patches an image becomes (MaxPixels'
// worth): the rows the tower's backend is opened for.
func gemma4MaxPatches(c vision.Config) int { return c.MaxPixels / (c.PatchSize * c.PatchSize) }

// gemma4ActShapes are the shapes (rows, columns) of a Gemma 4 tower's
// activations for rows patches, in actsFor's order: patches, x, xb, xn,
// q, k, v, att, gate, up, then one row a token: pooled, std, normed, out.
func gemma4ActShapes(c vision.Config, rows int) [][2]int {
	p, m := c.PatchSize, c.Merge*c.Merge
	toks := (rows + m - 1) / m
	return [][2]int{{rows, 3 * p * p}, {rows, c.Dim}, {rows, c.Dim}, {rows, c.Dim}, {rows, c.Dim}, {rows, c.Dim},
		{rows, c.Dim}, {rows, c.Dim}, {rows, c.FFN}, {rows, c.FFN}, {toks, c.Dim}, {toks, c.Dim}, {toks, c.Dim}, {toks, c.OutDim}}
}

// actsFor returns the activations for an image of n patches.
func (t *gemma4Tower) actsFor(n int) (*gemma4VisionActs, error) {
	rows := max(16, 1<<bits.Len(uint(n-1))) // n rounded up to a power of two
	if a := t.acts[rows]; a != nil {
		return a, nil
	}
	c, be := t.cfg, t.be
	a := &gemma4VisionActs{rows: rows}
	dsts := []*backend.Tensor{&a.patches, &a.x, &a.xb, &a.xn, &a.q, &a.k, &a.v, &a.att, &a.gate, &a.up, &a.pooled, &a.std, &a.normed, &a.out}
	for i, s := range gemma4ActShapes(c, rows) {
		var err error
		if *dsts[i], err = be.NewTensor(s[0], s[1]); err != nil {
			return nil, err
		}
	}
	if t.kv == nil {
		var err error
		if t.kv, t.table, err = towerKV(be, c, (gemma4MaxPatches(c)+vitBlock-1)/vitBlock); err != nil {
			return nil, err
		}
	}
	t.acts[rows] = a
	return a, nil
}

// encode returns img's embeddings: a row of OutDim values for each token
// of its grid (vision.Config.Grid), row by row.
func (t *gemma4Tower) encode(img *vision.Image) ([]float32, error) {
	be, c := t.be, t.cfg
	planar, w, h := vision.PreprocessSized(img, c)
	patches, cols, ys := vision.Gemma4Patches(planar, w, h, c)
	n, nx := len(cols), w/c.PatchSize
	if most := gemma4MaxPatches(c); n > most {
		return nil, fmt.Errorf("an image of %d × %d pixels becomes %d patches, more than the tower's %d", img.W, img.H, n, most)
	}
	if side := max(nx, h/c.PatchSize); side > c.Positions {
		return nil, fmt.Errorf("an image of %d × %d pixels is %d patches a side, more than the tower's %d positions", img.W, img.H, side, c.Positions)
	}
	a, err := t.actsFor(n)
	if err != nil {
		return nil, err
	}
	if err := be.Write(a.patches, patches); err != nil {
		return nil, err
	}
	// The patch embeddings plus learned positions: the column's row of
	// one table (by Pos) and the patch row's of the other (by Types).
	zeros := make([]int32, n)
	if err := be.Begin(backend.Batch{BlockSize: vitBlock, Tables: [][]int32{t.table}, Tokens: zeros, Pos: cols, Types: ys, Seq: zeros}); err != nil {
		return nil, err
	}
	be.MatMul(a.x, a.patches, t.patchW)
	be.Lookup(a.xb, t.posX, backend.ByPos)
	be.Add(a.x, a.xb)
	be.Lookup(a.xb, t.posY, backend.ByType)
	be.Add(a.x, a.xb)
	// Every patch a row of one sequence, turned by its column and row.
	vit := backend.Batch{BlockSize: vitBlock, Tables: [][]int32{t.table}, Tokens: zeros, Pos: make([]int32, n), Seq: zeros,
		RopePos: make([]int32, 4*n)}
	for i := range n {
		vit.Pos[i] = int32(i)
		vit.RopePos[4*i], vit.RopePos[4*i+1] = cols[i], ys[i]
	}
	if err := be.Begin(vit); err != nil {
		return nil, err
	}
	hd := c.HeadDim()
	for _, l := range t.layers {
		// x += post(Wo·attend(rope(qnorm(Wq·h)), rope(knorm(Wk·h)), norm(Wv·h))), h = ln1(x),
		// every norm an RMSNorm, the scores unscaled.
		be.RMSNorm(a.xn, a.x, l.ln1, c.Eps)
		be.MatMul(a.q, a.xn, l.wq)
		be.MatMul(a.k, a.xn, l.wk)
		be.MatMul(a.v, a.xn, l.wv)
		be.HeadNorm(a.q, l.qNorm, hd, c.Eps)
		be.HeadNorm(a.k, l.kNorm, hd, c.Eps)
		be.HeadNorm(a.v, t.ones, hd, c.Eps)
		be.Rope(a.q, t.rope)
		be.Rope(a.k, t.rope)
		be.StoreKV(t.kv, 0, a.k, a.v)
		be.Attend(a.att, a.q, t.kv, 0, t.attn)
		be.MatMul(a.xb, a.att, l.wo)
		be.RMSNorm(a.xn, a.xb, l.attnPost, c.Eps)
		be.Add(a.x, a.xn)
		// x += post(W_down·(act(W_gate·h)·W_up·h)), h = ln2(x); then x
		// times the layer's scalar.
		be.RMSNorm(a.xn, a.x, l.ln2, c.Eps)
		be.MatMul(a.gate, a.xn, l.gate)
		be.MatMul(a.up, a.xn, l.up)
		be.GLU(a.gate, a.up, c.Act)
		be.MatMul(a.xb, a.gate, l.down)
		be.RMSNorm(a.xn, a.xb, l.ffnPost, c.Eps)
		be.Add(a.x, a.xn)
		be.Scale(a.x, l.outScale)
	}
	// The Merge × Merge average pool: patch (x, y) in window (y/k)·(nx/k)
	// + x/k, windows in raster order (ggml_pool_2d's).
	k := c.Merge
	tokens := n / (k * k)
	pool := backend.Batch{BlockSize: vitBlock, Tables: make([][]int32, tokens), Tokens: zeros, Pos: make([]int32, n), Seq: make([]int32, n)}
	for s := range pool.Tables {
		pool.Tables[s] = []int32{0}
	}
	for i := range n {
		pool.Seq[i] = (ys[i]/int32(k))*int32(nx/k) + cols[i]/int32(k)
	}
	if err := be.Begin(pool); err != nil {
		return nil, err
	}
	be.MeanPool(a.pooled, a.x)
	// √Dim, the standardisation, an RMSNorm without weight, the projection.
	head := backend.Batch{BlockSize: vitBlock, Tables: [][]int32{t.table}, Tokens: zeros[:tokens], Pos: vit.Pos[:tokens], Seq: zeros[:tokens]}
	if err := be.Begin(head); err != nil {
		return nil, err
	}
	be.Scale(a.pooled, float32(math.Sqrt(float64(c.Dim))))
	src := a.pooled
	if t.stdScale != nil {
		be.AddBias(a.pooled, t.stdBias)
		be.MatMul(a.std, a.pooled, t.stdScale)
		src = a.std
	}
	be.RMSNorm(a.normed, src, t.onesDim, c.Eps)
	be.MatMul(a.out, a.normed, t.proj)
	return be.Read(a.out, tokens)
}
