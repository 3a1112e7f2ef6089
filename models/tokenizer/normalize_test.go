package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TestMaxShrink backs maxShrink's claim that the Unicode forms and
// lower-casing never make a text shorter than a quarter of its length:
// every code point alone, and random runs of bases, combining marks,
// Hangul jamo, compatibility characters and invalid bytes, which is where
// composition joins characters.
func TestMaxShrink(t *testing.T) {
	ns := []normalizer{unicodeNormalizer{norm.NFC}, unicodeNormalizer{norm.NFD}, unicodeNormalizer{norm.NFKC}, unicodeNormalizer{norm.NFKD}, lowercaseNormalizer{}}
	check := func(n normalizer, s string) {
		if got := n.normalize(s, true); 4*len(got) < len(s) {
			t.Fatalf("%T%v: %q (%d bytes) became %q (%d bytes)", n, n, s, len(s), got, len(got))
		}
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		for _, n := range ns {
			check(n, string(r))
		}
	}
	parts := []string{"a", "e", "A", "K", "\u212a", "\u2126", "\u0301", "\u0323", "\u0302", "\u0308", "\u030a",
		"\u1100", "\u1161", "\u11a8", "\U0001d400", "\uff21", "\ufb03", "\u0344", "\u0f73", "\xff", "\x80", "İ", " "}
	r := rand.New(rand.NewPCG(1, 1))
	for range 200000 {
		var b strings.Builder
		for range 1 + r.IntN(8) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		for _, n := range ns {
			check(n, b.String())
		}
	}
}

func TestMaxShrinkRules(t *testing.T) {
	tests := []struct {
		name string
		ns   []normalizer
		pre  []preTokenizer
		want int
	}{
		{"nothing", nil, nil, 1},
		{"NFC", []normalizer{unicodeNormalizer{norm.NFC}}, []preTokenizer{byteLevelPre{}}, 4},
		{"NFKC and lower case", []normalizer{unicodeNormalizer{norm.NFKC}, lowercaseNormalizer{}}, nil, 16},
		{"Gemma's space to ▁", []normalizer{replaceNormalizer{" ", spaceMark}}, []preTokenizer{splitPre{m: literalMatcher{" "}, behavior: splitMergedWithPrevious}}, 1},
		{"replace by shorter", []normalizer{replaceNormalizer{"abcde", "xy"}}, nil, 3},
		{"replace by nothing", []normalizer{replaceNormalizer{"a", ""}}, nil, 0},
		{"strip", []normalizer{stripNormalizer{left: true}}, nil, 0},
		{"removed split", nil, []preTokenizer{splitPre{m: literalMatcher{" "}, behavior: splitRemoved}}, 0},
		{"metaspace", []normalizer{prependNormalizer{spaceMark}}, []preTokenizer{metaspacePre{replacement: spaceMark, prepend: "always"}, digitsPre{}}, 1},
	}
	for _, tt := range tests {
		if got := maxShrink(tt.ns, tt.pre); got != tt.want {
			t.Errorf("%s: maxShrink = %d, want %d", tt.name, got, tt.want)
		}
	}
}
