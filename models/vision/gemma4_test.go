package vision_test

import (
	"bytes"
	"reflect"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/models/tensor"
	"github.com/tessera-llm/tessera/models/vision"
)

// TestReadGemma4V: Gemma 4's projector, written as the converter writes it
// (clip.vision.projector_type, no clip.use_gelu, no pooling size), reads
// back as the tower it was written from: the pool of 3, quick GELU, the
// 40..280-token limits, the tables' length and the projection's width
// from their tensors; its images keep their aspect with llama.cpp's
// sizes (worked out by hand in float32: the least tokens, as is, the most)
// and sit between <|image> and <image|>.
func TestReadGemma4V(t *testing.T) {
	for _, shape := range []string{"tiny-gemma4v", "mid-gemma4v"} {
		c, err := synth.ProjectorShape(shape, 64)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := synth.WriteProjector(&b, c, dtype.F32, 1); err != nil {
			t.Fatal(err)
		}
		m, err := vision.OpenReader(bytes.NewReader(b.Bytes()), int64(b.Len()), shape)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m.Config, c) || c.Merge != 3 || c.Act != tensor.GELUQuick {
			t.Errorf("%s: read %+v, wrote %+v", shape, m.Config, c)
		}
		m.Close()
	}
	c, err := synth.ProjectorShape("tiny-gemma4v", 64)
	if err != nil {
		t.Fatal(err)
	}
	real, err := synth.ProjectorShape("gemma4v", 1536)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c            vision.Config
		w, h, sw, sh int
	}{
		{c, 50, 37, 96, 72},     // 48 tokens: scaled up to the least (40)
		{c, 13, 7, 108, 60},     // 45
		{c, 120, 48, 120, 48},   // 40: as is
		{c, 300, 150, 276, 132}, // 253: scaled down under the most (280)
		{real, 50, 37, 384, 288},
		{real, 896, 896, 768, 768}, // 256
	} {
		sw, sh := tc.c.Size(tc.w, tc.h)
		if sw != tc.sw || sh != tc.sh {
			t.Errorf("patch %d, %d×%d: resized to %d×%d, want %d×%d", tc.c.PatchSize, tc.w, tc.h, sw, sh, tc.sw, tc.sh)
		}
		if nx, ny := tc.c.Grid(tc.w, tc.h); nx*ny < 40 || nx*ny > 280 {
			t.Errorf("%d×%d: %d×%d tokens, outside 40..280", tc.w, tc.h, nx, ny)
		}
	}
	want := []vision.Part{{Text: "<|image>"}, {Tile: 0}, {Text: "<image|>"}}
	if got := vision.Layout(vision.Gemma4V, vision.Tiling{}); !slices.Equal(got, want) {
		t.Errorf("layout %v, want %v", got, want)
	}
}

// TestGemma4Patches: rows in raster order, the pixels taken to −1..1,
// each row's column and row.
func TestGemma4Patches(t *testing.T) {
	c := vision.Config{PatchSize: 2}
	w, h := 4, 2 // 2×1 patches
	planar := make([]float32, 3*w*h)
	for i := range planar {
		planar[i] = float32(i) / 32
	}
	rows, cols, ys := vision.Gemma4Patches(planar, w, h, c)
	if !slices.Equal(cols, []int32{0, 1}) || !slices.Equal(ys, []int32{0, 0}) {
		t.Errorf("columns %v, rows %v", cols, ys)
	}
	k := 3 * 2 * 2
	for r := range 2 {
		var want []float32
		for ch := range 3 {
			for ky := range 2 {
				for kx := range 2 {
					want = append(want, 2*planar[ch*w*h+ky*w+2*r+kx]-1)
				}
			}
		}
		if !slices.Equal(rows[r*k:(r+1)*k], want) {
			t.Errorf("patch %d: %v, want %v", r, rows[r*k:(r+1)*k], want)
		}
	}
}
