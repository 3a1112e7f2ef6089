package vision

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/tensor"
)

// Qwen2VL is Qwen2-VL's projector (llama.cpp's qwen2vl_merger): a ViT
// over the image at its own aspect (dynamic resolution), its patches
// embedded by two convolutions (the two frames of a still image), turned
// by a 2-D RoPE (row and column), quick-GELU feed-forwards, and a merger
// that concatenates each 2×2 block of patches and projects it through a
// two-layer GELU MLP into the language model. The language model places
// the tokens by M-RoPE (runtime/images.go).
const Qwen2VL Projector = "qwen2vl_merger"

// Qwen-VL's tensors beyond the ViT's.
const (
	PatchEmbd1 = PatchEmbd + ".1" // the convolution of the second frame
	MergerUp   = "mm.0"           // [4·Dim, 4·Dim], .weight and .bias
	MergerDown = "mm.2"           // [OutDim, 4·Dim]
)

// qwenMinTokens and qwenMaxTokens bound an image's tokens, as llama.cpp
// sets its pixel limits for Qwen-VL (after Qwen2.5-VL's preprocessor).
const (
	qwenMinTokens = 8
	qwenMaxTokens = 4096
)

// Dynamic reports whether the tower takes each image at its own aspect
// (Qwen-VL), not resized to one square.
func (c Config) Dynamic() bool { return c.Projector == Qwen2VL || c.Projector == Qwen3VL }

// Size is the width and height an image of w × h pixels is resized to
// before its patches are taken: the tower's square, or for a dynamic
// tower llama.cpp's smart resize: each side rounded to a multiple of
// PatchSize·Merge, then both scaled (keeping the aspect) into
// MinPixels..MaxPixels, in float32 as mtmd-image.cpp computes it.
func (c Config) Size(w, h int) (int, int) {
	if !c.Dynamic() {
		return c.ImageSize, c.ImageSize
	}
	f := c.PatchSize * c.Merge
	ff := float32(f)
	round := func(x float32) int { return int(math.Round(float64(x/ff))) * f }
	ceil := func(x float32) int { return int(math.Ceil(float64(x/ff))) * f }
	floor := func(x float32) int { return int(math.Floor(float64(x/ff))) * f }
	hb, wb := max(f, round(float32(h))), max(f, round(float32(w)))
	if hb*wb > c.MaxPixels {
		beta := float32(math.Sqrt(float64(float32(h*w) / float32(c.MaxPixels))))
		hb, wb = max(f, floor(float32(h)/beta)), max(f, floor(float32(w)/beta))
	} else if hb*wb < c.MinPixels {
		beta := float32(math.Sqrt(float64(float32(c.MinPixels) / float32(h*w))))
		hb, wb = ceil(float32(h)*beta), ceil(float32(w)*beta)
	}
	return wb, hb
}

// Grid is how many tokens across and down an image of w × h pixels
// becomes: its patches, Merge × Merge to a token.
func (c Config) Grid(w, h int) (nx, ny int) {
	sw, sh := c.Size(w, h)
	return sw / c.PatchSize / c.Merge, sh / c.PatchSize / c.Merge
}

// PreprocessSized is Preprocess for any tower: img resized to c.Size
// (bilinear, scaled to fit and centred on black as clip.cpp's resize with
// PAD_CEIL does), normalised, planar; with the size it has.
func PreprocessSized(img *Image, c Config) (planar []float32, w, h int) {
	w, h = c.Size(img.W, img.H)
	return normalize(resizePadded(img, w, h, resizeBilinear), c), w, h
}

// MergedPatches lays a preprocessed image of w × h (planar) out as the
// rows of the patch embedding's product, as Patches does, but in the
// order of Qwen-VL's merger: each Merge × Merge block of patches on
// consecutive rows (blocks in row-major order, patches within a block
// likewise), so that a token's patches are Merge² consecutive rows. pos
// gets each row's patch row and column (the 2-D RoPE's positions, as
// llama.cpp's: y, x, y, x).
func MergedPatches(planar []float32, w, h int, c Config) (rows []float32, pos []int32) {
	p, k := c.PatchSize, c.Merge
	nx, ny := w/p, h/p
	rows = make([]float32, 0, nx*ny*3*p*p)
	pos = make([]int32, 0, 4*nx*ny)
	for by := 0; by < ny; by += k {
		for bx := 0; bx < nx; bx += k {
			for dy := range k {
				for dx := range k {
					px, py := bx+dx, by+dy
					for ch := range 3 {
						plane := planar[ch*w*h:]
						for ky := range p {
							at := (py*p+ky)*w + px*p
							rows = append(rows, plane[at:at+p]...)
						}
					}
					pos = append(pos, int32(py), int32(px), int32(py), int32(px))
				}
			}
		}
	}
	return rows, pos
}

