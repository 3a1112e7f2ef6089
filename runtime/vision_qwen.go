package runtime

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// qwenTower is Qwen2-VL's and Qwen3-VL's vision tower and merger
// (llama.cpp's clip_graph_qwen2vl and clip_graph_qwen3vl) on the engine's
// backend. An image keeps its aspect
// (vision.Config.Size), so a tower's step is as long as that image's
// patches: the activations are made for the first image of each size
// class (rows rounded up to a power of two) and kept; the attention's
// cache, for the most patches an image has, with the first. Patches come in
// the merger's order (vision.MergedPatches), each 2×2 block on four
// consecutive rows, so that the merger reads a token's four patches as
// one row of four times the width (a backend.View of the tower's
// output). Qwen3-VL adds a patch bias, learned positions resized to the
// image on the host (vision.Config.PositionsFor, in the same order), and
// its deepstack mergers: the LayerNorm of a tapped layer's output, seen
// four patches to a row, is kept until the merge step runs each
// merger's MLP beside the main one.
type qwenTower struct {
	cfg vision.Config
	be  backend.Backend

	patchW             backend.Weight // the two frames' kernels summed: a still image is both frames
	patchB             backend.Weight // Qwen3-VL's, or nil
	posTable           []float32      // Qwen3-VL's learned positions, Patches()² rows of Dim
	layers             []vitLayer
	post               norm
	upW, upB, dnW, dnB backend.Weight
	deep               []deepMerger // Qwen3-VL's, by tapped layer
	rope               backend.Rope
	attn               backend.Attention
	acts               map[int]*qwenActs // by rows
	// kv is the attention's scratch cache, for the most patches (a GPU
	// backend holds one cache), and table its blocks in order.
	kv    backend.KV
	table []int32
}

// deepMerger is a Qwen3-VL deepstack merger: after tower layer layer,
// LayerNorm over each token's four patches, then Linear, GELU, Linear
// into the language model's width.
type deepMerger struct {
	layer                  int
	norm                   norm
	fc1W, fc1B, fc2W, fc2B backend.Weight
}

// qwenActs are the activations of images of up to rows patches.
type qwenActs struct {
	rows                                 int
	patches, x, xb, xn, q, k, v, att, up backend.Tensor // one row a patch
	pos                                  backend.Tensor // Qwen3-VL's positions, one row a patch
	gate                                 backend.Tensor // Qwen2.5-VL's feed-forward gate, one row a patch
	merged, hid, out                     backend.Tensor // one row a token
	// Qwen3-VL's deepstack: x seen four patches to a row, each merger's
	// normalised input and output.
	xMerged     backend.Tensor
	dsIn, dsOut []backend.Tensor
}

