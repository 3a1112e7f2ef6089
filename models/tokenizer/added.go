package tokenizer

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// addedTokens finds added tokens in text: the longest one starting at the
// leftmost position wins, as in the Hugging Face library.
//
// A trie walked from each position costs as many steps per position as the
// text shares with the tokens, which a text can make the length of the
// longest token (a file with a token of a megabyte makes that quadratic).
// So the tokens are reversed into an Aho-Corasick automaton, and the text
// is read backwards through it: the state reached at position i is the
// longest reversed token prefix that ends the reversed text there, and
// its longest match is the longest token that starts at i. Every position
// is thus answered in amortized constant time, whatever the number and
// length of the tokens (Gemma has 6,415). The automaton has at most one
// state per byte of the tokens, of a few words each, so a tokenizer file
// cannot inflate it.
type addedTokens struct {
	states  []acState
	root    [256]int32       // the root's transitions (0: stay at the root)
	more    map[uint64]int32 // state<<8 | byte → next state, for states with more than one
	longest int              // bytes of the longest token

	index     map[string]int32 // content → index in tokens of the first token with it
	byContent map[string]int   // content → id of that token
	tokens    []addedSpec
}

// acState is a state of the automaton. Most states have one transition
// (tokens share little but their first bytes), which is kept in the state.
type acState struct {
	first  int32    // the state after firstC, 0 if none
	fail   int32    // the state of the longest proper suffix
	match  [2]int32 // length of the longest usable token the state ends with, 0 if none: [0] non-special tokens, [1] all
	firstC byte
}

func newAddedTokens(specs []addedSpec) *addedTokens {
	size := 1 // states at most: the root and one per byte of the tokens
	for _, s := range specs {
		size += len(s.content)
	}
	a := &addedTokens{
		states:    append(make([]acState, 0, size), acState{}),
		index:     make(map[string]int32, len(specs)),
		byContent: make(map[string]int, len(specs)),
		tokens:    slices.Clone(specs),
	}
	// The trie of reversed tokens, with each state's depth, parent and
	// byte, which building the failure links needs.
	depth := append(make([]int32, 0, size), 0)
	parent := append(make([]int32, 0, size), -1)
	char := append(make([]byte, 0, size), 0)
	for i, s := range specs {
		if s.content == "" {
			continue
		}
		if _, dup := a.index[s.content]; dup {
			continue // the first token with a content is the one matched
		}
		a.index[s.content], a.byContent[s.content] = int32(i), s.id
		a.longest = max(a.longest, len(s.content))
		n := int32(0)
		for k := len(s.content) - 1; k >= 0; k-- {
			c := s.content[k]
			child, ok := a.child(n, c)
			if !ok {
				child = int32(len(a.states))
				a.states = append(a.states, acState{})
				depth, parent, char = append(depth, depth[n]+1), append(parent, n), append(char, c)
				a.addChild(n, c, child)
			}
			n = child
		}
		a.states[n].match[1] = int32(len(s.content))
		if !s.special {
			a.states[n].match[0] = int32(len(s.content))
		}
	}
	// Failure links and inherited matches, shallow states first: a state's
	// longest match is its own token, or its failure state's longest.
	for _, v := range byDepth(depth) {
		if v == 0 {
			continue
		}
		f := int32(0)
		if p := parent[v]; p != 0 {
			f = a.next(a.states[p].fail, char[v])
		}
		st := &a.states[v]
		st.fail = f
		for k := range st.match {
			if st.match[k] == 0 {
				st.match[k] = a.states[f].match[k]
			}
		}
	}
	return a
}

func edgeKey(state int32, c byte) uint64 { return uint64(state)<<8 | uint64(c) }

// child returns the state after state reads c in the trie, if any.
func (a *addedTokens) child(state int32, c byte) (int32, bool) {
	if state == 0 {
		return a.root[c], a.root[c] != 0
	}
	if st := &a.states[state]; st.first != 0 && st.firstC == c {
		return st.first, true
	}
	child, ok := a.more[edgeKey(state, c)]
	return child, ok
}

func (a *addedTokens) addChild(state int32, c byte, child int32) {
	switch st := &a.states[state]; {
	case state == 0:
		a.root[c] = child
	case st.first == 0:
		st.first, st.firstC = child, c
	default:
		if a.more == nil {
			a.more = make(map[uint64]int32)
		}
		a.more[edgeKey(state, c)] = child
	}
}

// next is the automaton's transition: the state after state reads c.
func (a *addedTokens) next(state int32, c byte) int32 {
	for {
		if child, ok := a.child(state, c); ok {
			return child
		}
		if state == 0 {
			return 0
		}
		state = a.states[state].fail
	}
}

// byDepth lists the states in order of depth (a counting sort).
func byDepth(depth []int32) []int32 {
	maxDepth := int32(0)
	for _, d := range depth {
		maxDepth = max(maxDepth, d)
	}
	start := make([]int32, maxDepth+2)
	for _, d := range depth {
		start[d+1]++
	}
	for d := 1; d < len(start); d++ {
		start[d] += start[d-1]
	}
	order := make([]int32, len(depth))
	for v, d := range depth {
		order[start[d]] = int32(v)
		start[d]++
	}
	return order
}

// scanWindow is how much of the text a scanner answers for at a time,
// at least: its memory is 4 bytes per byte of the window.
const scanWindow = 64 << 10

// scanner answers, for increasing positions of a text, the length of the
// longest usable token that starts there. It reads the text backwards a
// window at a time; a window reads as far past its end as the longest
// token reaches, and is at least that long, so the text is read at most
// twice.
type scanner struct {
	a    *addedTokens
	text string
	k    int     // which acState.match applies
	base int     // text position of lens[0]
	lens []int32 // longest usable token starting at base+j
}

func (a *addedTokens) scanner(text string, special bool) *scanner {
	s := &scanner{a: a, text: text}
	if special {
		s.k = 1
	}
	return s
}

// at returns the length of the longest usable token that starts at i, 0
// if none; i must not decrease between calls.
func (s *scanner) at(i int) int {
	if i < s.base || i >= s.base+len(s.lens) {
		s.window(i)
	}
	return int(s.lens[i-s.base])
}

// window fills lens for the window that starts at i.
func (s *scanner) window(i int) {
	w := max(scanWindow, s.a.longest)
	end := min(len(s.text), i+w)                // of the window
	stop := min(len(s.text), end+s.a.longest-1) // of the text read
	s.base = i
	s.lens = slices.Grow(s.lens[:0], end-i)[:end-i]
	state := int32(0)
	for j := stop - 1; j >= i; j-- {
		if state == 0 {
			state = s.a.root[s.text[j]] // the common case, without a lookup
		} else {
			state = s.a.next(state, s.text[j])
		}
		if j < end {
			s.lens[j-i] = s.a.states[state].match[s.k]
		}
	}
}

// split cuts text at the added tokens it contains and calls emit for each
// part in order: with id -1 for text to encode, with the token's id for an
// added token. Special tokens are only matched when special is set. first
// is set for a text part at the start of the input. It stops when emit
// returns false.
func (a *addedTokens) split(text string, special bool, emit func(seg string, id int, first bool) bool) {
	if len(a.index) == 0 {
		if text != "" {
			emit(text, -1, true)
		}
		return
	}
	start := 0 // of the pending text part
	sc := a.scanner(text, special)
	for i := 0; i < len(text); {
		n := sc.at(i)
		if n == 0 {
			i++
			continue
		}
		tok := a.tokens[a.index[text[i:i+n]]]
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
