package tokenizer

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// gemmaSentencePiece builds the vocabulary a Gemma GGUF carries
// (tokenizer.ggml.model "llama": pieces, scores and types) from the shared
// Gemma 3 tokenizer.json: special added tokens become Control pieces, the
// other added tokens UserDefined, <0xNN> Byte, and each merge's product is
// scored by the merge's rank, so that SentencePiece's highest-score-first
// merging applies the merges in their order.
func gemmaSentencePiece(t *testing.T) *SentencePiece {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(hfDir, "gemma3", "tokenizer.json"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("shared tokenizers not found: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges [][2]string    `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		t.Fatal(err)
	}
	n := len(tj.Model.Vocab)
	for _, a := range tj.Added { // an image token sits past the vocabulary
		n = max(n, a.ID+1)
	}
	pieces, scores, types := make([]string, n), make([]float32, n), make([]int32, n)
	for p, id := range tj.Model.Vocab {
		pieces[id], scores[id], types[id] = p, noMerge, int32(TypeNormal)
		if _, ok := parseBytePiece(p); ok {
			types[id] = int32(TypeByte)
		}
	}
	for _, a := range tj.Added {
		pieces[a.ID], scores[a.ID] = a.Content, noMerge
		types[a.ID] = int32(TypeUserDefined)
		if a.Special {
			types[a.ID] = int32(TypeControl)
		}
	}
	types[tj.Model.Vocab["<unk>"]] = int32(TypeUnknown)
	for rank, m := range tj.Model.Merges {
		if id, ok := tj.Model.Vocab[m[0]+m[1]]; ok && scores[id] == noMerge {
			scores[id] = -float32(rank)
		}
	}
	sp, err := NewSentencePiece(pieces, scores, types, tj.Model.Vocab["<bos>"], tj.Model.Vocab["<eos>"], tj.Model.Vocab["<unk>"])
	if err != nil {
		t.Fatal(err)
	}
	return sp.WithoutSpacePrefix()
}

// TestSentencePieceGemma: a Gemma GGUF's SentencePiece vocabulary, with
// no dummy prefix, encodes every line of the Gemma 3 reference as the
// Hugging Face library does, renders chat-template text with its control
// tokens, and ends a generation at <end_of_turn>.
func TestSentencePieceGemma(t *testing.T) {
	sp := gemmaSentencePiece(t)
	for _, l := range readReference(t, "gemma3") {
		if got := sp.EncodeSpecial(l.Text, false); !slices.Equal(got, l.IDs) {
			t.Errorf("EncodeSpecial(%q, false)\n got %v\nwant %v", l.Text, got, l.IDs)
		}
		if got := sp.EncodeSpecial(l.Text, true); !slices.Equal(got, l.IDsWithSpecial) {
			t.Errorf("EncodeSpecial(%q, true)\n got %v\nwant %v", l.Text, got, l.IDsWithSpecial)
		}
		if got := sp.Decode(sp.Encode(l.Text, true)); got != l.Text {
			t.Errorf("Decode(Encode(%q)) = %q", l.Text, got)
		}
	}
	turn := "<bos><start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n"
	ids := sp.EncodeSpecial(turn, false)
	if ids[0] != 2 || ids[1] != 105 || !slices.Contains(ids, 106) {
		t.Errorf("EncodeSpecial(%q) = %v: want <bos>, <start_of_turn> (105) and <end_of_turn> (106) as tokens", turn, ids)
	}
	if got := sp.DecodeSpecial(ids); got != turn {
		t.Errorf("DecodeSpecial = %q, want %q", got, turn)
	}
	if plain := sp.Encode(turn, false); slices.Contains(plain, 105) {
		t.Errorf("Encode made control tokens of plain text: %v", plain)
	}
	if !sp.IsEnd(106) || !sp.IsEnd(sp.EOS()) || sp.IsEnd(105) {
		t.Errorf("ends %v: want <eos> and <end_of_turn> (106), not <start_of_turn>", sp.Ends())
	}
	if strings.HasPrefix(sp.Decode(sp.Encode("Hello", true)), " ") {
		t.Error("a dummy prefix despite add_space_prefix = false")
	}
}
