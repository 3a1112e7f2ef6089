package vision

import (
	"errors"
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/models/tensor"
)

// Gemma4V is Gemma 4's vision encoder (llama.cpp's clip_graph_gemma4v):
// a ViT over the image at its own aspect, like Qwen-VL's (Size), whose
// patches (no bias) get learned positions from two tables, one looked up
// by the patch's column and one by its row; pre- and post-norm blocks of
// RMSNorms, q and k normalised per head and turned by a 2-D RoPE (the
// first half of each head by the column, the second by the row, each
// half in NeoX order, base 100), v normalised per head without a weight,
// unscaled scores, a gated feed-forward, each layer's output times a
// scalar; then a Merge × Merge average pool times √Dim, optionally
// standardised (v.std_bias, v.std_scale), an RMSNorm without a weight and
// the projection into the language model. Images sit between <|image>
// and <image|> and attend to each other both ways in the language model.
const Gemma4V Projector = "gemma4v"

// Gemma 4's tensors beyond the ViT's (llama.cpp's clip-impl.h names).
const (
	StdBias  = "v.std_bias"  // [Dim]: pooled tokens (x − bias)·scale
	StdScale = "v.std_scale" // [Dim]
	// Gemma4Proj is the projection, [OutDim, Dim] (Gemma 3's InputProj is
	// stored the other way round).
	Gemma4Proj = InputProj
)

// Gemma4ClampSuffixes are the scalars that Gemma 4's clippable linears
// may carry beside a weight ("v.blk.0.attn_q.input_min"): llama.cpp
// clamps the product's input and output to them. The published towers
// store them infinite (use_clipped_linears false), which clamps nothing;
// Tessera reads files whose scalars are so and refuses finite ones.
var Gemma4ClampSuffixes = []string{"input_min", "input_max", "output_min", "output_max"}

// gemma4Linears are the kinds of a block's products (the clippable ones).
var gemma4Linears = []string{"attn_q", "attn_k", "attn_v", "attn_out", "ffn_gate", "ffn_up", "ffn_down"}

// gemma4MinTokens and gemma4MaxTokens bound an image's tokens, as
// llama.cpp sets its pixel limits for Gemma 4 (it raises the least to 40:
// the model does poorly on smaller images).
const (
	gemma4MinTokens = 40
	gemma4MaxTokens = 280
	gemma4Merge     = 3   // llama.cpp's default pooling kernel
	gemma4RopeTheta = 100 // the 2-D RoPE's base (hard-coded in llama.cpp)
	maxPositions    = 1 << 16
)

// RopeTheta is the base of a dynamic tower's 2-D RoPE.
func (c Config) RopeTheta() float64 {
	if c.Projector == Gemma4V {
		return gemma4RopeTheta
	}
	return 10000
}

