package models_test

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/gguf"
)

// TestGGUFTokenizerHostileIDs: ids a GGUF's tokenizer.ggml.* keys give are
// bounded by the vocabulary before use. One out of range is llama.cpp's
// "bad special token", replaced by the default; lists that disagree in
// length are refused. (The arrays themselves are bounded by the file's
// size in package gguf.) Nothing allocates more than the file's size
// allows.
func TestGGUFTokenizerHostileIDs(t *testing.T) {
	pieces, scores, types := noBareSpaceMark()
	llama := func(extra ...gguf.KV) []gguf.KV {
		return append([]gguf.KV{
			{Key: "general.architecture", Value: gguf.StringValue("llama")},
			{Key: "tokenizer.ggml.model", Value: gguf.StringValue("llama")},
			{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(pieces)},
			{Key: "tokenizer.ggml.scores", Value: gguf.ArrayValue(scores)},
			{Key: "tokenizer.ggml.token_type", Value: gguf.ArrayValue(types)},
		}, extra...)
	}
	gpt2 := []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue("llama")},
		{Key: "tokenizer.ggml.model", Value: gguf.StringValue("gpt2")},
		{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue([]string{"a", "b", "ab"})},
		{Key: "tokenizer.ggml.merges", Value: gguf.ArrayValue([]string{"a b"})},
		{Key: "tokenizer.ggml.pre", Value: gguf.StringValue("qwen2")},
		{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint64Value(1 << 40)},
		{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32Value(1<<32 - 1)},
	}
	tests := []struct {
		name     string
		kv       []gguf.KV
		bos, eos int    // when it loads
		wantErr  string // "" when it loads
	}{
		{"bos id 2^40", llama(gguf.KV{Key: "tokenizer.ggml.bos_token_id", Value: gguf.Uint64Value(1 << 40)}), 1, 2, ""},
		{"eos id 2^63-1", llama(gguf.KV{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Int64Value(1<<63 - 1)}), 1, 2, ""},
		{"eos id past the vocabulary", llama(gguf.KV{Key: "tokenizer.ggml.eos_token_id", Value: gguf.Uint32Value(300)}), 1, 2, ""},
		{"negative unknown id", llama(gguf.KV{Key: "tokenizer.ggml.unknown_token_id", Value: gguf.Int32Value(-5)}), 1, 2, ""},
		{"eot id 2^40", llama(gguf.KV{Key: "tokenizer.ggml.eot_token_id", Value: gguf.Uint64Value(1 << 40)}), 1, 2, ""},
		{"gpt2 ids past the vocabulary", gpt2, -1, -1, ""},
		{"token types shorter than tokens", []gguf.KV{
			{Key: "general.architecture", Value: gguf.StringValue("llama")},
			{Key: "tokenizer.ggml.model", Value: gguf.StringValue("llama")},
			{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(pieces)},
			{Key: "tokenizer.ggml.scores", Value: gguf.ArrayValue(scores)},
			{Key: "tokenizer.ggml.token_type", Value: gguf.ArrayValue(types[:5])},
		}, 0, 0, "5 token types for 300 pieces"},
		{"gpt2 token types shorter than tokens", append(slices.Clone(gpt2),
			gguf.KV{Key: "tokenizer.ggml.token_type", Value: gguf.ArrayValue([]int32{1})}), 0, 0, "1 token types for 3 tokens"},
		{"gemma4 token types shorter than tokens", []gguf.KV{
			{Key: "general.architecture", Value: gguf.StringValue("llama")},
			{Key: "tokenizer.ggml.model", Value: gguf.StringValue("gemma4")},
			{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue([]string{"a", "b", "ab"})},
			{Key: "tokenizer.ggml.merges", Value: gguf.ArrayValue([]string{"a b"})},
			{Key: "tokenizer.ggml.token_type", Value: gguf.ArrayValue([]int32{1, 1})},
		}, 0, 0, "2 token types for 3 tokens"},
		{"no scores", []gguf.KV{
			{Key: "general.architecture", Value: gguf.StringValue("llama")},
			{Key: "tokenizer.ggml.model", Value: gguf.StringValue("llama")},
			{Key: "tokenizer.ggml.tokens", Value: gguf.ArrayValue(pieces)},
		}, 0, 0, "0 scores for 300 pieces"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "tokenizer.gguf")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := gguf.Write(f, tt.kv, nil); err != nil {
			t.Fatal(err)
		}
		f.Close()
		st, _ := os.Stat(path)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		tok, err := models.LoadTokenizer(path, 0)
		runtime.ReadMemStats(&after)
		if n, limit := after.TotalAlloc-before.TotalAlloc, 64*uint64(st.Size())+16<<20; n > limit {
			t.Errorf("%s: a %d-byte file allocated %d bytes", tt.name, st.Size(), n)
		}
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tok.BOS() != tt.bos || tok.EOS() != tt.eos:
			t.Errorf("%s: bos, eos = %d, %d; want %d, %d", tt.name, tok.BOS(), tok.EOS(), tt.bos, tt.eos)
		default:
			for _, id := range tok.Encode("a b ab", true) {
				if id < 0 || id >= tok.VocabSize() {
					t.Errorf("%s: id %d of %d", tt.name, id, tok.VocabSize())
				}
			}
		}
	}
}
