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
