package tokenizer

import "strings"

// TokenBytes returns what id adds to the text after prev, following
// llama2.c's decode(): Control tokens add nothing, <0xNN> pieces add their
// raw byte, and other pieces add their text with ▁ as a space. At the start
// of a sequence or after BOS the leading space is dropped, because it is the
// dummy prefix Encode added rather than part of the text (when Encode adds
// none, nothing is dropped). Invalid ids add nothing.
//
// A ▁ that Encode spelt in byte pieces, because the vocabulary has no ▁
// to merge it into, decodes as the character ▁, as in llama.cpp and
// SentencePiece: such a vocabulary (one with ▁-pieces and no bare ▁)
// does not give back a space before a character that has no ▁-piece.
func (t *SentencePiece) TokenBytes(prev, id int) []byte {
	if !t.valid(id) {
		return nil
	}
	s := t.text[id]
	atStart := prev < 0 || prev == t.bos
	if atStart && t.prefix && t.types[id] != TypeByte {
		s = strings.TrimPrefix(s, " ")
	}
	return []byte(s)
}

// Decode returns the text of ids, so that Decode(Encode(s, bos)) == s.
// Like TokenBytes it never fails: invalid ids are skipped.
func (t *SentencePiece) Decode(ids []int) string {
	var b strings.Builder
	prev := -1
	for _, id := range ids {
		b.Write(t.TokenBytes(prev, id))
		prev = id
	}
	return b.String()
}
