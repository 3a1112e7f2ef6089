package vision

import (
	"fmt"
	"math"
)

// Qwen3VL is Qwen3-VL's projector (llama.cpp's qwen3vl_merger): Qwen2-VL's
// dynamic-resolution tower (two frames' convolutions, 2-D RoPE, the 2×2
// merger) with a patch bias, learned absolute positions resized to each
// image (PositionsFor), q, k and v as one fused projection, tanh-GELU
// feed-forwards, and "deepstack": after each layer listed in Deepstack,
// the hidden state merged 2×2 goes through a LayerNorm and a GELU MLP of
// its own, and those outputs are concatenated after the merger's, so
// that every image token is OutDim·(1+len(Deepstack)) values wide
// (EmbedWidth). The language model (qwen3vl) takes the first OutDim as
// the token's embedding and adds slice k+1 to the hidden state after its
// layer k (runtime/images.go).
const Qwen3VL Projector = "qwen3vl_merger"

// Qwen3-VL's tensors beyond Qwen2-VL's: the fused attention projection of
// a block (LayerTensor(l, AttnQKV, ...)), [3·Dim, Dim] q's rows then k's
// then v's, and each deepstack merger's (DeepstackTensor).
const (
	AttnQKV       = "attn_qkv"
	DeepstackNorm = "norm" // LayerNorm over 4·Dim, .weight and .bias
	DeepstackFC1  = "fc1"  // [4·Dim, 4·Dim]
	DeepstackFC2  = "fc2"  // [OutDim, 4·Dim]
)

// DeepstackTensor names a tensor of the deepstack merger fed by tower
// layer l (kind DeepstackNorm, DeepstackFC1 or DeepstackFC2), as
// clip-impl.h's TN_DEEPSTACK_* spell it.
func DeepstackTensor(l int, kind, suffix string) string {
	return fmt.Sprintf("v.deepstack.%d.%s.%s", l, kind, suffix)
}

// EmbedWidth is how many values an image token has: OutDim, and for
// Qwen3-VL OutDim more for each deepstack merger (clip.cpp's
// n_mmproj_embd, which the language model's input width must equal).
func (c Config) EmbedWidth() int { return c.OutDim * (1 + len(c.Deepstack)) }

// qwen3GGUF reads what Qwen3-VL's file adds to qwenGGUF's: the deepstack
// layers (those with a v.deepstack.L.fc1.weight, as clip.cpp finds them),
// and checks the fused projection's and the merger's shapes (the rest
// TensorShapes checks).
func qwen3GGUF(m *Model) error {
	c := &m.Config
	c.Deepstack = nil
	for l := range c.Layers {
		if _, ok := m.Tensors[DeepstackTensor(l, DeepstackFC1, "weight")]; ok {
			c.Deepstack = append(c.Deepstack, l)
		}
	}
	t, ok := m.Tensors[PositionEmbd]
	if !ok || len(t.Shape) != 2 || t.Shape[1] != c.Dim {
		return fmt.Errorf("%s must be [n², %d]", PositionEmbd, c.Dim)
	}
	if n := c.Patches(); t.Shape[0] != n*n {
		// clip.cpp takes the table's side as the square root of its rows;
		// the converter writes image_size from it, so they agree.
		return fmt.Errorf("%s has %d rows, want %d (image size %d / patch %d, squared)", PositionEmbd, t.Shape[0], n*n, c.ImageSize, c.PatchSize)
	}
	return nil
}

// qwen3Shapes lists the tensors of a Qwen3-VL tower, in synth's order.
func (c Config) qwen3Shapes() []Want {
	p, n, d := c.PatchSize, c.Patches(), c.Dim
	w := []Want{{PatchEmbd, []int{d, 3, p, p}}, {PatchEmbd1, []int{d, 3, p, p}}, {PatchBias, []int{d}},
		{PositionEmbd, []int{n * n, d}}}
	for l := range c.Layers {
		for _, k := range []struct {
			kind    string
			out, in int
		}{{AttnQKV, 3 * d, d}, {"attn_out", d, d}, {"ffn_up", c.FFN, d}, {"ffn_down", d, c.FFN}} {
			w = append(w, Want{LayerTensor(l, k.kind, "weight"), []int{k.out, k.in}}, Want{LayerTensor(l, k.kind, "bias"), []int{k.out}})
		}
		for _, k := range []string{"ln1", "ln2"} {
			w = append(w, Want{LayerTensor(l, k, "weight"), []int{d}}, Want{LayerTensor(l, k, "bias"), []int{d}})
		}
	}
	m := c.Merge * c.Merge * d
	for _, l := range c.Deepstack {
		w = append(w, Want{DeepstackTensor(l, DeepstackNorm, "weight"), []int{m}}, Want{DeepstackTensor(l, DeepstackNorm, "bias"), []int{m}},
			Want{DeepstackTensor(l, DeepstackFC1, "weight"), []int{m, m}}, Want{DeepstackTensor(l, DeepstackFC1, "bias"), []int{m}},
			Want{DeepstackTensor(l, DeepstackFC2, "weight"), []int{c.OutDim, m}}, Want{DeepstackTensor(l, DeepstackFC2, "bias"), []int{c.OutDim}})
	}
	return append(w, Want{PostLN + ".weight", []int{d}}, Want{PostLN + ".bias", []int{d}},
		Want{MergerUp + ".weight", []int{m, m}}, Want{MergerUp + ".bias", []int{m}},
		Want{MergerDown + ".weight", []int{c.OutDim, m}}, Want{MergerDown + ".bias", []int{c.OutDim}})
}

