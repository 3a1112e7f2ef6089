package vision

import "fmt"

// Qwen25VL is Qwen2.5-VL's projector (llama.cpp's qwen2.5vl_merger):
// Qwen2-VL's dynamic-resolution tower with RMSNorms (weights only), a
// gated SiLU feed-forward (ffn_gate beside ffn_up), and window
// attention: the image's tokens are grouped into windows of Window
// pixels a side (WindowTokens() tokens), the patches go through the
// tower window by window, and every block attends within its window
// except every WindowEvery-th, which attends over the whole image; the
// merger's tokens come back in the image's row order.
const Qwen25VL Projector = "qwen2.5vl_merger"

// qwen25Window is llama.cpp's window for Qwen2.5-VL (its
// attn_window_size default; the converter writes no key): 112 pixels, 4
// tokens of 28 a side.
const qwen25Window = 112

// WindowTokens is how many tokens a side one attention window of a
// Qwen2.5-VL tower holds (clip.cpp's grid_window).
func (c Config) WindowTokens() int { return c.Window / c.PatchSize / c.Merge }

// FullAttention reports whether tower layer l attends over the whole
// image: every layer but Qwen2.5-VL's windowed ones (those l with
// (l+1) % WindowEvery ≠ 0).
func (c Config) FullAttention(l int) bool {
	return c.Projector != Qwen25VL || (l+1)%c.WindowEvery == 0
}

// WindowOrder returns the image's tokens (nx × ny, row-major indices)
// in the order the tower takes them: windows of WindowTokens() a side
// row by row, tokens row by row within each (a window at the right or
// bottom edge is smaller), and sizes[w] the tokens of window w, as
// clip.cpp's window_idx places them. For a tower without windows it is
// the identity, one window.
func (c Config) WindowOrder(nx, ny int) (order, sizes []int) {
	if c.Projector != Qwen25VL {
		order = make([]int, nx*ny)
		for i := range order {
			order[i] = i
		}
		return order, []int{nx * ny}
	}
	g := c.WindowTokens()
	for y := 0; y < ny; y += g {
		for x := 0; x < nx; x += g {
			h, w := min(g, ny-y), min(g, nx-x)
			for dy := range h {
				for dx := range w {
					order = append(order, (y+dy)*nx+x+dx)
				}
			}
			sizes = append(sizes, h*w)
		}
	}
	return order, sizes
}

// qwen25GGUF reads Qwen2.5-VL's window pattern (clip.vision.n_wa_pattern,
// which llama.cpp requires for it) and window.
func qwen25GGUF(m *Model, every uint64, ok bool) error {
	c := &m.Config
	if !ok || every == 0 || every > uint64(c.Layers) {
		return fmt.Errorf("clip.vision.n_wa_pattern = %d (present %v): want 1..%d layers", every, ok, c.Layers)
	}
	c.WindowEvery, c.Window = int(every), qwen25Window
	if c.WindowTokens() <= 0 {
		return fmt.Errorf("attention window of %d pixels for patches of %d merged %d×%d", c.Window, c.PatchSize, c.Merge, c.Merge)
	}
	return nil
}

// qwen25Shapes lists the tensors of a Qwen2.5-VL tower, in synth's order.
func (c Config) qwen25Shapes() []Want {
	p, d := c.PatchSize, c.Dim
	w := []Want{{PatchEmbd, []int{d, 3, p, p}}, {PatchEmbd1, []int{d, 3, p, p}}}
	for l := range c.Layers {
		for _, k := range []struct {
			kind    string
			out, in int
		}{{"attn_q", d, d}, {"attn_k", d, d}, {"attn_v", d, d}, {"attn_out", d, d},
			{"ffn_up", c.FFN, d}, {"ffn_gate", c.FFN, d}, {"ffn_down", d, c.FFN}} {
			w = append(w, Want{LayerTensor(l, k.kind, "weight"), []int{k.out, k.in}}, Want{LayerTensor(l, k.kind, "bias"), []int{k.out}})
		}
		w = append(w, Want{LayerTensor(l, "ln1", "weight"), []int{d}}, Want{LayerTensor(l, "ln2", "weight"), []int{d}})
	}
	m := c.Merge * c.Merge * d
	return append(w, Want{PostLN + ".weight", []int{d}},
		Want{MergerUp + ".weight", []int{m, m}}, Want{MergerUp + ".bias", []int{m}},
		Want{MergerDown + ".weight", []int{c.OutDim, m}}, Want{MergerDown + ".bias", []int{c.OutDim}})
}
