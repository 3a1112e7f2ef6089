package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// A tokenizer exported to llama2.c's .bin and its SentencePiece .model must
// be the same tokenizer once loaded, or a model would tokenise differently
// depending on which file sits next to it: the same pieces, and the same
// ids for any valid UTF-8 text, although the .bin encodes by llama2.c's
// rules and the .model by SentencePiece's.
func TestBinAndModelAgree(t *testing.T) {
	pairs := []struct{ bin, model realTokenizer }{
		{realTokenizers[0], realTokenizers[1]},
		{realTokenizers[2], realTokenizers[3]},
	}
	for _, p := range pairs {
		bin, model := mustLoad(t, p.bin.load), mustLoad(t, p.model.load)
		name := p.bin.name + " vs " + p.model.name
		if bin.VocabSize() != model.VocabSize() {
			t.Fatalf("%s: vocab sizes %d and %d", name, bin.VocabSize(), model.VocabSize())
		}
		if bin.BOS() != model.BOS() || bin.EOS() != model.EOS() || bin.Unknown() != model.Unknown() {
			t.Errorf("%s: special ids (bos, eos, unk) = (%d, %d, %d) and (%d, %d, %d)", name,
				bin.BOS(), bin.EOS(), bin.Unknown(), model.BOS(), model.EOS(), model.Unknown())
		}
		mismatches := 0
		for id := range bin.VocabSize() {
			bp, mp := comparablePiece(bin, id), comparablePiece(model, id)
			if bp != mp || bin.Type(id) != model.Type(id) || bin.Score(id) != model.Score(id) {
				t.Errorf("%s: id %d is %q %s %g and %q %s %g", name, id,
					bin.Piece(id), bin.Type(id), bin.Score(id), model.Piece(id), model.Type(id), model.Score(id))
				if mismatches++; mismatches > 10 {
					t.Fatalf("%s: too many mismatches", name)
				}
			}
		}
		for _, text := range append(awkwardTexts, paragraph) {
			if !utf8.ValidString(text) {
				// The .bin encodes as llama2.c does, which takes a byte
				// and the continuation bytes after it as one character, so
				// a space and a stray continuation byte after it are two
				// byte pieces; the .model follows SentencePiece, where the
				// space is ▁ and the stray byte a character of its own.
				// Both round-trip (TestRoundTrip).
				continue
			}
			if b, m := bin.Encode(text, true), model.Encode(text, true); !slices.Equal(b, m) {
				t.Errorf("%s: Encode(%q) = %v and %v", name, text, b, m)
			}
		}
	}
}

// comparablePiece undoes the differences between the two file formats:
// llama2.c's export writes spaces for ▁ and wraps <s> and </s> in newlines.
func comparablePiece(t *SentencePiece, id int) string {
	p := strings.ReplaceAll(t.Piece(id), spaceMark, " ")
	if t.Type(id) == TypeControl {
		p = strings.TrimSpace(p)
	}
	return p
}