// PositionsFor returns Qwen3-VL's learned position embeddings for an
// image of w × h pixels (a size Size gives), one row of Dim a patch in
// MergedPatches' order: the table (Patches() a side, row-major, Dim
// values a patch) resized to the image's patches by bilinear
// interpolation with aligned corners (the first and last patches take
// the table's first and last rows exactly, as transformers' Qwen3-VL
// interpolates over a linspace), in float32 as ggml's upscale computes
// it in llama.cpp (ggml_interpolate, GGML_SCALE_MODE_BILINEAR |
// GGML_SCALE_FLAG_ALIGN_CORNERS: what its tools give, checked in
// runtime's TestVisionMatchesLlamaCpp; a table already the image's size
// is taken as it is).
func (c Config) PositionsFor(table []float32, w, h int) []float32 {
	n, d := c.Patches(), c.Dim
	pw, ph := w/c.PatchSize, h/c.PatchSize
	grid := table // row-major over (y, x), d values each
	if pw != n || ph != n {
		grid = make([]float32, pw*ph*d)
		xs := alignedTaps(n, pw)
		ys := alignedTaps(n, ph)
		for oy, ty := range ys {
			for ox, tx := range xs {
				dst := grid[(oy*pw+ox)*d : (oy*pw+ox+1)*d]
				a, b := table[(ty.i0*n+tx.i0)*d:], table[(ty.i0*n+tx.i1)*d:]
				cc, dd := table[(ty.i1*n+tx.i0)*d:], table[(ty.i1*n+tx.i1)*d:]
				// a·(1−dx)·(1−dy) + b·dx·(1−dy) + c·(1−dx)·dy + d·dx·dy, each
				// product rounded (no fused multiply-add on arm64).
				ex, ey := 1-tx.f, 1-ty.f
				for ch := range dst {
					v := float32(float32(a[ch]*ex) * ey)
					v += float32(float32(b[ch]*tx.f) * ey)
					v += float32(float32(cc[ch]*ex) * ty.f)
					v += float32(float32(dd[ch]*tx.f) * ty.f)
					dst[ch] = v
				}
			}
		}
	}
	// Reorder into the merger's order: each Merge×Merge block's patches
	// on consecutive rows, blocks row by row.
	k := c.Merge
	out := make([]float32, 0, pw*ph*d)
	for by := 0; by < ph; by += k {
		for bx := 0; bx < pw; bx += k {
			for dy := range k {
				for dx := range k {
					at := ((by+dy)*pw + bx + dx) * d
					out = append(out, grid[at:at+d]...)
				}
			}
		}
	}
	return out
}

// tap is where ggml's bilinear upscale reads an output position along
// an axis: between sources i0 and i1, f of the way to i1.
type tap struct {
	i0, i1 int
	f      float32
}

// alignedTaps gives the taps of each of out positions along an axis of in
// sources, with aligned corners, in float32 as ggml's ops.cpp computes
// them (scale (out−1)/(in−1), pixel offset 0; the plain scale where
// either side is one).
func alignedTaps(in, out int) []tap {
	sf := float32(out) / float32(in)
	if out > 1 && in > 1 {
		sf = float32(out-1) / float32(in-1)
	}
	taps := make([]tap, out)
	for o := range taps {
		x := float32(o) / sf
		i0 := int(math.Floor(float64(x)))
		t := tap{i0: max(0, min(i0, in-1)), i1: max(0, min(i0+1, in-1))}
		t.f = max(0, min(x-float32(t.i0), 1))
		taps[o] = t
	}
	return taps
}
