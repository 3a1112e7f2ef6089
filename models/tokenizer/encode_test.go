package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The expected ids are what llama2.c's encode() gives, computed with an
// independent transcription of its algorithm over the .bin files; the
// Llama 2 "Hello world" ids also match Hugging Face's tokenizer.
func TestEncodeMatchesLlama2c(t *testing.T) {
	tests := []struct {
		load func() (*SentencePiece, error)
		text string
		want []int
	}{
		{loadTok512Bin, "Once upon a time, there was a dog", []int{403, 407, 261, 378, 432, 383, 286, 261, 400, 428}},
		{loadTok512Bin, "Hello world", []int{346, 306, 414, 263, 304, 341}},
		{loadTok512Bin, "hello", []int{281, 306, 414}},
		{loadTok512Bin, "a", []int{261}},
		{loadTok512Bin, " ", []int{410, 410}},
		{loadTok512Bin, "  leading", []int{410, 410, 278, 411, 380, 299}},
		{loadTok512Bin, "trailing  ", []int{259, 420, 412, 290, 299, 410, 410}},
		{loadTok512Bin, "tab\there\nnew", []int{259, 412, 430, 12, 260, 276, 13, 416, 411, 424}},
		{loadTok512Bin, "café", []int{280, 412, 431, 485}},
		{loadTok512Bin, "日本語", []int{410, 233, 154, 168, 233, 159, 175, 235, 173, 161}},
		{loadTok512Bin, "😀", []int{410, 243, 162, 155, 131}},
		{loadTok512Bin, `Lily's mom said, "Hi!"`, []int{317, 439, 419, 357, 336, 432, 313, 440, 417, 443, 436}},
		{loadLlama2Bin, "Once upon a time, there was a dog", []int{9038, 2501, 263, 931, 29892, 727, 471, 263, 11203}},
		{loadLlama2Bin, "Hello world", []int{15043, 3186}},
		{loadLlama2Bin, "café naïve", []int{274, 28059, 1055, 30085, 345}},
		{loadLlama2Bin, "日本語", []int{29871, 30325, 30346, 30968}},
		{loadLlama2Bin, "😀👍🏽", []int{29871, 243, 162, 155, 131, 243, 162, 148, 144, 243, 162, 146, 192}},
		{loadLlama2Bin, "  two  spaces", []int{259, 1023, 29871, 8162}},
		{loadLlama2Bin, "Привет, мир!", []int{7203, 7616, 29892, 4157, 29927, 29991}},
		{loadLlama2Bin, "x = 1\n\ty = 2", []int{921, 353, 29871, 29896, 13, 12, 29891, 353, 29871, 29906}},
	}
	for _, tt := range tests {
		tok := mustLoad(t, tt.load)
		if got := tok.Encode(tt.text, false); !slices.Equal(got, tt.want) {
			t.Errorf("Encode(%q) = %v, want %v", tt.text, got, tt.want)
		}
		withBOS := append([]int{tok.BOS()}, tt.want...)
		if got := tok.Encode(tt.text, true); !slices.Equal(got, withBOS) {
			t.Errorf("Encode(%q, bos) = %v, want %v", tt.text, got, withBOS)
		}
	}
}

// The first words of the reference story are the example in the task:
// check the pieces too, so a failure shows which merge went wrong.
func TestEncodePieces(t *testing.T) {
	tok := mustLoad(t, loadTok512Bin)
	var got []string
	for _, id := range tok.Encode("Once upon a time, there was a dog", false) {
		got = append(got, tok.Piece(id))
	}
	want := []string{" Once", " upon", " a", " time", ",", " there", " was", " a", " do", "g"}
	if !slices.Equal(got, want) {
		t.Errorf("pieces = %q, want %q", got, want)
	}
}

func TestEncodeEmpty(t *testing.T) {
	tok := mustLoad(t, loadTok512Bin)
	if got := tok.Encode("", false); len(got) != 0 {
		t.Errorf(`Encode("") = %v, want no ids (no dummy prefix)`, got)
	}
	if got := tok.Encode("", true); !slices.Equal(got, []int{1}) {
		t.Errorf(`Encode("", bos) = %v, want [1]`, got)
	}
}