// gemma4GGUF reads what Gemma 4's file says beyond the ViT's keys: the
// pooling kernel (clip.vision.projector.scale_factor, 3 without it), the
// feed-forward's activation (as clip.cpp: tanh GELU with clip.use_gelu,
// else quick GELU, gating the up projection either way), the token
// limits, the position tables' length and the projection's width (from
// their tensors), whether the pooled tokens are standardised, and that
// no clippable linear clamps.
func gemma4GGUF(m *Model) error {
	c := &m.Config
	c.Act = tensor.GELUQuick
	if m.useGELU {
		c.Act = tensor.GELUTanh
	}
	area := (c.PatchSize * c.Merge) * (c.PatchSize * c.Merge)
	c.MinPixels, c.MaxPixels = gemma4MinTokens*area, gemma4MaxTokens*area
	t, ok := m.Tensors[PositionEmbd]
	if !ok || len(t.Shape) != 3 || t.Shape[0] != 2 || t.Shape[2] != c.Dim || t.Shape[1] <= 0 || t.Shape[1] > maxPositions {
		return fmt.Errorf("%s must be [2, positions, %d] with at most %d positions", PositionEmbd, c.Dim, maxPositions)
	}
	c.Positions = t.Shape[1]
	_, bias := m.Tensors[StdBias]
	_, scale := m.Tensors[StdScale]
	if bias != scale {
		return fmt.Errorf("%s and %s come together (one is missing)", StdBias, StdScale)
	}
	c.Standardize = bias
	t, ok = m.Tensors[Gemma4Proj]
	if !ok || len(t.Shape) != 2 || t.Shape[1] != c.Dim {
		return fmt.Errorf("%s must be [out, %d]", Gemma4Proj, c.Dim)
	}
	c.OutDim = t.Shape[0]
	// Tensors that llama.cpp's ViT would use if present but Gemma 4's
	// tower has none of: refused rather than ignored.
	for _, name := range []string{PatchBias, PostLN + ".weight", "v.pre_ln.weight", LayerTensor(0, "attn_q", "bias"),
		LayerTensor(0, "ls1", "weight"), LayerTensor(0, "ffn_up", "bias"), "v.blk.0.attn_qkv.weight"} {
		if _, ok := m.Tensors[name]; ok {
			return fmt.Errorf("%w: tensor %s in a %s file", ErrUnsupported, name, c.Projector)
		}
	}
	var errs []error
	for l := range c.Layers {
		for _, kind := range gemma4Linears {
			for _, s := range Gemma4ClampSuffixes {
				name := LayerTensor(l, kind, s)
				t, ok := m.Tensors[name]
				if !ok {
					continue
				}
				c.Clipped = true
				v, err := t.Float32()
				if err != nil || len(v) != 1 {
					errs = append(errs, fmt.Errorf("%s: want one value: %v", name, err))
				} else if !math.IsInf(float64(v[0]), 0) && math.Abs(float64(v[0])) < math.MaxFloat32 {
					errs = append(errs, fmt.Errorf("%w: %s is %g: clipped linears (use_clipped_linears) are not read", ErrUnsupported, name, v[0]))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// gemma4Shapes lists the tensors of a Gemma 4 tower, in synth's order.
func (c Config) gemma4Shapes() []Want {
	p, d, hd := c.PatchSize, c.Dim, c.HeadDim()
	w := []Want{{PatchEmbd, []int{d, 3, p, p}}, {PositionEmbd, []int{2, c.Positions, d}}}
	for l := range c.Layers {
		for _, k := range []struct {
			kind    string
			out, in int
		}{{"attn_q", d, d}, {"attn_k", d, d}, {"attn_v", d, d}, {"attn_out", d, d},
			{"ffn_gate", c.FFN, d}, {"ffn_up", c.FFN, d}, {"ffn_down", d, c.FFN}} {
			w = append(w, Want{LayerTensor(l, k.kind, "weight"), []int{k.out, k.in}})
			if c.Clipped {
				for _, s := range Gemma4ClampSuffixes {
					w = append(w, Want{LayerTensor(l, k.kind, s), []int{1}})
				}
			}
		}
		w = append(w, Want{LayerTensor(l, "attn_q_norm", "weight"), []int{hd}}, Want{LayerTensor(l, "attn_k_norm", "weight"), []int{hd}})
		for _, k := range []string{"ln1", "ln2", "attn_post_norm", "ffn_post_norm"} {
			w = append(w, Want{LayerTensor(l, k, "weight"), []int{d}})
		}
		w = append(w, Want{LayerTensor(l, "out_scale", "weight"), []int{1}})
	}
	if c.Standardize {
		w = append(w, Want{StdBias, []int{d}}, Want{StdScale, []int{d}})
	}
	return append(w, Want{Gemma4Proj, []int{c.OutDim, d}})
}

// Gemma4Patches lays a preprocessed image of w × h (planar) out as the
// rows of the patch embedding's product, in raster order, each value
// v·2 − 1 (Gemma 4's tower takes its pixels in −1..1: clip_graph_gemma4v
// scales them so after the normalisation), and gives each row's column
// and row.
func Gemma4Patches(planar []float32, w, h int, c Config) (rows []float32, cols, ys []int32) {
	p := c.PatchSize
	nx, ny := w/p, h/p
	rows = make([]float32, 0, nx*ny*3*p*p)
	for py := range ny {
		for px := range nx {
			for ch := range 3 {
				plane := planar[ch*w*h:]
				for ky := range p {
					at := (py*p+ky)*w + px*p
					for _, v := range plane[at : at+p] {
						rows = append(rows, float32(v*2)-1)
					}
				}
			}
			cols, ys = append(cols, int32(px)), append(ys, int32(py))
		}
	}
	return rows, cols, ys
}
