package tokenizer

import (
	"slices"
	"testing"
	"unicode/utf8"
)

// TestEncodeLongHostile encodes long hostile texts with every kind of
// tokenizer: 256 KiB of the worst shapes, and a mebibyte of the shapes
// that made SentencePiece's old encoders slowest. Speed is
// BenchmarkEncodeLong's business, but a quadratic encoder takes well over
// the test timeout here (SentencePiece's took 10 s for 128k characters
// of words, 16× more per quadrupling), so a regression fails. The ids
// must be valid and round-trip where the tokenizer promises it.
func TestEncodeLongHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("megabytes of text per kind")
	}
	for _, k := range testKinds(t) {
		_, spm := k.tok.(*SentencePiece)
		for _, sh := range hostileShapes {
			n := 0
			switch {
			case spm && (sh.name == "words" || sh.name == "special"):
				n = 1 << 20
			case slices.Contains([]string{"a", "spaces", "unicode", "special"}, sh.name):
				n = 256 << 10
			default:
				continue
			}
			text := sh.make(n)
			ids := k.tok.Encode(text, false)
			for i, id := range ids {
				if id < 0 || id >= k.tok.VocabSize() {
					t.Fatalf("%s: %s: ids[%d] = %d, out of range", k.name, sh.name, i, id)
				}
			}
			if roundTrips(k, text) {
				if got := k.tok.Decode(ids); got != text {
					t.Errorf("%s: %s: Decode(Encode(text)) differs", k.name, sh.name)
				}
			}
		}
	}
}

// roundTrips reports whether Decode(Encode(text)) == text is promised:
// SentencePiece always; byte-level BPE without a normalizer (Llama 3) for
// any text, with NFC (Qwen3) for text NFC leaves alone; not WordPiece
// (which lower-cases), nor Gemma (which decodes a ▁ in the text as a
// space).
func roundTrips(k testKind, text string) bool {
	switch tok := k.tok.(type) {
	case *SentencePiece:
		return true
	case *BPE:
		if !tok.byteLevel {
			return false
		}
		for _, n := range tok.normalizers {
			if n.normalize(text, true) != text {
				return false
			}
		}
		return utf8.ValidString(text) || len(tok.normalizers) == 0
	}
	return false
}