// tiny builds a hand-written vocabulary that encodes by llama2.c's rules,
// to test the algorithm on cases the real vocabularies do not isolate.
func tiny(t *testing.T, pieces []string, scores []float32) *SentencePiece {
	t.Helper()
	tok, err := newSentencePiece(pieces, scores, nil, 1, 2, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestMergeOrder(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		scores []float32
		text   string
		want   []string
	}{
		{
			name:   "leftmost pair wins a tie",
			pieces: []string{"<unk>", "<s>", "</s>", "▁", "a", "aa"},
			scores: []float32{0, 0, 0, -1, -1, -1},
			text:   "aaa",
			want:   []string{"▁", "aa", "a"},
		},
		{
			name:   "higher score beats leftmost",
			pieces: []string{"<unk>", "<s>", "</s>", "▁", "a", "b", "c", "ab", "bc"},
			scores: []float32{0, 0, 0, -1, -1, -1, -1, -2, -1},
			text:   "abc",
			want:   []string{"▁", "a", "bc"},
		},
		{
			name:   "merges chain into longer pieces",
			pieces: []string{"<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "▁ab"},
			scores: []float32{0, 0, 0, -1, -1, -1, -1, -2},
			text:   "ab",
			want:   []string{"▁ab"},
		},
		{
			name:   "llama2.c never merges at or below -1e10",
			pieces: []string{"<unk>", "<s>", "</s>", "▁", "a", "aa"},
			scores: []float32{0, 0, 0, -1, -1, -1e10},
			text:   "aa",
			want:   []string{"▁", "a", "a"},
		},
		{
			name:   "missing byte pieces become unk",
			pieces: []string{"<unk>", "<s>", "</s>", "▁", "a"},
			scores: []float32{0, 0, 0, -1, -1},
			text:   "aé",
			want:   []string{"▁", "a", "<unk>", "<unk>"},
		},
		{
			name:   "no space piece means no dummy prefix",
			pieces: []string{"<unk>", "<s>", "</s>", "a", "b", "ab"},
			scores: []float32{0, 0, 0, -1, -1, -1},
			text:   "ab",
			want:   []string{"ab"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := tiny(t, tt.pieces, tt.scores)
			var got []string
			for _, id := range tok.Encode(tt.text, false) {
				got = append(got, tok.Piece(id))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

// TestSentencePieceRules: the rules of GGUF and .model vocabularies
// (SentencePiece's, as llama.cpp applies them) where they differ from
// llama2.c's: characters merge whether or not they are pieces, spaces
// are ▁, the dummy prefix does not need a piece, and a character left
// without one is its UTF-8 bytes.
func TestSentencePieceRules(t *testing.T) {
	bytePieces := func(ps ...string) []string {
		all := []string{"<unk>", "<s>", "</s>"}
		for b := range 256 {
			all = append(all, fmt.Sprintf("<0x%02X>", b))
		}
		return append(all, ps...)
	}
	scored := func(pieces []string) []float32 {
		scores := make([]float32, len(pieces))
		for i := range scores {
			scores[i] = -float32(i)
		}
		return scores
	}
	tests := []struct {
		name     string
		pieces   []string
		noPrefix bool
		text     string
		want     []string
	}{
		{"the dummy prefix merges without a ▁ piece", bytePieces("a", "▁a"), false, "a", []string{"▁a"}},
		{"a ▁ without a piece is its bytes", bytePieces("a", "▁a"), false, "A a", []string{"<0xE2>", "<0x96>", "<0x81>", "<0x41>", "▁a"}},
		{"no dummy prefix when off", bytePieces("a", "▁a"), true, "a a", []string{"a", "▁a"}},
		{"two characters without pieces merge", bytePieces("xy"), true, "xy", []string{"xy"}},
		{"a multi-byte character without a piece merges", bytePieces("é!"), true, "é!", []string{"é!"}},
		{"a literal ▁ is a space", bytePieces("▁a", "▁b"), false, "a▁b", []string{"▁a", "▁b"}},
		{"a stray continuation byte is its own symbol", bytePieces("▁"), true, " \x80", []string{"▁", "<0x80>"}},
		{"missing byte pieces become unk", []string{"<unk>", "<s>", "</s>", "a"}, true, "aé", []string{"a", "<unk>", "<unk>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := NewSentencePiece(tt.pieces, scored(tt.pieces), nil, 1, 2, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tt.noPrefix {
				tok.WithoutSpacePrefix()
			}
			var got []string
			for _, id := range tok.Encode(tt.text, false) {
				got = append(got, tok.Piece(id))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Encode(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}

// Encode leaves control, unknown and byte pieces out of matching, where
// llama2.c matches every piece by its text. This shows the difference
// cannot change any result for the shared vocabularies: no such piece is
// the concatenation of two pieces, so no merge could produce it (and none
// is a single character, so no lookup could either).
func TestSpecialPiecesUnreachable(t *testing.T) {
	for _, rt := range []realTokenizer{realTokenizers[0], realTokenizers[2]} {
		tok := mustLoad(t, rt.load)
		all := make(map[string]bool, tok.VocabSize())
		for id := range tok.VocabSize() {
			all[tok.Piece(id)] = true
		}
		for id := range tok.VocabSize() {
			if mergeable(tok.Type(id)) {
				continue
			}
			p := tok.Piece(id)
			for k := 1; k < len(p); k++ {
				if all[p[:k]] && all[p[k:]] {
					t.Errorf("%s: %s piece %d %q = %q + %q", rt.name, tok.Type(id), id, p, p[:k], p[k:])
				}
			}
		}
	}
}

// A 10 KB text round-trips (its speed is BenchmarkEncode10KB's business:
// tests do not time).
func TestEncodeLargeText(t *testing.T) {
	tok := mustLoad(t, loadLlama2Bin)
	text := strings.Repeat(paragraph, 10240/len(paragraph)+1)[:10240]
	ids := tok.Encode(text, true)
	if got := tok.Decode(ids); got != text {
		t.Errorf("10 KB round trip differs")
	}
}

const paragraph = `Once upon a time, in a small village by the sea, there lived a curious girl named Mira. ` +
	`Every morning she walked along the shore, collecting shells and talking to the gulls, who — she was sure — ` +
	`understood every word. One day a storm brought in a bottle with a note: "Meet me where the river bends, at dawn." ` +
	"She didn't sleep that night; at 5:30 she packed bread, cheese and a lantern, and set off.\n\n"

func BenchmarkEncode(b *testing.B) {
	tok := mustLoad(b, loadLlama2Bin)
	b.SetBytes(int64(len(paragraph)))
	for b.Loop() {
		tok.Encode(paragraph, true)
	}
}

func BenchmarkEncode10KB(b *testing.B) {
	tok := mustLoad(b, loadLlama2Bin)
	text := strings.Repeat(paragraph, 10240/len(paragraph)+1)[:10240]
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, true)
	}
}