// newQwenTower uploads m's weights (f32) to be.
func newQwenTower(m *vision.Model, be backend.Backend) (*qwenTower, error) {
	c := m.Config
	hd := c.HeadDim()
	if hd%4 != 0 {
		return nil, fmt.Errorf("mmproj %s: heads of %d: the 2-D RoPE takes a multiple of 4", m.Path, hd)
	}
	qwen3, qwen25 := c.Projector == vision.Qwen3VL, c.Projector == vision.Qwen25VL
	t := &qwenTower{cfg: c, be: be, acts: map[int]*qwenActs{},
		rope: backend.Rope{Heads: c.Heads, HeadDim: hd, Dim: hd, Theta: 10000, Layout: models.RopeHalves,
			Sections: [4]int{hd / 4, hd / 4, hd / 4, hd / 4}, Axes: backend.VisionRope},
		attn: backend.Attention{Heads: c.Heads, KVHeads: c.Heads, HeadDim: hd, Scale: float32(1 / math.Sqrt(float64(hd))), Bidirectional: true}}
	up := towerUploader(m, be)
	// The convolutions of the two frames, both over the one image: their
	// kernels' sum, as a [Dim, 3·p·p] matrix.
	p := c.PatchSize
	var sum []float32
	for _, name := range []string{vision.PatchEmbd, vision.PatchEmbd1} {
		w, err := m.Tensor(name)
		if err != nil {
			return nil, err
		}
		v, err := w.Float32()
		if err != nil {
			return nil, err
		}
		if sum == nil {
			sum = v
			continue
		}
		for i := range sum {
			sum[i] += v[i]
		}
	}
	raw, err := dtype.Quantize(dtype.F32, sum)
	if err != nil {
		return nil, err
	}
	kernel := models.NewTensor(vision.PatchEmbd, []int{c.Dim, 3 * p * p}, dtype.F32, func() ([]byte, error) { return raw, nil })
	if t.patchW, err = be.UploadAs(kernel, backend.F32); err != nil {
		return nil, fmt.Errorf("upload %s: %w", vision.PatchEmbd, err)
	}
	type named struct {
		dst  *backend.Weight
		name string
	}
	ws := []named{{&t.post.w, vision.PostLN + ".weight"},
		{&t.upW, vision.MergerUp + ".weight"}, {&t.upB, vision.MergerUp + ".bias"},
		{&t.dnW, vision.MergerDown + ".weight"}, {&t.dnB, vision.MergerDown + ".bias"}}
	if !qwen25 { // Qwen2.5-VL's norms are RMSNorms, weights only
		ws = append(ws, named{&t.post.b, vision.PostLN + ".bias"})
	}
	if qwen3 {
		ws = append(ws, named{&t.patchB, vision.PatchBias})
		if t.posTable, err = floats(m, vision.PositionEmbd); err != nil {
			return nil, err
		}
		t.deep = make([]deepMerger, len(c.Deepstack))
		for i, l := range c.Deepstack {
			d := &t.deep[i]
			d.layer = l
			for _, k := range []struct {
				w, b *backend.Weight
				kind string
			}{{&d.norm.w, &d.norm.b, vision.DeepstackNorm}, {&d.fc1W, &d.fc1B, vision.DeepstackFC1}, {&d.fc2W, &d.fc2B, vision.DeepstackFC2}} {
				ws = append(ws, named{k.w, vision.DeepstackTensor(l, k.kind, "weight")}, named{k.b, vision.DeepstackTensor(l, k.kind, "bias")})
			}
		}
	}
	t.layers = make([]vitLayer, c.Layers)
	for l := range t.layers {
		lw := &t.layers[l]
		kinds := []struct {
			w, b *backend.Weight
			kind string
		}{{&lw.wo, &lw.bo, "attn_out"}, {&lw.up, &lw.bUp, "ffn_up"}, {&lw.down, &lw.bDn, "ffn_down"}}
		if qwen25 {
			kinds = append(kinds, struct {
				w, b *backend.Weight
				kind string
			}{&lw.gate, &lw.bGate, "ffn_gate"})
			ws = append(ws, named{&lw.ln1.w, vision.LayerTensor(l, "ln1", "weight")}, named{&lw.ln2.w, vision.LayerTensor(l, "ln2", "weight")})
		} else {
			kinds = append(kinds, []struct {
				w, b *backend.Weight
				kind string
			}{{&lw.ln1.w, &lw.ln1.b, "ln1"}, {&lw.ln2.w, &lw.ln2.b, "ln2"}}...)
		}
		if qwen3 {
			if err := t.splitQKV(m, l, lw); err != nil {
				return nil, err
			}
		} else {
			kinds = append(kinds, []struct {
				w, b *backend.Weight
				kind string
			}{{&lw.wq, &lw.bq, "attn_q"}, {&lw.wk, &lw.bk, "attn_k"}, {&lw.wv, &lw.bv, "attn_v"}}...)
		}
		for _, k := range kinds {
			ws = append(ws, named{k.w, vision.LayerTensor(l, k.kind, "weight")}, named{k.b, vision.LayerTensor(l, k.kind, "bias")})
		}
	}
	for _, w := range ws {
		if err := up(w.dst, w.name); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// floats reads tensor name of m as float32 values.
func floats(m *vision.Model, name string) ([]float32, error) {
	w, err := m.Tensor(name)
	if err != nil {
		return nil, err
	}
	v, err := w.Float32()
	if err != nil {
		return nil, fmt.Errorf("mmproj %s: %s: %w", m.Path, name, err)
	}
	return v, nil
}

// splitQKV uploads Qwen3-VL's fused attn_qkv of layer l ([3·Dim, Dim]:
// q's rows, then k's, then v's, as clip.cpp's views take them) and its
// bias as the separate q, k and v weights the block reads.
func (t *qwenTower) splitQKV(m *vision.Model, l int, lw *vitLayer) error {
	d := t.cfg.Dim
	w, err := floats(m, vision.LayerTensor(l, vision.AttnQKV, "weight"))
	if err != nil {
		return err
	}
	b, err := floats(m, vision.LayerTensor(l, vision.AttnQKV, "bias"))
	if err != nil {
		return err
	}
	for i, dst := range []struct{ w, b *backend.Weight }{{&lw.wq, &lw.bq}, {&lw.wk, &lw.bk}, {&lw.wv, &lw.bv}} {
		name := vision.LayerTensor(l, vision.AttnQKV, "weight")
		if *dst.w, err = uploadF32(t.be, name, w[i*d*d:(i+1)*d*d], d, d); err != nil {
			return err
		}
		if *dst.b, err = uploadF32(t.be, name, b[i*d:(i+1)*d], d); err != nil {
			return err
		}
	}
	return nil
}

// maxPatches is the most patches an image becomes (MaxPixels' worth):
// the rows the tower's backend is opened for.
func qwenMaxPatches(c vision.Config) int {
	return c.MaxPixels / (c.PatchSize * c.PatchSize)
}

// qwenKVBlocks is how many blocks the tower's attention cache has: the
// most patches' worth, and for Qwen2.5-VL's windows, each of which starts
// a block of its own, the blocks windows leave part empty. A window holds
// 4·h·w patches (h × w tokens); with windows a multiple of 4 tokens a
// side only the bottom-right one can end inside a block; otherwise each
// may, and there are at most tokens/side + 1 of them.
func qwenKVBlocks(c vision.Config) int {
	blocks := (qwenMaxPatches(c) + vitBlock - 1) / vitBlock
	if c.Projector != vision.Qwen25VL {
		return blocks
	}
	if g := c.WindowTokens(); g%4 != 0 {
		return blocks + qwenMaxPatches(c)/(c.Merge*c.Merge)/g + 2
	}
	return blocks + 1
}

// qwenActShapes are the shapes (rows, columns) of a Qwen tower's
// activations for rows patches, in actsFor's order: patches, x, xb, xn,
// q, k, v, att, up, then one row a merged token: hid, out.
func qwenActShapes(c vision.Config, rows int) [][2]int {
	p, m := c.PatchSize, c.Merge*c.Merge
	s := [][2]int{{rows, 3 * p * p}, {rows, c.Dim}, {rows, c.Dim}, {rows, c.Dim}, {rows, c.Dim}, {rows, c.Dim},
		{rows, c.Dim}, {rows, c.Dim}, {rows, c.FFN}, {rows / m, m * c.Dim}, {rows / m, c.OutDim}}
	if c.Projector == vision.Qwen25VL { // the gate's half of the feed-forward
		return append(s, [2]int{rows, c.FFN})
	}
	if c.Projector != vision.Qwen3VL {
		return s
	}
	// Qwen3-VL's positions, then each deepstack merger's input and output.
	s = append(s, [2]int{rows, c.Dim})
	for range c.Deepstack {
		s = append(s, [2]int{rows / m, m * c.Dim}, [2]int{rows / m, c.OutDim})
	}
	return s
}

// actsFor returns the activations for an image of n patches.
func (t *qwenTower) actsFor(n int) (*qwenActs, error) {
	rows := max(16, 1<<bits.Len(uint(n-1))) // n rounded up to a power of two
	if a := t.acts[rows]; a != nil {
		return a, nil
	}
	c, be := t.cfg, t.be
	a := &qwenActs{rows: rows}
	m := c.Merge * c.Merge
	dsts := []*backend.Tensor{&a.patches, &a.x, &a.xb, &a.xn, &a.q, &a.k, &a.v, &a.att, &a.up, &a.hid, &a.out}
	if c.Projector == vision.Qwen25VL {
		dsts = append(dsts, &a.gate)
	}
	if c.Projector == vision.Qwen3VL {
		a.dsIn, a.dsOut = make([]backend.Tensor, len(c.Deepstack)), make([]backend.Tensor, len(c.Deepstack))
		dsts = append(dsts, &a.pos)
		for i := range c.Deepstack {
			dsts = append(dsts, &a.dsIn[i], &a.dsOut[i])
		}
	}
	for i, s := range qwenActShapes(c, rows) {
		var err error
		if *dsts[i], err = be.NewTensor(s[0], s[1]); err != nil {
			return nil, err
		}
	}
	var err error
	if a.merged, err = backend.View(be, a.xn, rows/m, m*c.Dim); err != nil {
		return nil, err
	}
	if len(c.Deepstack) > 0 {
		if a.xMerged, err = backend.View(be, a.x, rows/m, m*c.Dim); err != nil {
			return nil, err
		}
	}
	if t.kv == nil {
		if t.kv, t.table, err = towerKV(be, c, qwenKVBlocks(c)); err != nil {
			return nil, err
		}
	}
	t.acts[rows] = a
	return a, nil
}

// encode returns img's embeddings: a row of EmbedWidth values (OutDim,
// then Qwen3-VL's deepstack mergers' OutDim each) for each token of its
// grid (vision.Config.Grid), row by row.
func (t *qwenTower) encode(img *vision.Image) ([]float32, error) {
	be, c := t.be, t.cfg
	planar, w, h := vision.PreprocessSized(img, c)
	patches, pos := vision.MergedPatches(planar, w, h, c)
	n := len(pos) / 4
	m := c.Merge * c.Merge
	// The tokens in the tower's order (Qwen2.5-VL's windows; else as
	// they are), each token's patches on m consecutive rows.
	order, sizes := c.WindowOrder(w/c.PatchSize/c.Merge, h/c.PatchSize/c.Merge)
	if len(sizes) > 1 {
		patches, pos = permuteTokens(patches, order, m*3*c.PatchSize*c.PatchSize), permuteTokens(pos, order, m*4)
	}
	a, err := t.actsFor(n)
	if err != nil {
		return nil, err
	}
	if err := be.Write(a.patches, patches); err != nil {
		return nil, err
	}
	if t.posTable != nil {
		if err := be.Write(a.pos, c.PositionsFor(t.posTable, w, h)); err != nil {
			return nil, err
		}
	}
	// Every patch a row of one sequence, turned by its row and column;
	// for Qwen2.5-VL's windowed layers, each window a sequence of its own
	// (its blocks after the previous window's), so that it attends within
	// itself.
	vit := backend.Batch{BlockSize: vitBlock, Tables: [][]int32{t.table}, RopePos: pos,
		Tokens: make([]int32, n), Pos: make([]int32, n), Seq: make([]int32, n)}
	for i := range vit.Pos {
		vit.Pos[i] = int32(i)
	}
	win := vit
	if len(sizes) > 1 {
		win.Tables, win.Pos, win.Seq = nil, make([]int32, 0, n), make([]int32, 0, n)
		block := 0
		for wi, size := range sizes {
			rows := size * m
			nb := (rows + vitBlock - 1) / vitBlock
			if block+nb > len(t.table) {
				return nil, fmt.Errorf("an image of %d×%d: its windows take more than the tower's %d cache blocks", img.W, img.H, len(t.table))
			}
			win.Tables = append(win.Tables, t.table[block:block+nb])
			block += nb
			for r := range rows {
				win.Pos, win.Seq = append(win.Pos, int32(r)), append(win.Seq, int32(wi))
			}
		}
	}
	full := true
	if err := be.Begin(vit); err != nil {
		return nil, err
	}
	be.MatMul(a.x, a.patches, t.patchW)
	if t.patchB != nil { // Qwen3-VL: the bias, then the learned positions
		be.AddBias(a.x, t.patchB)
		be.Add(a.x, a.pos)
	}
	deep := t.deep
	for il, l := range t.layers {
		if f := c.FullAttention(il); f != full && len(sizes) > 1 {
			b := win
			if f {
				b = vit
			}
			if err := be.Begin(b); err != nil {
				return nil, err
			}
			full = f
		}
		// x += Wo·attend(rope(Wq·h), rope(Wk·h), Wv·h), h = LN1(x).
		t.norm(a.xn, a.x, l.ln1)
		t.linear(a.q, a.xn, l.wq, l.bq)
		t.linear(a.k, a.xn, l.wk, l.bk)
		t.linear(a.v, a.xn, l.wv, l.bv)
		be.Rope(a.q, t.rope)
		be.Rope(a.k, t.rope)
		be.StoreKV(t.kv, 0, a.k, a.v)
		be.Attend(a.att, a.q, t.kv, 0, t.attn)
		t.linear(a.xb, a.att, l.wo, l.bo)
		be.Add(a.x, a.xb)
		// x += W_down·act(W_up·h), h = LN2(x); gated (Qwen2.5-VL):
		// W_down·(act(W_gate·h)·W_up·h).
		t.norm(a.xn, a.x, l.ln2)
		t.linear(a.up, a.xn, l.up, l.bUp)
		hid := a.up
		if l.gate != nil {
			t.linear(a.gate, a.xn, l.gate, l.bGate)
			be.GLU(a.gate, a.up, c.Act)
			hid = a.gate
		} else {
			be.Activate(a.up, c.Act)
		}
		t.linear(a.xb, hid, l.down, l.bDn)
		be.Add(a.x, a.xb)
		if len(deep) > 0 && deep[0].layer == il {
			// A deepstack tap: the layer's output, four patches to a row,
			// normalised now (the rows past the image's tokens are
			// normalised too, and never read).
			i := len(t.deep) - len(deep)
			be.LayerNorm(a.dsIn[i], a.xMerged, deep[0].norm.w, deep[0].norm.b, c.Eps)
			deep = deep[1:]
		}
	}
	t.norm(a.xn, a.x, t.post)
	// The merger: each token's four patches as one row (a.merged views
	// a.xn), through Linear, GELU, Linear.
	tokens := n / (c.Merge * c.Merge)
	merge := backend.Batch{BlockSize: vitBlock, Tables: [][]int32{t.table},
		Tokens: vit.Tokens[:tokens], Pos: vit.Pos[:tokens], Seq: vit.Seq[:tokens]}
	if err := be.Begin(merge); err != nil {
		return nil, err
	}
	t.linear(a.hid, a.merged, t.upW, t.upB)
	be.Activate(a.hid, models.GELUTanh)
	t.linear(a.out, a.hid, t.dnW, t.dnB)
	for i, d := range t.deep { // Qwen3-VL's deepstack mergers, likewise
		t.linear(a.hid, a.dsIn[i], d.fc1W, d.fc1B)
		be.Activate(a.hid, models.GELUTanh)
		t.linear(a.dsOut[i], a.hid, d.fc2W, d.fc2B)
	}
	out, err := be.Read(a.out, tokens)
	if err == nil && len(sizes) > 1 { // back to the image's row order
		raster := make([]float32, len(out))
		for i, tok := range order {
			copy(raster[tok*c.OutDim:(tok+1)*c.OutDim], out[i*c.OutDim:(i+1)*c.OutDim])
		}
		out = raster
	}
	if err != nil || len(t.deep) == 0 {
		return out, err
	}
	// Each deepstack merger's output after the main one's, token by token
	// (clip.cpp concatenates them along the features).
	width := c.EmbedWidth()
	all := make([]float32, tokens*width)
	for r := range tokens {
		copy(all[r*width:], out[r*c.OutDim:(r+1)*c.OutDim])
	}
	for i := range t.deep {
		ds, err := be.Read(a.dsOut[i], tokens)
		if err != nil {
			return nil, err
		}
		for r := range tokens {
			copy(all[r*width+(i+1)*c.OutDim:], ds[r*c.OutDim:(r+1)*c.OutDim])
		}
	}
	return all, nil
}

// norm sets dst to x normalised by n: a LayerNorm, or Qwen2.5-VL's
// RMSNorm (n without a bias).
func (t *qwenTower) norm(dst, x backend.Tensor, n norm) {
	if t.cfg.Projector == vision.Qwen25VL {
		t.be.RMSNorm(dst, x, n.w, t.cfg.Eps)
		return
	}
	t.be.LayerNorm(dst, x, n.w, n.b, t.cfg.Eps)
}

// permuteTokens returns vals, per rows of width values a token, with the
// tokens in order: token i of the result is token order[i] of vals.
func permuteTokens[T any](vals []T, order []int, width int) []T {
	out := make([]T, 0, len(vals))
	for _, tok := range order {
		out = append(out, vals[tok*width:(tok+1)*width]...)
	}
	return out
}

// linear sets dst = x·wᵀ + b.
func (t *qwenTower) linear(dst, x backend.Tensor, w, b backend.Weight) {
	t.be.MatMul(dst, x, w)
	t.be.AddBias(dst, b)
}
