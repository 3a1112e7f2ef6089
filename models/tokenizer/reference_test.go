package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The encoders as they were before their merge loops were given a heap
// (ed82401): obviously right and quadratic. The agreement tests and
// FuzzEncode hold the fast encoders to them on random and adversarial
// text, short enough for a quadratic loop.

// referenceEncode is SentencePiece.Encode before the heap.
func (t *SentencePiece) referenceEncode(text string, addBOS bool) []int {
	ids := make([]int, 0, len(text)+2)
	if addBOS && t.bos >= 0 {
		ids = append(ids, t.bos)
	}
	if text == "" {
		return ids
	}
	return t.referenceAppendText(ids, text, true)
}

// referenceEncodeSpecial is SentencePiece.EncodeSpecial before the heap.
func (t *SentencePiece) referenceEncodeSpecial(text string, addBOS bool) []int {
	var ids []int
	if addBOS && t.bos >= 0 {
		ids = append(ids, t.bos)
	}
	prefix := true
	t.special.split(text, true, func(seg string, id int, _ bool) bool {
		if id >= 0 {
			ids, prefix = append(ids, id), true
			return true
		}
		ids, prefix = t.referenceAppendText(ids, seg, prefix), false
		return true
	})
	return ids
}

func (t *SentencePiece) referenceAppendText(ids []int, text string, prefix bool) []int {
	if t.llama2c {
		return append(ids, t.referenceMerge(t.characters(text, prefix))...)
	}
	return t.referenceAppendSymbols(ids, text, prefix && t.prefix)
}

