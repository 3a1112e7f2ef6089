package grammar

import (
	"bytes"
	"context"
	"slices"

	"github.com/tessera-llm/tessera/models/tokenizer"
)

// Index is a vocabulary prepared for masking: the trie of every token's
// bytes, its nodes in preorder. A mask walks the nodes in order, one
// transition each, and a byte the grammar rejects skips the node's whole
// subtree (every token that starts with that prefix) in one jump: in a
// state that allows little (after a key, a colon must come), the walk
// touches a few hundred nodes, not the vocabulary.
type Index struct {
	vocab int
	ids   []int32 // token ids in byte order (tokens with no bytes left out)
	ends  []int32 // tokens that end a generation (EOS, end of turn)
	// The trie: node i is the prefix ending in byte nb[i] at depth
	// depth[i] (0 for a first byte); its subtree is nodes i..end[i]-1, and
	// the tokens whose bytes end at it are ids[tokLo[i]:tokHi[i]].
	nb           []byte
	depth        []int32
	end          []int32
	tokLo, tokHi []int32
	maxDepth     int
	// Summaries of the token suffixes under each node (bulk.go), interned:
	// node i's is sums[sum[i]]; maxChars is the longest token in
	// characters; all is the mask of every token with bytes.
	sum      []int32
	sums     []summary
	maxChars int
	all      []uint32
}

// NewIndex indexes a vocabulary of n tokens: bytes(id) is what token id
// adds to the text (tokens that add nothing, such as control tokens, are
// never allowed), and ends lists the tokens that end a generation, which
// are allowed exactly when the grammar can end.
func NewIndex(n int, bytesOf func(id int) []byte, ends []int) *Index {
	x := &Index{vocab: n}
	var all [][]byte
	for id := range n {
		if b := bytesOf(id); len(b) > 0 {
			x.ids = append(x.ids, int32(id))
			all = append(all, b)
		}
	}
	order := make([]int, len(x.ids))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(all[a], all[b]) })
	ids, toks := make([]int32, len(order)), make([][]byte, len(order))
	for i, o := range order {
		ids[i], toks[i] = x.ids[o], all[o]
	}
	x.ids = ids
	var open []int32 // open[k]: the node of depth k on the current path
	closeFrom := func(k int) {
		for _, n := range open[k:] {
			x.end[n] = int32(len(x.nb))
		}
		open = open[:k]
	}
	var prev []byte
	for i, b := range toks {
		l := 0
		for l < len(prev) && l < len(b) && prev[l] == b[l] {
			l++
		}
		closeFrom(l)
		for k := l; k < len(b); k++ {
			open = append(open, int32(len(x.nb)))
			x.nb = append(x.nb, b[k])
			x.depth = append(x.depth, int32(k))
			x.end = append(x.end, 0)
			x.tokLo = append(x.tokLo, int32(i))
			x.tokHi = append(x.tokHi, int32(i))
		}
		last := open[len(b)-1] // tokens with the same bytes share a node
		if x.tokHi[last] == x.tokLo[last] {
			x.tokLo[last] = int32(i)
		}
		x.tokHi[last] = int32(i + 1)
		x.maxDepth = max(x.maxDepth, len(b))
		prev = b
	}
	closeFrom(0)
	x.summarize()
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
// caller must not modify it. The walk stops when ctx is done (its error)
// or when the machine runs out of its budget (Err).
func (m *Machine) Mask(ctx context.Context, s State) ([]uint32, error) {
	m.lock()
	defer m.unlock()
	if m.err != nil {
		return nil, m.err
	}
	if s == Dead {
		return make([]uint32, m.idx.MaskWords()), nil
	}
	if mk := m.states[s].mask; mk != nil {
		return mk, nil
	}
	x := m.idx
	mask := make([]uint32, x.MaskWords())
	// The walk marks tokens by their position in byte order, so that a
	// subtree taken whole is a range of bits.
	if n := (len(x.ids) + 63) / 64; cap(m.sorted) < n {
		m.sorted = make([]uint64, n)
	} else {
		m.sorted = m.sorted[:n]
		clear(m.sorted)
	}
	sorted := m.sorted
	// path[d] is the state after the first d bytes of the current node's prefix.
	path := make([]State, x.maxDepth+1)
	path[0] = s
	for i, steps := 0, 0; i < len(x.nb); steps++ {
		if steps%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		d := x.depth[i]
		p := path[d]
		st := m.advance(p, x.nb[i])
		if m.err != nil {
			return nil, m.err
		}
		if st == Dead {
			i = int(x.end[i]) // no token under this prefix can come
			continue
		}
		if lo, hi := int(x.tokLo[i]), x.tokEnd(i); hi-lo >= bulkMin {
			if sm := x.sums[x.sum[i]]; sm.flags&sumChars != 0 && m.chain(p).takesAll(sm) {
				fillRange(sorted, lo, hi)
				i = int(x.end[i])
				continue
			}
			if m.err != nil {
				return nil, m.err
			}
		}
		path[d+1] = st
		if lo, hi := int(x.tokLo[i]), int(x.tokHi[i]); lo < hi {
			fillRange(sorted, lo, hi)
		}
		i++
	}
	x.toIDs(sorted, mask)
	if m.states[s].accept {
		for _, id := range x.ends {
			mask[id>>5] |= 1 << (id & 31)
		}
	}
	m.keepMask(s, mask)
	return mask, nil
}

// ctxEvery is how many steps of a walk go between looks at its context:
// a look is a lock and a load, a step a few nanoseconds.
const ctxEvery = 1024

// keepMask caches mask as state s's, within the machine's MaskBytes: past
// them, the masks cached so far are dropped (a state met again computes
// its mask again) rather than the machine ended, since masks are a cache.
func (m *Machine) keepMask(s State, mask []uint32) {
	size := int64(4*len(mask)) + 24
	if m.maskUsed+size > m.lim.MaskBytes {
		for _, st := range m.states {
			st.mask = nil
		}
		m.maskUsed = 0
		if size > m.lim.MaskBytes {
			return
		}
	}
	m.states[s].mask = mask
	m.maskUsed += size
}

// HasMask reports whether state s's mask is computed already, so that a
// caller can compute it ahead of need (Mask, in a goroutine).
func (m *Machine) HasMask(s State) bool {
	m.lock()
	defer m.unlock()
	return s == Dead || m.err != nil || m.states[s].mask != nil
}

// MaskWith computes the mask of state s for token bytes that differ from
// the index's (the first token after BOS, whose leading space some
// tokenizers drop): each token is fed on its own, uncached. It stops as
// Mask does.
func (m *Machine) MaskWith(ctx context.Context, s State, bytesOf func(id int) []byte) ([]uint32, error) {
	m.lock()
	defer m.unlock()
	if m.err != nil {
		return nil, m.err
	}
	x := m.idx
	mask := make([]uint32, x.MaskWords())
	if s == Dead {
		return mask, nil
	}
	for id := range x.vocab {
		if id%ctxEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
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
		if m.err != nil {
			return nil, m.err
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
	return mask, nil
}

// bulkMin is the fewest tokens under a node for which a walk asks whether
// the state takes them all (computing the state's chain the first time).
const bulkMin = 2

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
