package tokenizer

import "strings"

// noMerge is the score llama2.c starts its search for the best merge from:
// pieces scored at or below it are never merged. Keeping it makes Encode
// agree with llama2.c for any vocabulary, not only for typical scores.
const noMerge float32 = -1e10

// Encode splits text into ids the way llama2.c's encode() does:
//
//  1. a non-empty text gets the dummy prefix: the " " piece goes first,
//     so a word at the start is tokenised like a word after a space;
//  2. each UTF-8 character (a lead byte and up to three continuation bytes)
//     becomes its piece, or one <0xNN> piece per byte when it has none;
//  3. the adjacent pair whose concatenation is the piece with the highest
//     score is merged, leftmost on ties, until no pair is a piece.
//
// Bytes without a <0xNN> piece become the unknown token, or are dropped
// when there is none. Unlike in C, text may contain NUL bytes; they are
// encoded like any other byte.
func (t *SentencePiece) Encode(text string, addBOS bool) []int {
	ids := make([]int, 0, len(text)+2)
	if addBOS && t.bos >= 0 {
		ids = append(ids, t.bos)
	}
	if text == "" {
		return ids
	}
	return append(ids, t.merge(t.characters(text, true))...)
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
		ids, prefix = append(ids, t.merge(t.characters(seg, prefix))...), false
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

// characters is steps 1 and 2 of Encode; prefix asks for the dummy prefix.
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

// merge is step 3 of Encode. It keeps, for each adjacent pair, the piece the
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
