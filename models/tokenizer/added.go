package tokenizer

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// addedTokens finds added tokens in text: the longest one starting at the
// leftmost position wins, as in the Hugging Face library. A byte trie keeps
// the search linear in the text for vocabularies with thousands of added
// tokens (Gemma has 6,415): each position costs at most as many steps as
// the longest token has bytes, whatever the number of tokens. The trie is
// one map from (node, byte) to node, so its size is a few words per byte
// of the tokens, which a tokenizer file cannot inflate.
type addedTokens struct {
	edges     map[uint64]int32 // node<<8 | byte → child node; the root is node 0
	token     []int32          // per node: index in tokens of the token ending there, -1 if none
	starts    [256]bool        // bytes some token starts with
	byContent map[string]int
	tokens    []addedSpec
}

func newAddedTokens(specs []addedSpec) *addedTokens {
	a := &addedTokens{
		edges:     make(map[uint64]int32),
		token:     []int32{-1},
		byContent: make(map[string]int, len(specs)),
		tokens:    slices.Clone(specs),
	}
	for i, s := range specs {
		if s.content == "" {
			continue
		}
		if _, dup := a.byContent[s.content]; !dup {
			a.byContent[s.content] = s.id
		}
		a.starts[s.content[0]] = true
		n := int32(0)
		for k := 0; k < len(s.content); k++ {
			key := edgeKey(n, s.content[k])
			child, ok := a.edges[key]
			if !ok {
				child = int32(len(a.token))
				a.token = append(a.token, -1)
				a.edges[key] = child
			}
			n = child
		}
		if a.token[n] < 0 {
			a.token[n] = int32(i)
		}
	}
	return a
}

func edgeKey(node int32, c byte) uint64 { return uint64(node)<<8 | uint64(c) }

// longest returns the index in tokens of the longest usable token at the
// start of s and its length, or -1.
func (a *addedTokens) longest(s string, special bool) (int, int) {
	best, bestLen := -1, 0
	if s == "" || !a.starts[s[0]] {
		return best, bestLen
	}
	n := int32(0)
	for k := 0; k < len(s); k++ {
		child, ok := a.edges[edgeKey(n, s[k])]
		if !ok {
			break
		}
		n = child
		if ti := a.token[n]; ti >= 0 && (special || !a.tokens[ti].special) {
			best, bestLen = int(ti), k+1
		}
	}
	return best, bestLen
}

// split cuts text at the added tokens it contains and calls emit for each
// part in order: with id -1 for text to encode, with the token's id for an
// added token. Special tokens are only matched when special is set. first
// is set for a text part at the start of the input. It stops when emit
// returns false.
func (a *addedTokens) split(text string, special bool, emit func(seg string, id int, first bool) bool) {
	if len(a.token) == 1 {
		if text != "" {
			emit(text, -1, true)
		}
		return
	}
	start := 0 // of the pending text part
	for i := 0; i < len(text); {
		ti, n := a.longest(text[i:], special)
		if ti < 0 {
			i++
			continue
		}
		tok := a.tokens[ti]
		end := i + n
		segEnd := i
		if tok.lstrip {
			segEnd = start + len(trimRightSpace(text[start:i]))
		}
		if tok.rstrip {
			end += len(text[end:]) - len(trimLeftSpace(text[end:]))
		}
		if segEnd > start && !emit(text[start:segEnd], -1, start == 0) {
			return
		}
		if !emit(text[i:i+n], tok.id, false) {
			return
		}
		start, i = end, end
	}
	if start < len(text) {
		emit(text[start:], -1, start == 0)
	}
}

func trimRightSpace(s string) string {
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[:len(s)-size]
	}
	return s
}

func trimLeftSpace(s string) string {
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[size:]
	}
	return s
}
