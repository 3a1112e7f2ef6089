package tokenizer

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites the text between added tokens before it is split into
// words, as tokenizer.json's "normalizer" says. first is set for the
// text at the very start of the input.
type normalizer interface {
	normalize(s string, first bool) string
}

// unicodeNormalizer applies a Unicode normalization form (Qwen uses NFC).
type unicodeNormalizer struct{ form norm.Form }

func (n unicodeNormalizer) normalize(s string, _ bool) string { return n.form.String(s) }

// replaceNormalizer replaces a literal string (Gemma: " " by "▁").
type replaceNormalizer struct{ old, new string }

func (n replaceNormalizer) normalize(s string, _ bool) string {
	return strings.ReplaceAll(s, n.old, n.new)
}

// prependNormalizer puts a string before every non-empty text (the
// SentencePiece dummy prefix, "▁").
type prependNormalizer struct{ prefix string }

func (n prependNormalizer) normalize(s string, _ bool) string {
	if s == "" {
		return s
	}
	return n.prefix + s
}

// lowercaseNormalizer lower-cases the text.
type lowercaseNormalizer struct{}

func (lowercaseNormalizer) normalize(s string, _ bool) string { return strings.ToLower(s) }

// stripNormalizer removes whitespace at either end.
type stripNormalizer struct{ left, right bool }

func (n stripNormalizer) normalize(s string, _ bool) string {
	if n.left {
		s = strings.TrimLeft(s, " \t\n\r\v\f")
	}
	if n.right {
		s = strings.TrimRight(s, " \t\n\r\v\f")
	}
	return s
}

// maxShrink is the most by which normalizers and pre-tokenizers can divide
// the length of a text: their words hold at least len(s)/maxShrink bytes
// in all, so a bounded encoding can refuse a long text before spending
// linear but slow work (NFC, regexp2) on it. It is 0 when they can remove
// any amount of text, and then nothing is certain.
//
//   - The Unicode forms change one character into at least one, or
//     compose a few (a Hangul syllable from three 3-byte jamo, a letter
//     with two marks); the worst is a 4-byte character whose compatibility
//     form is ASCII (𝐀 to A under NFKC): 4 (TestMaxShrink checks every
//     code point and random combining sequences).
//   - Lower-casing changes each character into one: at most 4 bytes into
//     at least 1.
//   - Replacing old by a shorter new divides by len(old)/len(new) at most,
//     and by nothing when new is longer; by an empty new, anything.
//   - Strip removes any amount of whitespace, and a Removed split any
//     amount of text. Every other pre-tokenizer keeps every byte or adds.
func maxShrink(ns []normalizer, pre []preTokenizer) int {
	k := 1
	for _, n := range ns {
		switch n := n.(type) {
		case unicodeNormalizer, lowercaseNormalizer:
			k *= 4
		case replaceNormalizer:
			switch {
			case n.new == "" && n.old != "":
				return 0
			case len(n.new) < len(n.old):
				k *= (len(n.old) + len(n.new) - 1) / len(n.new)
			}
		case prependNormalizer:
		default: // stripNormalizer, and any added later until shown safe
			return 0
		}
	}
	for _, p := range pre {
		switch p := p.(type) {
		case splitPre:
			if p.behavior == splitRemoved {
				return 0
			}
		case metaspacePre:
			if p.replacement == "" {
				return 0
			}
		case byteLevelPre, digitsPre:
		default:
			return 0
		}
	}
	return k
}
