package tokenizer

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// addedTokens finds added tokens in text: the longest one starting at the
// leftmost position wins, as in the Hugging Face library. A byte trie keeps
// the search linear in the text for vocabularies with thousands of added
// tokens (Gemma has 6,415).
type addedTokens struct {
	nodes     []trieNode
	byContent map[string]int
	tokens    []addedSpec
}

type trieNode struct {
	next  map[byte]int32
	token int32 // index in tokens, -1 if no token ends here
}

func newAddedTokens(specs []addedSpec) *addedTokens {
	a := &addedTokens{
		nodes:     []trieNode{{token: -1}},
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
		n := int32(0)
		for k := 0; k < len(s.content); k++ {
			c := s.content[k]
			child, ok := a.nodes[n].next[c]
			if !ok {
				child = int32(len(a.nodes))
				a.nodes = append(a.nodes, trieNode{token: -1})
				if a.nodes[n].next == nil {
					a.nodes[n].next = make(map[byte]int32, 1)
				}
				a.nodes[n].next[c] = child
			}
			n = child
		}
		if a.nodes[n].token < 0 {
			a.nodes[n].token = int32(i)
		}
	}
	return a
}

// longest returns the index in tokens of the longest usable token at the
// start of s, or -1.
func (a *addedTokens) longest(s string, special bool) (int, int) {
	best, bestLen := -1, 0
	n := int32(0)
	for k := 0; k < len(s); k++ {
		child, ok := a.nodes[n].next[s[k]]
		if !ok {
			break
		}
		n = child
		if ti := a.nodes[n].token; ti >= 0 && (special || !a.tokens[ti].special) {
			best, bestLen = int(ti), k+1
		}
	}
	return best, bestLen
}

// split cuts text at the added tokens it contains and calls emit for each
// part in order: with id -1 for text to encode, with the token's id for an
// added token. Special tokens are only matched when special is set. first
// is set for a text part at the start of the input.
func (a *addedTokens) split(text string, special bool, emit func(seg string, id int, first bool)) {
	if len(a.nodes) == 1 {
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
