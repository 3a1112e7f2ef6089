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
	return t.encodeBounded(&limit{}, text, addBOS, false)
}

// EncodeSpecial is Encode for text that holds control and user-defined
// pieces written out, as a chat template renders them (<start_of_turn>,
// <s>): each becomes its id, and the text between them is encoded as
// llama.cpp does, with the dummy prefix after each such piece.
func (t *SentencePiece) EncodeSpecial(text string, addBOS bool) []int {
	return t.encodeBounded(&limit{}, text, addBOS, true)
}

// encodeBounded is Encode, or EncodeSpecial when special is set, within l.
func (t *SentencePiece) encodeBounded(l *limit, text string, addBOS, special bool) []int {
	ids := make([]int, 0, idsCap(len(text), l))
	if addBOS && t.bos >= 0 {
		ids = append(ids, t.bos)
	}
	if !special {
		if text != "" {
			ids = t.appendText(l, ids, text, true)
		}
	} else {
		prefix := true
		t.special.split(text, true, func(seg string, id int, _ bool) bool {
			if id >= 0 {
				ids, prefix = append(ids, id), true
				return l.step() && l.fits(len(ids))
			}
			ids, prefix = t.appendText(l, ids, seg, prefix), false
			return l.err == nil
		})
	}
	if l.err != nil || !l.fits(len(ids)) {
		return nil
	}
	return ids
}

// appendText appends the ids of text, with the dummy prefix if prefix is
// set and the tokenizer adds one. It gives up (nil, with l.err set) before
// merging anything when the text cannot fit in l's bound.
func (t *SentencePiece) appendText(l *limit, ids []int, text string, prefix bool) []int {
	if l.bounded() && !l.fits(len(ids)+t.minTokens(text, prefix)) {
		return nil
	}
	if t.llama2c {
		return t.merge(l, ids, t.characters(text, prefix))
	}
	return t.appendSymbols(l, ids, text, prefix && t.prefix)
}

