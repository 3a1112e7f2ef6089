package grammar

import (
	"bytes"
	"slices"

	"github.com/tessera-llm/tessera/models/tokenizer"
)

// Index is a vocabulary prepared for masking: every token's bytes, sorted,
// with the length of the prefix each shares with the one before it. A
// mask walks the tokens in this order and reuses the states of the shared
// prefix, so the work is about the size of the vocabulary's trie, and a
// prefix the grammar rejects skips every token that starts with it.
type Index struct {
	vocab  int
	ids    []int32 // token ids in byte order (tokens with no bytes left out)
	tokens [][]byte
	lcp    []int32 // bytes token i shares with token i-1
	ends   []int32 // tokens that end a generation (EOS, end of turn)
}

// NewIndex indexes a vocabulary of n tokens: bytes(id) is what token id
// adds to the text (tokens that add nothing, such as control tokens, are
// never allowed), and ends lists the tokens that end a generation, which
// are allowed exactly when the grammar can end.
func NewIndex(n int, bytesOf func(id int) []byte, ends []int) *Index {
	x := &Index{vocab: n}
	for id := range n {
		if b := bytesOf(id); len(b) > 0 {
			x.ids = append(x.ids, int32(id))
			x.tokens = append(x.tokens, b)
		}
	}
	order := make([]int, len(x.ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(x.tokens[a], x.tokens[b]) })
	ids, toks := make([]int32, len(order)), make([][]byte, len(order))
	for i, o := range order {
		ids[i], toks[i] = x.ids[o], x.tokens[o]
	}
	x.ids, x.tokens = ids, toks
	x.lcp = make([]int32, len(toks))
	for i := 1; i < len(toks); i++ {
		a, b := toks[i-1], toks[i]
		k := 0
		for k < len(a) && k < len(b) && a[k] == b[k] {
			k++
		}
		x.lcp[i] = int32(k)
	}
	for _, e := range ends {
		if e >= 0 && e < n {
			x.ends = append(x.ends, int32(e))
		}
	}
	return x
}

// Vocab is the number of token ids the masks cover.
func (x *Index) Vocab() int { return x.vocab }

// MaskWords is the length of a mask: one bit per token id.
func (x *Index) MaskWords() int { return (x.vocab + 31) / 32 }

// Mask returns the tokens allowed in state s as a bitmask (bit id%32 of
// word id/32): tokens whose every byte the grammar takes, and the end
// tokens when it can end. It is computed once per state and shared: the
// caller must not modify it.
func (m *Machine) Mask(s State) []uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s == Dead {
		return make([]uint32, m.idx.MaskWords())
	}
	if mk := m.states[s].mask; mk != nil {
		return mk
	}
	x := m.idx
	mask := make([]uint32, x.MaskWords())
	// path[d] is the state after the first d bytes of the current token;
	// live is how many bytes of the previous token were accepted.
	path := []State{s}
	live := 0
	for i, tok := range x.tokens {
		d := int(x.lcp[i])
		if d > live {
			continue // shares a prefix the grammar already rejected
		}
		path = path[:d+1]
		st := path[d]
		for ; d < len(tok); d++ {
			if st = m.advance(st, tok[d]); st == Dead {
				break
			}
			path = append(path, st)
		}
		live = d
		if d == len(tok) {
			id := x.ids[i]
			mask[id>>5] |= 1 << (id & 31)
		}
	}
	if m.states[s].accept {
		for _, id := range x.ends {
			mask[id>>5] |= 1 << (id & 31)
		}
	}
	m.states[s].mask = mask
	return mask
}

// MaskWith computes the mask of state s for token bytes that differ from
// the index's (the first token after BOS, whose leading space some
// tokenizers drop): each token is fed on its own, uncached.
func (m *Machine) MaskWith(s State, bytesOf func(id int) []byte) []uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	x := m.idx
	mask := make([]uint32, x.MaskWords())
	if s == Dead {
		return mask
	}
	for id := range x.vocab {
		b := bytesOf(id)
		if len(b) == 0 {
			continue
		}
		st := s
		for _, c := range b {
			if st = m.advance(st, c); st == Dead {
				break
			}
		}
		if st != Dead {
			mask[id>>5] |= 1 << (id & 31)
		}
	}
	if m.states[s].accept {
		for _, id := range x.ends {
			mask[id>>5] |= 1 << (id & 31)
		}
	}
	return mask
}

// Allowed reports whether bit id of mask is set.
func Allowed(mask []uint32, id int) bool { return mask[id>>5]>>(id&31)&1 != 0 }

// IsEnd reports whether id is one of the index's end tokens.
func (x *Index) IsEnd(id int) bool { return slices.Contains(x.ends, int32(id)) }

// TokenizerIndex indexes tok's vocabulary: each token's bytes as it adds
// them in the middle of a text (after an ordinary token, so with any
// leading space), and ends as the end tokens.
func TokenizerIndex(tok tokenizer.Tokenizer, ends []int) *Index {
	mid := 0
	for mid == tok.BOS() {
		mid++
	}
	return NewIndex(tok.VocabSize(), func(id int) []byte { return tok.TokenBytes(mid, id) }, ends)
}
