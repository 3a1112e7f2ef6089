package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// noMerge is the score llama2.c starts its search for the best merge from:
// pieces scored at or below it are never merged. Keeping it makes Encode
// agree with llama2.c for any vocabulary, not only for typical scores.
const noMerge float32 = -1e10

// Encode splits text into ids. Under SentencePiece's rules, as llama.cpp's
// llm_tokenizer_spm applies them (GGUF and .model vocabularies):
//
//  1. spaces are escaped as ▁ (U+2581), and a non-empty text gets the
//     dummy prefix, a ▁ before it, unless it is turned off (GGUF
//     tokenizer.ggml.add_space_prefix = false), so that a word at the
//     start is tokenised like a word after a space;
//  2. each UTF-8 character is a symbol, whether or not the vocabulary has
//     it as a piece, and so is each byte that is not valid UTF-8 (where
//     llama.cpp takes as many bytes as a lead byte says, which can swallow
//     part of the next character);
//  3. the adjacent pair of symbols whose concatenation is the piece with
//     the highest score is merged, leftmost on ties, until no pair is a
//     piece;
//  4. a symbol is its piece, or when it has none (a character that no
//     merge took in) one <0xNN> piece for each of its UTF-8 bytes, so a
//     ▁ without a piece is <0xE2> <0x96> <0x81>.
//
// Under llama2.c's rules (llama2.c tokenizer.bin files), as its encode()
// does:
//
//  1. a non-empty text gets the dummy prefix only if the vocabulary has a
//     " " piece: that piece goes first;
//  2. each UTF-8 character (a lead byte and up to three continuation bytes)
//     becomes its piece, or one <0xNN> piece per byte when it has none;
//  3. the adjacent pair whose concatenation is the piece with the highest
//     score is merged, leftmost on ties, until no pair is a piece (byte
//     pieces never merge).
//
// The two agree whenever every character of a piece is a piece itself, as
// in vocabularies SentencePiece trains, on valid UTF-8.
//
// In both, bytes without a <0xNN> piece become the unknown token, or are
// dropped when there is none, and pieces scored at or below -1e10 never
// merge. Unlike in C, text may contain NUL bytes; they are encoded like any
// other byte.
func (t *SentencePiece) Encode(text string, addBOS bool) []int {
	ids := make([]int, 0, len(text)+2)
	if addBOS && t.bos >= 0 {
		ids = append(ids, t.bos)
	}
	if text == "" {
		return ids
	}
	return t.appendText(ids, text, true)
}

// appendText appends the ids of text, with the dummy prefix if prefix is
// set and the tokenizer adds one.
func (t *SentencePiece) appendText(ids []int, text string, prefix bool) []int {
	if t.llama2c {
		return append(ids, t.merge(t.characters(text, prefix))...)
	}
	return t.appendSymbols(ids, text, prefix && t.prefix)
}

// EncodeSpecial is Encode for text that holds control and user-defined
// pieces written out, as a chat template renders them (<start_of_turn>,
// <s>): each becomes its id, and the text between them is encoded as
// llama.cpp does, with the dummy prefix after each such piece.
func (t *SentencePiece) EncodeSpecial(text string, addBOS bool) []int {
	var ids []int
	if addBOS && t.bos >= 0 {
		ids = append(ids, t.bos)
	}
	prefix := true
	t.special.split(text, true, func(seg string, id int, _ bool) {
		if id >= 0 {
			ids, prefix = append(ids, id), true
			return
		}
		ids, prefix = t.appendText(ids, seg, prefix), false
	})
	return ids
}

// DecodeSpecial is Decode with control pieces written out as their text.
func (t *SentencePiece) DecodeSpecial(ids []int) string {
	var b strings.Builder
	prev := -1
	for _, id := range ids {
		if t.valid(id) && t.types[id] == TypeControl {
			b.WriteString(t.pieces[id])
		} else {
			b.Write(t.TokenBytes(prev, id))
		}
		prev = id
	}
	return b.String()
}