// minTokens is a lower bound of the number of ids appendText gives text,
// found without merging: every id stands for at most t.longest bytes of
// the text as the vocabulary writes it (spaces as ▁ under SentencePiece's
// rules), or for one byte when spelt in byte pieces, unless bytes without
// a piece can be dropped, when nothing is certain.
func (t *SentencePiece) minTokens(text string, prefix bool) int {
	if t.drops {
		return 0
	}
	n := len(text)
	switch {
	case t.llama2c:
		if prefix && t.space >= 0 {
			n++
		}
	default:
		n += (len(spaceMark) - 1) * strings.Count(text, " ")
		if prefix && t.prefix {
			n += len(spaceMark)
		}
	}
	return (n + t.longest - 1) / t.longest
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

// spmSymbol is a run of the escaped text under SentencePiece's rules, in a
// list: prev and next are indices of the neighbours, -1 at the ends. A
// symbol merged into its left neighbour is empty (start == end).
type spmSymbol struct{ start, end, prev, next int }

// spmPair is a candidate merge of two adjacent symbols. size is their
// joint length when it was queued: if either has changed since, the
// candidate is stale and skipped (llama.cpp's llm_tokenizer_spm does the
// same).
type spmPair struct {
	score             float32
	left, right, size int
}

// less puts the highest score first, and the leftmost pair on ties, the
// order in which the scan over every pair used to pick them.
func (p spmPair) less(q spmPair) bool {
	return p.score > q.score || p.score == q.score && p.left < q.left
}

// appendSymbols encodes text by SentencePiece's rules (Encode). Symbols
// are byte ranges of the escaped text, so adjacent ones concatenate to a
// substring and the lookups do not allocate; candidate merges wait in a
// heap, so a text of n characters takes O(n log n).
func (t *SentencePiece) appendSymbols(l *limit, ids []int, text string, prefix bool) []int {
	s := strings.ReplaceAll(text, " ", spaceMark)
	if prefix {
		s = spaceMark + s
	}
	syms := make([]spmSymbol, 0, len(s))
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		syms = append(syms, spmSymbol{i, i + n, len(syms) - 1, len(syms) + 1})
		i += n
	}
	if len(syms) == 0 {
		return ids
	}
	syms[len(syms)-1].next = -1
	var queue []spmPair
	try := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		start, end := syms[left].start, syms[right].end
		if end-start > t.longest {
			return // no piece is that long
		}
		if id, ok := t.lookup[s[start:end]]; ok && t.scores[id] > noMerge {
			queue = heapPush(queue, spmPair{t.scores[id], left, right, end - start})
		}
	}
	for i := 1; i < len(syms); i++ {
		if !l.step() {
			return nil
		}
		try(i-1, i)
	}
	for len(queue) > 0 {
		if !l.step() {
			return nil
		}
		var p spmPair
		p, queue = heapPop(queue)
		a, b := &syms[p.left], &syms[p.right]
		if a.start == a.end || b.start == b.end || a.end-a.start+b.end-b.start != p.size {
			continue
		}
		a.end, a.next = b.end, b.next
		b.end = b.start
		if a.next >= 0 {
			syms[a.next].prev = p.left
		}
		try(a.prev, p.left)
		try(p.left, a.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		sym := syms[i]
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

// l2cSymbol is an id in the list merge works on; id is -1 once merged into
// its left neighbour.
type l2cSymbol struct{ id, prev, next int }

// l2cPair is a candidate merge of adjacent symbols: a and b are their ids
// when it was queued, so that a candidate whose symbols have changed since
// is recognised as stale.
type l2cPair struct {
	score                   float32
	left, right, a, b, into int
}

// less puts the highest score first, and the leftmost pair on ties, as
// llama2.c's scan does.
func (p l2cPair) less(q l2cPair) bool {
	return p.score > q.score || p.score == q.score && p.left < q.left
}

// merge is step 3 of Encode under llama2.c's rules: it appends to ids the
// result of merging the pieces in chars. llama2.c scans every pair for the
// best merge each time, which is quadratic; here candidates wait in a heap
// ordered as that scan would pick them, so the ids are the same.
func (t *SentencePiece) merge(l *limit, ids, chars []int) []int {
	syms := make([]l2cSymbol, len(chars))
	for i, id := range chars {
		syms[i] = l2cSymbol{id, i - 1, i + 1}
	}
	if len(syms) == 0 {
		return ids
	}
	syms[len(syms)-1].next = -1
	var (
		queue []l2cPair
		buf   []byte
	)
	try := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		a, b := syms[left].id, syms[right].id
		var into int
		if into, buf = t.pair(a, b, buf); into >= 0 && t.scores[into] > noMerge {
			queue = heapPush(queue, l2cPair{t.scores[into], left, right, a, b, into})
		}
	}
	for i := 1; i < len(syms); i++ {
		if !l.step() {
			return nil
		}
		try(i-1, i)
	}
	for len(queue) > 0 {
		if !l.step() {
			return nil
		}
		var p l2cPair
		p, queue = heapPop(queue)
		a, b := &syms[p.left], &syms[p.right]
		if a.id != p.a || b.id != p.b || a.next != p.right {
			continue
		}
		a.id, a.next = p.into, b.next
		b.id = -1
		if a.next >= 0 {
			syms[a.next].prev = p.left
		}
		try(a.prev, p.left)
		try(p.left, a.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	return ids
}

// pair returns the piece that a followed by b merges into, or -1. buf is
// scratch space, returned for reuse so the lookups do not allocate.
func (t *SentencePiece) pair(a, b int, buf []byte) (int, []byte) {
	if !mergeable(t.types[a]) || !mergeable(t.types[b]) {
		return -1, buf
	}
	if len(t.text[a])+len(t.text[b]) > t.longest {
		return -1, buf // no piece is that long
	}
	buf = append(append(buf[:0], t.text[a]...), t.text[b]...)
	if id, ok := t.lookup[string(buf)]; ok {
		return id, buf
	}
	return -1, buf
}
