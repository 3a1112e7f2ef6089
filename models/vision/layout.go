package vision

import "fmt"

// Tiling is how Preprocess cuts an image: Cols × Rows tiles, row by row,
// then the overview. The zero Tiling is the overview alone.
type Tiling struct{ Cols, Rows int }

// Tiles is how many pictures the tower encodes for the image: the
// tiling's tiles and the overview.
func (g Tiling) Tiles() int { return g.Cols*g.Rows + 1 }

// TilingOf returns how Preprocess cuts an image of w × h pixels: for
// idefics3, the tiles of ImageSize that cover its refined size (mtmd's
// idefics3 preprocessor); for gemma3 none.
func (c Config) TilingOf(w, h int) Tiling {
	if c.Projector != Idefics3 || c.LongestEdge <= 0 || w <= 0 || h <= 0 {
		return Tiling{}
	}
	rw, rh := c.refined(w, h)
	return Tiling{rw / c.ImageSize, rh / c.ImageSize}
}

// refined is img_tool::calc_size_preserved_ratio, the size idefics3 tiles:
// the image scaled (up or down) so that its longer side is LongestEdge,
// each side then rounded up to a multiple of ImageSize, in float32 as
// llama.cpp computes it. A side ends at most LongestEdge rounded up, so
// the grid is bounded by the config's check.
func (c Config) refined(w, h int) (int, int) {
	l := float32(c.LongestEdge)
	scale := min(l/float32(w), l/float32(h))
	align := float32(c.ImageSize)
	up := func(v float32) int { return int(ceil32(v/align)) * c.ImageSize }
	return up(float32(w) * scale), up(float32(h) * scale)
}

// Part is a piece of an image's place in a prompt, as mtmd_tokenize lays
// it out: text tokenized on its own with its special tokens (Text), one
// token looked up by its text (Text with Lookup: mtmd's lookup_token, the
// vocabulary's first token that reads so), or the embeddings of tile Tile
// of Preprocess's pictures (Text empty).
type Part struct {
	Text   string
	Lookup bool
	Tile   int
}

// Layout returns the parts that stand for an image cut as g, in order.
//
// gemma3: <start_of_image>, the image, <end_of_image>; qwen2vl_merger
// and qwen3vl_merger likewise between <|vision_start|> and
// <|vision_end|>.
//
// idefics3 (transformers' Idefics3Processor, as mtmd writes it): each
// tile after "<fake_token_around_image><row_R_col_C>" (1-based), a "\n"
// token after each row but the last, then the tokens "\n\n",
// <fake_token_around_image> and <global-img>, the overview, and
// <fake_token_around_image>.
func Layout(p Projector, g Tiling) []Part {
	switch p {
	case Gemma3:
		return []Part{{Text: "<start_of_image>"}, {Tile: 0}, {Text: "<end_of_image>"}}
	case Qwen2VL, Qwen3VL:
		return []Part{{Text: "<|vision_start|>"}, {Tile: 0}, {Text: "<|vision_end|>"}}
	case Idefics3:
	default:
		return []Part{{Tile: 0}}
	}
	const around = "<fake_token_around_image>"
	var parts []Part
	for y := range g.Rows {
		for x := range g.Cols {
			parts = append(parts, Part{Text: fmt.Sprintf("%s<row_%d_col_%d>", around, y+1, x+1)}, Part{Tile: y*g.Cols + x})
		}
		if y != g.Rows-1 {
			parts = append(parts, Part{Text: "\n", Lookup: true})
		}
	}
	return append(parts, Part{Text: "\n\n", Lookup: true}, Part{Text: around, Lookup: true}, Part{Text: "<global-img>", Lookup: true},
		Part{Tile: g.Cols * g.Rows}, Part{Text: around, Lookup: true})
}

// MarkerTokens lists the texts that Layout looks up as single tokens for
// p (the tokens a language model must have to take p's images), each
// once.
func MarkerTokens(p Projector) []string {
	if p != Idefics3 {
		return nil
	}
	return []string{"\n", "\n\n", "<fake_token_around_image>", "<global-img>"}
}
