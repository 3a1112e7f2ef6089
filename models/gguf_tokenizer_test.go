package models_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/gguf"
)

// noBareSpaceMark is the vocabulary `tessera synth --shape tiny` wrote
// before its vocabulary had a bare ▁: <unk>, <s>, </s>, the 256 byte
// pieces, then ▁a, a, ▁b, b, ..., ▁t, t, ▁u (ids 259 to 299), each scored
// by minus its id.
func noBareSpaceMark() (pieces []string, scores []float32, types []int32) {
	add := func(p string, typ int32) {
		scores = append(scores, -float32(len(pieces)))
		pieces, types = append(pieces, p), append(types, typ)
	}
	add("<unk>", 2)
	add("<s>", 3)
	add("</s>", 3)
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b), 6)
	}
	for c := 'a'; len(pieces) < 300; c++ {
		add("▁"+string(c), 1)
		if len(pieces) < 300 {
			add(string(c), 1)
		}
	}
	return pieces, scores, types
}

// writeTokenizerGGUF writes a GGUF holding only a SentencePiece ("llama")
// tokenizer, with tokenizer.ggml.add_space_prefix when prefix is not nil.
func writeTokenizerGGUF(t *testing.T, pieces []string, scores []float32, types []int32, prefix *bool) string {
	t.Helper()
	kv := []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue("llama")},
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("llama")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(pieces)},
		{Key: "tokenizer.ggml.scores", Value: gguf.ArrayValue(scores)},
		{Key: "tokenizer.ggml.token_type", Value: gguf.ArrayValue(types)},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint32Value(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32Value(2)},
		{Key: "tokenizer.ggml.unknown_token_id", Value: gguf.Uint32Value(0)},
	}
	if prefix != nil {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.add_space_prefix", Value: gguf.BoolValue(*prefix)})
	}
	path := filepath.Join(t.TempDir(), "tokenizer.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gguf.Write(f, kv, nil); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGGUFSentencePieceLikeLlamaCpp: a GGUF SentencePiece vocabulary with
// ▁-pieces but no bare ▁ encodes as llama.cpp encodes it, by
// SentencePiece's rules: spaces are ▁ before matching; the dummy prefix
// is there unless add_space_prefix is false (absent, it defaults to true)
// and, having no piece of its own, is spelt in the bytes of ▁ (E2 96 81);
// a ▁ before a letter with a ▁-piece merges with it. The ids for "The
// quick brown fox" are llama.cpp's for this vocabulary. (Tessera gave
// [1 87 274 268 35 292 120 ...]: no dummy prefix, and each space the byte
// <0x20>, because a space without a piece fell back to its own byte
// before merging.)
func TestGGUFSentencePieceLikeLlamaCpp(t *testing.T) {
	pieces, scores, types := noBareSpaceMark()
	const (
		e2, x96, x81 = 3 + 0xE2, 3 + 0x96, 3 + 0x81 // ▁ as byte pieces
		T, u, w, x   = 3 + 'T', 3 + 'u', 3 + 'w', 3 + 'x'
	)
	yes, no := true, false
	for _, tt := range []struct {
		name   string
		prefix *bool
		text   string
		want   []int
	}{
		// ▁ T h e ▁q u i c k ▁b r o w n ▁f o x
		{"default prefix", nil, "The quick brown fox", []int{1, e2, x96, x81, T, 274, 268, 291, u, 276, 264, 280, 261, 294, 288, w, 286, 269, 288, x}},
		{"add_space_prefix true", &yes, "The quick brown fox", []int{1, e2, x96, x81, T, 274, 268, 291, u, 276, 264, 280, 261, 294, 288, w, 286, 269, 288, x}},
		{"add_space_prefix false", &no, "The quick brown fox", []int{1, T, 274, 268, 291, u, 276, 264, 280, 261, 294, 288, w, 286, 269, 288, x}},
		{"prefix merges", nil, "quick", []int{1, 291, u, 276, 264, 280}},
		{"space before a letter without a ▁-piece", nil, "a Z", []int{1, 259, e2, x96, x81, 3 + 'Z'}},
		{"a literal ▁ is a space", nil, "a▁b", []int{1, 259, 261}},
		{"no text, no prefix", nil, "", []int{1}},
	} {
		tok, err := models.LoadTokenizer(writeTokenizerGGUF(t, pieces, scores, types, tt.prefix), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := tok.Encode(tt.text, true); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Encode(%q)\n got %v\nwant %v", tt.name, tt.text, got, tt.want)
		}
	}
}
