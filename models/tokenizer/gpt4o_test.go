package tokenizer

import (
	"slices"
	"testing"
)

// TestGPT4oSplit: o200k's pre-tokenizer (tokenizer.ggml.pre "gpt-4o",
// Phi-4-mini's and gpt-oss's) splits words at case changes keeping their
// contractions, digits in threes, and punctuation with its newlines and
// slashes, as tiktoken's pattern does.
func TestGPT4oSplit(t *testing.T) {
	m, err := newMatcher(patternGPT4o)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"camelCaseWord", []string{"camel", "Case", "Word"}},
		{"HTTPServer don't", []string{"HTTPServer", " don't"}},
		{"1234567", []string{"123", "456", "7"}},
		{"a/b\n\n  c", []string{"a", "/b", "\n\n", " ", " c"}},
		{"x +=//\ny", []string{"x", " +=//\n", "y"}},
		{"Ünïcödé ÀB", []string{"Ünïcödé", " ÀB"}},
	} {
		var got []string
		m.matches(tc.in, func(s, e int) bool { got = append(got, tc.in[s:e]); return true })
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestHarmonyEnds: a gpt-oss vocabulary (pre gpt-4o) ends a generation at
// <|return|> (the final answer) and <|call|> (a tool call), as llama.cpp
// does, and at <|endoftext|>; not at <|end|>, which closes the analysis
// message before the final one, even where the file names it its end of
// turn, nor at the tokens that open a message.
func TestHarmonyEnds(t *testing.T) {
	tokens := []string{"a", "b", "ab", "<|endoftext|>", "<|start|>", "<|message|>", "<|channel|>", "<|return|>", "<|call|>", "<|end|>"}
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = 1
		if i >= 3 {
			types[i] = 3
		}
	}
	tok, err := NewGGUFBPE(GGUFVocab{Tokens: tokens, Types: types, Merges: []string{"a b"}, Pre: "gpt-4o", BOS: -1, EOS: 3, EOT: 9, EOM: -1, Unknown: -1})
	if err != nil {
		t.Fatal(err)
	}
	for id, p := range tokens {
		want := p == "<|endoftext|>" || p == "<|return|>" || p == "<|call|>"
		if tok.IsEnd(id) != want {
			t.Errorf("IsEnd(%s) = %v", p, !want)
		}
	}
}