func (t *SentencePiece) referenceAppendSymbols(ids []int, text string, prefix bool) []int {
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
	pairs := make([]int, max(len(syms)-1, 0))
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

func (t *SentencePiece) referenceMerge(ids []int) []int {
	if len(ids) < 2 {
		return ids
	}
	var buf []byte
	pairs := make([]int, len(ids)-1)
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

// referenceEncode is WordPiece.Encode before its special tokens were
// found with a trie and its text cut into chunks: each special token is
// searched for in the rest of the text at every step, quadratic in the
// number of special tokens the text holds.
func (t *WordPiece) referenceEncode(text string, addBOS bool) []int {
	var specials []string
	for _, a := range t.special.tokens {
		specials = append(specials, a.content)
	}
	var ids []int
	for text != "" {
		at, tok := len(text), ""
		for _, s := range specials {
			if i := strings.Index(text, s); i >= 0 && (i < at || i == at && len(s) > len(tok)) {
				at, tok = i, s
			}
		}
		for _, w := range referenceWords(t.normalize(text[:at])) {
			ids = t.referencePiece(w, ids)
		}
		if tok == "" {
			break
		}
		ids = append(ids, t.special.byContent[tok])
		text = text[at+len(tok):]
	}
	if addBOS {
		ids = append(append([]int{t.cls}, ids...), t.sep)
	}
	return ids
}

func referenceWords(s string) []string {
	var words []string
	start := -1
	for i, r := range s {
		switch {
		case isWhitespace(r):
			if start >= 0 {
				words = append(words, s[start:i])
			}
			start = -1
		case isPunct(r):
			if start >= 0 {
				words = append(words, s[start:i])
			}
			words = append(words, string(r))
			start = -1
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		words = append(words, s[start:])
	}
	return words
}

func (t *WordPiece) referencePiece(word string, ids []int) []int {
	if utf8.RuneCountInString(word) > t.opts.MaxChars {
		return append(ids, t.unk)
	}
	n := len(ids)
	for start := 0; start < len(word); {
		vocab := t.words
		if start > 0 {
			vocab = t.conts
		}
		end, id := len(word), -1
		for ; end > start; end-- {
			if end < len(word) && !utf8.RuneStart(word[end]) {
				continue
			}
			if v, ok := vocab[word[start:end]]; ok {
				id = v
				break
			}
		}
		if id < 0 {
			return append(ids[:n], t.unk)
		}
		ids = append(ids, id)
		start = end
	}
	return ids
}

// referencePretokenize is BPE's pre-tokenization before it yielded words
// one at a time: each pre-tokenizer takes the whole list of words the one
// before made.
func referencePretokenize(pre []preTokenizer, s string, first bool) []string {
	words := []string{s}
	for _, p := range pre {
		words = referenceSplit(p, words, first)
	}
	return words
}

func referenceSplit(p preTokenizer, words []string, first bool) []string {
	switch p := p.(type) {
	case splitPre:
		var out []string
		for _, w := range words {
			out = referenceSplitOne(p, out, w)
		}
		return out
	case byteLevelPre:
		if p.addPrefixSpace {
			for i, w := range words {
				if !strings.HasPrefix(w, " ") {
					words[i] = " " + w
				}
			}
		}
		if p.regex != nil {
			words = referenceSplit(*p.regex, words, first)
		}
		return words
	case digitsPre:
		var out []string
		for _, w := range words {
			start := 0
			prevDigit := false
			for i, r := range w {
				d := unicode.IsNumber(r)
				if i > start && (d != prevDigit || d && p.individual) {
					out = append(out, w[start:i])
					start = i
				}
				prevDigit = d
			}
			if start < len(w) {
				out = append(out, w[start:])
			}
		}
		return out
	case metaspacePre:
		var out []string
		for i, w := range words {
			w = strings.ReplaceAll(w, " ", p.replacement)
			if p.prepend == "always" || p.prepend == "first" && first && i == 0 {
				if !strings.HasPrefix(w, p.replacement) {
					w = p.replacement + w
				}
			}
			if !p.splitWords {
				out = append(out, w)
				continue
			}
			out = referenceSplitOne(splitPre{m: literalMatcher{p.replacement}, behavior: splitMergedWithNext}, out, w)
		}
		return out
	}
	panic(fmt.Sprintf("no reference for %T", p))
}

func referenceSplitOne(p splitPre, out []string, w string) []string {
	type piece struct {
		start, end int
		match      bool
	}
	var pieces []piece
	last := 0
	p.m.matches(w, func(start, end int) bool {
		if start > last {
			pieces = append(pieces, piece{last, start, false})
		}
		pieces = append(pieces, piece{start, end, true})
		last = end
		return true
	})
	if last < len(w) {
		pieces = append(pieces, piece{last, len(w), false})
	}
	if p.invert {
		for i := range pieces {
			pieces[i].match = !pieces[i].match
		}
	}
	switch p.behavior {
	case splitIsolated:
		for _, pc := range pieces {
			out = append(out, w[pc.start:pc.end])
		}
	case splitRemoved:
		for _, pc := range pieces {
			if !pc.match {
				out = append(out, w[pc.start:pc.end])
			}
		}
	case splitMergedWithPrevious:
		start := 0
		for i, pc := range pieces {
			if pc.match || i == len(pieces)-1 {
				if pc.end > start {
					out = append(out, w[start:pc.end])
				}
				start = pc.end
			}
		}
	case splitMergedWithNext:
		start := 0
		for i, pc := range pieces {
			if pc.match && pc.start > start {
				out = append(out, w[start:pc.start])
				start = pc.start
			}
			if i == len(pieces)-1 && pc.end > start {
				out = append(out, w[start:pc.end])
			}
		}
	case splitContiguous:
		start := 0
		for i, pc := range pieces {
			if i > 0 && pc.match != pieces[i-1].match {
				out = append(out, w[start:pc.start])
				start = pc.start
			}
			if i == len(pieces)-1 {
				out = append(out, w[start:pc.end])
			}
		}
	}
	return out
}

// referenceEncode is BPE's encoding before words were yielded one at a
// time: the whole list of words of each segment first, then their merges
// (which have always used a heap).
func (t *BPE) referenceEncode(text string, addSpecial, parseSpecial bool) []int {
	var ids []int
	if addSpecial {
		ids = append(ids, t.prefix...)
	}
	var l limit
	t.added.split(text, parseSpecial, func(seg string, id int, first bool) bool {
		if id >= 0 {
			ids = append(ids, id)
			return true
		}
		for _, n := range t.normalizers {
			seg = n.normalize(seg, first)
		}
		if seg == "" {
			return true
		}
		for _, w := range referencePretokenize(t.pre, seg, first) {
			ids = t.encodeWord(&l, ids, w)
		}
		return true
	})
	if addSpecial {
		ids = append(ids, t.suffix...)
	}
	return ids
}

// referenceSplit is addedTokens.split by its definition: at each position,
// every usable token is tried, and the longest that starts there is taken
// (the first in the list among equal ones); the rest is as split does.
func (a *addedTokens) referenceSplit(text string, special bool, emit func(seg string, id int, first bool)) {
	usable := make([]bool, len(a.tokens))
	for k, tok := range a.tokens {
		usable[k] = tok.content != "" && (special || !a.tokens[a.index[tok.content]].special)
	}
	start := 0
	for i := 0; i < len(text); {
		best := -1
		for k, tok := range a.tokens {
			if usable[k] && strings.HasPrefix(text[i:], tok.content) && (best < 0 || len(tok.content) > len(a.tokens[best].content)) {
				best = k
			}
		}
		if best < 0 {
			i++
			continue
		}
		tok := a.tokens[best]
		n := len(tok.content)
		end, segEnd := i+n, i
		if tok.lstrip {
			segEnd = start + len(trimRightSpace(text[start:i]))
		}
		if tok.rstrip {
			end += len(text[end:]) - len(trimLeftSpace(text[end:]))
		}
		if segEnd > start {
			emit(text[start:segEnd], -1, start == 0)
		}
		emit(text[i:i+n], tok.id, false)
		start, i = end, end
	}
	if start < len(text) {
		emit(text[start:], -1, start == 0)
	}
}
