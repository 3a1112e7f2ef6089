package vision

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

var tinyIdefics3 = Config{Projector: Idefics3, ImageSize: 32, PatchSize: 4, Merge: 2, LongestEdge: 64,
	Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}}

// TestTilingOf: idefics3 resizes the longer side to LongestEdge (up or
// down), rounds both sides up to whole tiles and cuts them; without a
// preprocessing size, or for gemma3, there are no tiles.
func TestTilingOf(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		w, h int
		want Tiling
	}{
		{tinyIdefics3, 32, 32, Tiling{2, 2}},   // upscaled to 64 × 64
		{tinyIdefics3, 50, 37, Tiling{2, 2}},   // 64 × 47.4 → 64 × 64
		{tinyIdefics3, 70, 20, Tiling{2, 1}},   // 64 × 18.3 → 64 × 32
		{tinyIdefics3, 20, 70, Tiling{1, 2}},   // portrait
		{tinyIdefics3, 6400, 10, Tiling{2, 1}}, // a sliver keeps one row
		{tinyIdefics3, 1, 1, Tiling{2, 2}},     // a pixel, upscaled
		{Config{Projector: Idefics3, ImageSize: 512, LongestEdge: 2048}, 400, 100, Tiling{4, 1}},
		// 3000 · (2048/4000 in float32, 0.51200002) is 1536.0001: a fourth
		// row of tiles, as llama.cpp computes it in float32 too.
		{Config{Projector: Idefics3, ImageSize: 512, LongestEdge: 2048}, 4000, 3000, Tiling{4, 4}},
		{Config{Projector: Idefics3, ImageSize: 512, LongestEdge: 2048}, 4096, 3072, Tiling{4, 3}},
		{Config{Projector: Idefics3, ImageSize: 32}, 50, 37, Tiling{}}, // no preproc_image_size
		{Config{Projector: Gemma3, ImageSize: 32, LongestEdge: 64}, 50, 37, Tiling{}},
	} {
		if got := tc.c.TilingOf(tc.w, tc.h); got != tc.want {
			t.Errorf("%s, %d × %d: %v, want %v", tc.c.Projector, tc.w, tc.h, got, tc.want)
		}
	}
}

// TestLayout: the parts mtmd_tokenize writes for an image, in order.
func TestLayout(t *testing.T) {
	show := func(parts []Part) []string {
		var s []string
		for _, p := range parts {
			switch {
			case p.Text == "":
				s = append(s, fmt.Sprintf("tile %d", p.Tile))
			case p.Lookup:
				s = append(s, fmt.Sprintf("[%q]", p.Text))
			default:
				s = append(s, p.Text)
			}
		}
		return s
	}
	got := show(Layout(Idefics3, Tiling{2, 2}))
	want := []string{"<fake_token_around_image><row_1_col_1>", "tile 0", "<fake_token_around_image><row_1_col_2>", "tile 1", `["\n"]`,
		"<fake_token_around_image><row_2_col_1>", "tile 2", "<fake_token_around_image><row_2_col_2>", "tile 3",
		`["\n\n"]`, `["<fake_token_around_image>"]`, `["<global-img>"]`, "tile 4", `["<fake_token_around_image>"]`}
	if !slices.Equal(got, want) {
		t.Errorf("idefics3 2×2:\n%q\nwant\n%q", got, want)
	}
	got = show(Layout(Idefics3, Tiling{}))
	want = []string{`["\n\n"]`, `["<fake_token_around_image>"]`, `["<global-img>"]`, "tile 0", `["<fake_token_around_image>"]`}
	if !slices.Equal(got, want) {
		t.Errorf("idefics3, the overview alone: %q, want %q", got, want)
	}
	got = show(Layout(Gemma3, Tiling{}))
	if want := []string{"<start_of_image>", "tile 0", "<end_of_image>"}; !slices.Equal(got, want) {
		t.Errorf("gemma3: %q, want %q", got, want)
	}
	for _, p := range Layout(Idefics3, Tiling{3, 2}) {
		if p.Lookup && !slices.Contains(MarkerTokens(Idefics3), p.Text) {
			t.Errorf("%q is looked up but not in MarkerTokens", p.Text)
		}
	}
}