// qwenGGUF reads what Qwen-VL's file says beyond the ViT's keys: the
// merge (clip.vision.spatial_merge_size, 2), the feed-forward's
// activation (quick GELU without clip.use_gelu; Qwen2.5-VL's gated SiLU,
// clip.use_silu, is not read), the token limits, and the widths its
// tensors give: the feed-forward's (the converter writes the language
// model's width as feed_forward_length) and the projection's.
func qwenGGUF(m *Model, f *gguf.File) error {
	c := &m.Config
	c.Merge = 2
	if v, ok := f.Uint("clip.vision.spatial_merge_size"); ok && v != 2 {
		return fmt.Errorf("clip.vision.spatial_merge_size %d: llama.cpp's Qwen-VL merger takes 2", v)
	}
	if silu, _ := f.Bool("clip.use_silu"); silu {
		return fmt.Errorf("%w: clip.use_silu (Qwen2.5-VL's gated feed-forward) in a %s file", ErrUnsupported, c.Projector)
	}
	c.Act = tensor.GELUQuick
	if gelu, _ := f.Bool("clip.use_gelu"); gelu {
		c.Act = tensor.GELUTanh
	}
	area := (c.PatchSize * c.Merge) * (c.PatchSize * c.Merge)
	c.MinPixels, c.MaxPixels = qwenMinTokens*area, qwenMaxTokens*area
	// llama.cpp swaps Qwen2-VL's ffn_up and ffn_down where a file stored
	// them the other way round (ffn_down's input as wide as the tower);
	// Qwen3-VL's converter writes them right, and clip.cpp leaves them.
	up, down := LayerTensor(0, "ffn_up", "weight"), LayerTensor(0, "ffn_down", "weight")
	if t, ok := m.Tensors[down]; ok && c.Projector == Qwen2VL && len(t.Shape) == 2 && t.Shape[1] == c.Dim && t.Shape[0] != c.Dim {
		for l := range c.Layers {
			for _, s := range []string{"weight", "bias"} {
				u, d := LayerTensor(l, "ffn_up", s), LayerTensor(l, "ffn_down", s)
				m.Tensors[u], m.Tensors[d] = m.Tensors[d], m.Tensors[u]
			}
		}
	}
	t, ok := m.Tensors[up]
	if !ok || len(t.Shape) != 2 || t.Shape[1] != c.Dim || (c.Projector == Qwen2VL && t.Shape[0] == c.Dim) || t.Shape[0] <= 0 || t.Shape[0] > 4*maxDim {
		return fmt.Errorf("%s must be [ffn, %d] (for %s with ffn ≠ %d), ffn at most %d", up, c.Dim, Qwen2VL, c.Dim, 4*maxDim)
	}
	c.FFN = t.Shape[0]
	t, ok = m.Tensors[MergerDown+".weight"]
	if !ok || len(t.Shape) != 2 || t.Shape[1] != 4*c.Dim {
		return fmt.Errorf("%s.weight must be [out, %d]", MergerDown, 4*c.Dim)
	}
	c.OutDim = t.Shape[0]
	return nil
}

// qwenShapes lists the tensors of a Qwen2-VL tower, in synth's order.
func (c Config) qwenShapes() []Want {
	p := c.PatchSize
	w := []Want{{PatchEmbd, []int{c.Dim, 3, p, p}}, {PatchEmbd1, []int{c.Dim, 3, p, p}}}
	w = append(w, c.blockShapes()...)
	m := c.Merge * c.Merge * c.Dim
	return append(w, Want{PostLN + ".weight", []int{c.Dim}}, Want{PostLN + ".bias", []int{c.Dim}},
		Want{MergerUp + ".weight", []int{m, m}}, Want{MergerUp + ".bias", []int{m}},
		Want{MergerDown + ".weight", []int{c.OutDim, m}}, Want{MergerDown + ".bias", []int{c.OutDim}})
}