// appendSymbols encodes text by SentencePiece's rules (Encode). Symbols
// are byte ranges of the escaped text, so adjacent ones concatenate to a
// substring and the lookups do not allocate.
func (t *SentencePiece) appendSymbols(ids []int, text string, prefix bool) []int {
	s := strings.ReplaceAll(text, " ", spaceMark)
	if prefix {
		s = spaceMark + s
	}
	type symbol struct{ start, end int }
	syms := make([]symbol, 0, len(s))
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		syms = append(syms, symbol{i, i + n})
		i += n
	}
	pair := func(a, b symbol) int {
		if id, ok := t.lookup[s[a.start:b.end]]; ok {
			return id
		}
		return -1
	}
	pairs := make([]int, max(len(syms)-1, 0)) // pairs[i]: piece for syms[i]+syms[i+1], or -1
	for i := range pairs {
		pairs[i] = pair(syms[i], syms[i+1])
	}
	for {
		best, bestScore := -1, noMerge
		for i, id := range pairs {
			if id >= 0 && t.scores[id] > bestScore {
				best, bestScore = i, t.scores[id]
			}
		}
		if best < 0 {
			break
		}
		syms[best].end = syms[best+1].end
		syms = append(syms[:best+1], syms[best+2:]...)
		pairs = append(pairs[:best], pairs[best+1:]...)
		if best > 0 {
			pairs[best-1] = pair(syms[best-1], syms[best])
		}
		if best < len(pairs) {
			pairs[best] = pair(syms[best], syms[best+1])
		}
	}
	for _, sym := range syms {
		if id, ok := t.lookup[s[sym.start:sym.end]]; ok {
			ids = append(ids, id)
			continue
		}
		for k := sym.start; k < sym.end; k++ {
			ids = t.appendByte(ids, s[k])
		}
	}
	return ids
}

// characters is steps 1 and 2 of Encode under llama2.c's rules; prefix
// asks for the dummy prefix.
func (t *SentencePiece) characters(text string, prefix bool) []int {
	ids := make([]int, 0, len(text)+1)
	if prefix && t.space >= 0 {
		ids = append(ids, t.space)
	}
	for i := 0; i < len(text); {
		// Group like llama2.c: a byte plus the continuation bytes after it,
		// at most four bytes, whether or not they form valid UTF-8.
		j := i + 1
		for j < len(text) && j-i < 4 && isContinuation(text[j]) {
			j++
		}
		if id, ok := t.lookup[text[i:j]]; ok {
			ids = append(ids, id)
		} else {
			for k := i; k < j; k++ {
				ids = t.appendByte(ids, text[k])
			}
		}
		i = j
	}
	return ids
}

func isContinuation(b byte) bool { return b&0xC0 == 0x80 }

func (t *SentencePiece) appendByte(ids []int, b byte) []int {
	switch {
	case t.byteID[b] >= 0:
		return append(ids, t.byteID[b])
	case t.unk >= 0:
		return append(ids, t.unk)
	}
	return ids
}

// merge is step 3 of Encode under llama2.c's rules. It keeps, for each adjacent pair, the piece the
// pair would merge into, so that a merge only re-examines its two new
// neighbours; finding the best pair is still a linear scan, which keeps the
// tie-breaking obviously identical to llama2.c's.
func (t *SentencePiece) merge(ids []int) []int {
	if len(ids) < 2 {
		return ids
	}
	var buf []byte
	pairs := make([]int, len(ids)-1) // pairs[i]: piece for ids[i]+ids[i+1], or -1
	for i := range pairs {
		pairs[i], buf = t.pair(ids[i], ids[i+1], buf)
	}
	for {
		best, bestScore := -1, noMerge
		for i, id := range pairs {
			if id >= 0 && t.scores[id] > bestScore {
				best, bestScore = i, t.scores[id]
			}
		}
		if best < 0 {
			return ids
		}
		ids[best] = pairs[best]
		ids = append(ids[:best+1], ids[best+2:]...)
		pairs = append(pairs[:best], pairs[best+1:]...)
		if best > 0 {
			pairs[best-1], buf = t.pair(ids[best-1], ids[best], buf)
		}
		if best < len(pairs) {
			pairs[best], buf = t.pair(ids[best], ids[best+1], buf)
		}
	}
}

// pair returns the piece that a followed by b merges into, or -1. buf is
// scratch space, returned for reuse so the lookups do not allocate.
func (t *SentencePiece) pair(a, b int, buf []byte) (int, []byte) {
	if !mergeable(t.types[a]) || !mergeable(t.types[b]) {
		return -1, buf
	}
	buf = append(append(buf[:0], t.text[a]...), t.text[b]...)
	if id, ok := t.lookup[string(buf)]; ok {
		return id, buf
	}
	return -1, buf
}
