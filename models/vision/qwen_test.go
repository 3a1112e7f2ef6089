package vision

import (
	"math"
	"slices"
	"testing"
)

// TestQwenSize: llama.cpp's smart resize (mtmd-image.cpp's
// calc_size_preserved_ratio with pixel limits) on each of its paths,
// sizes worked out by hand in float32: sides rounded to the merged patch
// (50×37), scaled up to the least pixels (13×7), scaled down under the
// most (700×500); and the real tower's patches of 14.
func TestQwenSize(t *testing.T) {
	tiny := Config{Projector: Qwen2VL, PatchSize: 4, Merge: 2, MinPixels: 8 * 64, MaxPixels: 4096 * 64}
	real := Config{Projector: Qwen2VL, PatchSize: 14, Merge: 2, MinPixels: 8 * 784, MaxPixels: 4096 * 784}
	for _, tc := range []struct {
		c            Config
		w, h         int
		sw, sh       int
		gridW, gridH int
	}{
		{tiny, 50, 37, 48, 40, 6, 5},
		{tiny, 13, 7, 32, 24, 4, 3},
		{tiny, 700, 500, 600, 432, 75, 54},
		{tiny, 1, 1, 24, 24, 3, 3},
		{real, 50, 37, 112, 84, 4, 3},
		{real, 560, 560, 560, 560, 20, 20},
	} {
		sw, sh := tc.c.Size(tc.w, tc.h)
		gw, gh := tc.c.Grid(tc.w, tc.h)
		if sw != tc.sw || sh != tc.sh || gw != tc.gridW || gh != tc.gridH {
			t.Errorf("patch %d, %d×%d: resized to %d×%d (grid %d×%d), want %d×%d (%d×%d)", tc.c.PatchSize, tc.w, tc.h, sw, sh, gw, gh, tc.sw, tc.sh, tc.gridW, tc.gridH)
		}
		if px := sw * sh; px > tc.c.MaxPixels || px < tc.c.MinPixels {
			t.Errorf("%d×%d: %d pixels outside %d..%d", tc.w, tc.h, px, tc.c.MinPixels, tc.c.MaxPixels)
		}
	}
}

// TestMergedPatches: each 2×2 block of patches on consecutive rows,
// blocks row by row, with each row's position (y, x, y, x); the values of
// a row those of Patches' row for the same patch.
func TestMergedPatches(t *testing.T) {
	c := Config{PatchSize: 2, Merge: 2, ImageSize: 4}
	w, h := 8, 4 // 4×2 patches: two blocks side by side
	planar := make([]float32, 3*w*h)
	for i := range planar {
		planar[i] = float32(i)
	}
	rows, pos := MergedPatches(planar, w, h, c)
	var want []int32
	for _, p := range [][2]int32{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}} {
		want = append(want, p[0], p[1], p[0], p[1])
	}
	if !slices.Equal(pos, want) {
		t.Errorf("positions %v, want %v", pos, want)
	}
	k := 3 * c.PatchSize * c.PatchSize
	for r := range len(pos) / 4 {
		y, x := int(pos[4*r]), int(pos[4*r+1])
		var patch []float32
		for ch := range 3 {
			for ky := range 2 {
				at := ch*w*h + (2*y+ky)*w + 2*x
				patch = append(patch, planar[at:at+2]...)
			}
		}
		if !slices.Equal(rows[r*k:(r+1)*k], patch) {
			t.Errorf("row %d (patch %d, %d): %v, want %v", r, x, y, rows[r*k:(r+1)*k], patch)
		}
	}
}

// TestPositionsFor: Qwen3-VL's position table resized with aligned
// corners reproduces a table that is linear in the patch's row and column
// exactly at every patch (bilinear interpolation is exact there), the
// corners taking the table's corners; a table of the image's size is only
// reordered; rows come in MergedPatches' order.
func TestPositionsFor(t *testing.T) {
	c := Config{Projector: Qwen3VL, ImageSize: 16, PatchSize: 4, Dim: 2, Merge: 2}
	n := c.Patches() // 4
	table := make([]float32, n*n*c.Dim)
	for y := range n {
		for x := range n {
			table[(y*n+x)*2], table[(y*n+x)*2+1] = float32(x), float32(10*y)
		}
	}
	for _, tc := range []struct{ w, h int }{{16, 16}, {24, 8}, {8, 40}, {40, 24}} {
		got := c.PositionsFor(table, tc.w, tc.h)
		pw, ph := tc.w/c.PatchSize, tc.h/c.PatchSize
		if len(got) != pw*ph*c.Dim {
			t.Fatalf("%d×%d: %d values, want %d", tc.w, tc.h, len(got), pw*ph*c.Dim)
		}
		_, pos := MergedPatches(make([]float32, 3*tc.w*tc.h), tc.w, tc.h, c)
		for r := range pw * ph {
			y, x := float64(pos[4*r]), float64(pos[4*r+1])
			wantX, wantY := x*float64(n-1)/float64(pw-1), 10*y*float64(n-1)/float64(ph-1)
			if math.Abs(float64(got[2*r])-wantX) > 1e-5 || math.Abs(float64(got[2*r+1])-wantY) > 1e-4 {
				t.Errorf("%d×%d, row %d (patch %v, %v): %v, want %v, %v", tc.w, tc.h, r, x, y, got[2*r:2*r+2], wantX, wantY)
			}
		}
	}
}
