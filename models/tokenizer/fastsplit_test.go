package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// splitAll returns the spans m matches in s.
func splitAll(m matcher, s string) [][2]int {
	var spans [][2]int
	m.matches(s, func(start, end int) bool { spans = append(spans, [2]int{start, end}); return true })
	return spans
}

// fastSplitAlphabet holds the characters where the patterns' classes and
// alternatives disagree most easily: contractions in every case, letters,
// digits of all three Unicode kinds, every sort of space, marks,
// symbols, and bytes that are not UTF-8.
var fastSplitAlphabet = []string{
	"'", "s", "S", "t", "re", "RE", "rE", "ve", "m", "ll", "lL", "d", "D", "x", "'s", "'LL", "'Re",
	"a", "Z", "é", "ß", "ſ", "日", "本", "ж", "ا", "ก",
	"0", "7", "٣", "²", "½", "Ⅻ", "123", "4567",
	" ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\u00a0", "\u3000", "\u2009", "\u0085", "\u2028", "\v", "\f",
	".", ",", "!", "?", "-", "(", ")", "{", "}", "<|", "|>", "#", "@", "`", "~", "+", "=", "_",
	"\u0301", "\u200d", "🦙", "👩", "€",
	"\xff", "\x80", "\xf0\x9f",
}

// TestFastSplitMatchesRegexp checks the hand-written matchers against
// regexp2 running the patterns themselves, on the reference texts and on
// random strings over the tricky alphabet.
func TestFastSplitMatchesRegexp(t *testing.T) {
	var texts []string
	for _, fam := range []string{"qwen3", "llama3", "gemma3"} {
		for _, l := range readReference(t, fam) {
			texts = append(texts, l.Text)
		}
	}
	texts = append(texts, awkwardTexts...)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			b.WriteString(fastSplitAlphabet[rng.IntN(len(fastSplitAlphabet))])
		}
		texts = append(texts, b.String())
	}
	for pattern, fast := range fastMatchers {
		re, err := newRegexMatcher(pattern)
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for _, s := range texts {
			want, got := splitAll(re, s), splitAll(fast, s)
			if !slices.Equal(got, want) {
				t.Errorf("%.20s…: %q\n fast  %v\n regex %v", pattern, s, got, want)
				if bad++; bad > 5 {
					break
				}
			}
		}
	}
}
