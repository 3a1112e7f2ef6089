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