// TestPatchOrder: idefics3's tower reads the patches window by window,
// so that Merge² consecutive rows are the pixel shuffle's token.
func TestPatchOrder(t *testing.T) {
	c := Config{Projector: Idefics3, ImageSize: 16, PatchSize: 4, Merge: 2}
	want := []int{0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15}
	if got := c.PatchOrder(); !slices.Equal(got, want) {
		t.Errorf("idefics3: %v, want %v", got, want)
	}
	c.Projector = Gemma3
	if got := c.PatchOrder(); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}) {
		t.Errorf("gemma3: %v, want raster order", got)
	}
}

// TestResizeBicubic checks img_tool's bicubic resize on values worked by
// hand: 2 pixels to 4 along x (samples at 0, 0.5, 1, 1.5; the edge
// clamped, the cubic overshooting past the last pixel), and an image of
// the target's size unchanged.
func TestResizeBicubic(t *testing.T) {
	src := &Image{W: 2, H: 1, Pix: []uint8{0, 0, 0, 100, 100, 100}}
	got := resizeBicubic(src, 4, 1)
	// x=1: a1 = 100 - 100/6, a2 = 50, a3 = -50 + 100/6 at 0.5: 50.
	// x=3: from 100 with d0 = -100: 100 + 50/3 - 12.5 + 25/12 = 106.25.
	want := []uint8{0, 0, 0, 50, 50, 50, 100, 100, 100, 106, 106, 106}
	if !bytes.Equal(got.Pix, want) {
		t.Errorf("2 → 4: %v, want %v", got.Pix, want)
	}
	img := &Image{W: 3, H: 2, Pix: []uint8{1, 2, 3, 40, 50, 60, 200, 100, 0, 9, 8, 7, 255, 0, 128, 30, 20, 10}}
	if same := resizeBicubic(img, 3, 2); !bytes.Equal(same.Pix, img.Pix) {
		t.Errorf("3 × 2 to itself: %v, want %v", same.Pix, img.Pix)
	}
}

// TestPreprocessIdefics3: the tiles of the resized image, row by row,
// then the overview, each a planar ImageSize² picture; the overview is
// the whole image stretched (its corners are the image's).
func TestPreprocessIdefics3(t *testing.T) {
	img := &Image{W: 70, H: 20, Pix: make([]uint8, 3*70*20)}
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 31)
	}
	pics := Preprocess(img, tinyIdefics3)
	if len(pics) != 3 {
		t.Fatalf("%d pictures of a 70 × 20 image, want 2 tiles and the overview", len(pics))
	}
	sz := tinyIdefics3.ImageSize
	for i, p := range pics {
		if len(p) != 3*sz*sz {
			t.Errorf("picture %d: %d values", i, len(p))
		}
	}
	// 70 × 20 → 64 × 18.3: resized to 64 × 19, centred in 64 × 32 (6
	// black rows above): the tiles' first rows are black, -1 normalised.
	for i := range 2 {
		if v := pics[i][0]; v != -1 {
			t.Errorf("tile %d's corner is %g, want the padding's -1", i, v)
		}
	}
	norm := func(v uint8) float32 { return (float32(v)/255 - 0.5) / 0.5 }
	ov := pics[2]
	if ov[0] != norm(img.Pix[0]) || ov[sz*sz-1] != norm(img.Pix[3*(70*20-1)]) {
		t.Errorf("overview corners %g, %g; want the image's %g, %g", ov[0], ov[sz*sz-1], norm(img.Pix[0]), norm(img.Pix[3*(70*20-1)]))
	}
}
