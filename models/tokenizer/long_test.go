package tokenizer

import (
	"slices"
	"testing"
	"unicode/utf8"
)

// TestEncodeLongHostile encodes 256 KiB of each of the worst hostile shapes
// with every kind of tokenizer. Its speed is BenchmarkEncodeLong's
// business, but a quadratic encoder takes half an hour here
// (SentencePiece's took 1.8 s for 32k characters, 4× more per doubling),
// so a regression fails by the test timeout. The ids must be valid and round-trip where the tokenizer
// promises it.
func TestEncodeLongHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("256 KiB per shape and kind")
	}
	shapes := []string{"a", "spaces", "unicode", "special"}
	for _, k := range testKinds(t) {
		for _, sh := range hostileShapes {
			if !slices.Contains(shapes, sh.name) {
				continue
			}
			text := sh.make(256 << 10)
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
