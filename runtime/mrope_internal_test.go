package runtime

import "testing"

// TestMropePos: the rotary positions of a sequence with two images, as
// llama.cpp's mtmd gives them: text by its position; an image of nx × ny
// tokens whose first token comes at rotary position b turns token i by
// (b, b + i/nx, b + i%nx, 0); the text after it resumes at b + max(nx,
// ny), so the positions fall behind the cache's by what each image saves.
func TestMropePos(t *testing.T) {
	spans := []imageSpan{{start: 3, rows: 6, nx: 3, ny: 2}, {start: 11, rows: 8, nx: 2, ny: 4}}
	for _, tc := range []struct {
		pos  int
		want [4]int32
	}{
		{0, [4]int32{0, 0, 0, 0}},
		{2, [4]int32{2, 2, 2, 2}},
		{3, [4]int32{3, 3, 3, 0}}, // the first image's first token
		{7, [4]int32{3, 4, 4, 0}}, // its token 4: row 1, column 1
		{8, [4]int32{3, 4, 5, 0}},
		{9, [4]int32{6, 6, 6, 6}}, // text again at 3 + max(3, 2)
		{10, [4]int32{7, 7, 7, 7}},
		{11, [4]int32{8, 8, 8, 0}},     // the second image, 2 wide and 4 high
		{16, [4]int32{8, 10, 9, 0}},    // its token 5: row 2, column 1
		{18, [4]int32{8, 11, 9, 0}},    // its last
		{19, [4]int32{12, 12, 12, 12}}, // text at 8 + max(2, 4)
		{40, [4]int32{33, 33, 33, 33}},
	} {
		if got := mropePos(spans, tc.pos); got != tc.want {
			t.Errorf("position %d: %v, want %v", tc.pos, got, tc.want)
		}
	}
	if got := mropePos(nil, 5); got != [4]int32{5, 5, 5, 5} {
		t.Errorf("no images: %v", got)
	}
}
