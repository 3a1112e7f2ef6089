package tokenizer

import "sync"

// merger applies ranked merges to the symbols of one word the way the
// Hugging Face library does: the adjacent pair with the lowest rank is
// merged first, the leftmost on ties, and a queued pair is skipped when a
// neighbouring merge has changed it. Symbols form a linked list over a
// slice and candidates wait in a binary heap, so a word of n symbols takes
// O(n log n).
type merger struct {
	syms []mergeSym
	heap []candidate
	out  []int32
}

type mergeSym struct {
	id         int32
	prev, next int32 // indices in syms, -1 at the ends
	gone       bool  // merged into its left neighbour
}

type candidate struct {
	rank, pos, id int32 // merge rank, left symbol, product
}

func (c candidate) less(d candidate) bool {
	return c.rank < d.rank || c.rank == d.rank && c.pos < d.pos
}

var mergers = sync.Pool{New: func() any { return new(merger) }}

func getMerger() *merger { return mergers.Get().(*merger) }

func putMerger(m *merger) {
	m.syms, m.heap, m.out = m.syms[:0], m.heap[:0], m.out[:0]
	mergers.Put(m)
}

func (m *merger) push(id int32) {
	n := int32(len(m.syms))
	m.syms = append(m.syms, mergeSym{id: id, prev: n - 1, next: n + 1})
}

// pushUnknown adds the unknown token, fused with an unknown token just
// before it when the vocabulary asks for that; without an unknown token
// the text is dropped.
func (m *merger) pushUnknown(t *BPE) {
	if t.unk < 0 {
		return
	}
	if t.fuseUnk && len(m.syms) > 0 && m.syms[len(m.syms)-1].id == int32(t.unk) {
		return
	}
	m.push(int32(t.unk))
}

// merge runs the merges and returns the final ids; the slice is reused by
// the next word. It gives up (false) when l says to stop.
func (m *merger) merge(l *limit, table map[uint64]merge) ([]int32, bool) {
	if len(m.syms) == 0 {
		return nil, true
	}
	m.syms[len(m.syms)-1].next = -1
	for i := 0; i+1 < len(m.syms); i++ {
		m.queue(table, int32(i))
	}
	for len(m.heap) > 0 {
		if !l.step() {
			return nil, false
		}
		c := m.pop()
		a := &m.syms[c.pos]
		if a.gone || a.next < 0 {
			continue
		}
		b := &m.syms[a.next]
		// The pair may have changed since it was queued; like the Hugging
		// Face library, accept it if it still merges into the same piece.
		if cur, ok := table[pairKey(a.id, b.id)]; !ok || cur.id != c.id {
			continue
		}
		a.id = c.id
		b.gone = true
		a.next = b.next
		if a.next >= 0 {
			m.syms[a.next].prev = c.pos
		}
		if a.prev >= 0 {
			m.queue(table, a.prev)
		}
		if a.next >= 0 {
			m.queue(table, c.pos)
		}
	}
	for i := int32(0); i >= 0; i = m.syms[i].next {
		m.out = append(m.out, m.syms[i].id)
	}
	return m.out, true
}

// queue adds the pair starting at symbol i if it merges.
func (m *merger) queue(table map[uint64]merge, i int32) {
	s := &m.syms[i]
	if s.next < 0 {
		return
	}
	if mg, ok := table[pairKey(s.id, m.syms[s.next].id)]; ok {
		m.heap = append(m.heap, candidate{rank: mg.rank, pos: i, id: mg.id})
		m.up(len(m.heap) - 1)
	}
}

func (m *merger) up(j int) {
	h := m.heap
	for j > 0 {
		p := (j - 1) / 2
		if !h[j].less(h[p]) {
			break
		}
		h[j], h[p] = h[p], h[j]
		j = p
	}
}

func (m *merger) pop() candidate {
	h := m.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for j := 0; ; {
		l, r, small := 2*j+1, 2*j+2, j
		if l < len(h) && h[l].less(h[small]) {
			small = l
		}
		if r < len(h) && h[r].less(h[small]) {
			small = r
		}
		if small == j {
			break
		}
		h[j], h[small] = h[small], h[j]
		j = small
	}
	m.heap = h
	return top
}
