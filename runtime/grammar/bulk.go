package grammar

// Whole subtrees at once. A state inside a string or free text accepts
// nearly every token, and walking the trie one node at a time then costs
// a transition for each of its ~330k nodes (3 ms on Qwen3's vocabulary).
// But such a state treats every character of a class alike: any one of
// them leads to the same next state (itself, in an unbounded string; the
// next position, in a string of bounded length). So the index keeps, for
// each trie node, a summary of the token suffixes below it (their ASCII
// bytes, whether they are valid UTF-8 from a character boundary, the most
// characters any has), and the machine keeps, for each such state, the
// chain of states one character at a time and which characters keep to it.
// A subtree whose summary fits the chain is accepted whole, one range of
// the tokens in byte order, without visiting its nodes.

import "math/bits"

// ascii is a set of ASCII bytes.
type ascii [2]uint64

func (a *ascii) add(c byte) { a[c>>6] |= 1 << (c & 63) }

func (a ascii) subsetOf(b ascii) bool { return a[0]&^b[0] == 0 && a[1]&^b[1] == 0 }

func (a ascii) and(b ascii) ascii { return ascii{a[0] & b[0], a[1] & b[1]} }

// Node summary flags.
const (
	sumNonASCII uint8 = 1 << iota // some suffix below has a byte >= 0x80
	sumChars                      // every suffix below is valid UTF-8 from a character boundary (a last character may be cut short)
)

// summary is what the index knows of the token suffixes under a node (its
// own byte included).
type summary struct {
	ascii ascii // their ASCII bytes
	flags uint8
	chars uint8 // the most characters any has (a cut character counts), at most 255
}

// utf8Step is the UTF-8 decoder's state between bytes: how many
// continuation bytes are still due and the range of the next one (0 due:
// at a character boundary; bad: not UTF-8).
type utf8Step struct {
	due    uint8
	lo, hi byte
	bad    bool
}

// next is the decoder's state after byte c.
func (u utf8Step) next(c byte) utf8Step {
	if u.bad {
		return u
	}
	if u.due > 0 {
		if c < u.lo || c > u.hi {
			return utf8Step{bad: true}
		}
		return utf8Step{due: u.due - 1, lo: 0x80, hi: 0xBF}
	}
	switch {
	case c < 0x80:
		return utf8Step{}
	case c >= 0xC2 && c <= 0xDF:
		return utf8Step{due: 1, lo: 0x80, hi: 0xBF}
	case c == 0xE0:
		return utf8Step{due: 2, lo: 0xA0, hi: 0xBF}
	case c == 0xED:
		return utf8Step{due: 2, lo: 0x80, hi: 0x9F}
	case c >= 0xE1 && c <= 0xEF:
		return utf8Step{due: 2, lo: 0x80, hi: 0xBF}
	case c == 0xF0:
		return utf8Step{due: 3, lo: 0x90, hi: 0xBF}
	case c == 0xF4:
		return utf8Step{due: 3, lo: 0x80, hi: 0x8F}
	case c >= 0xF1 && c <= 0xF3:
		return utf8Step{due: 3, lo: 0x80, hi: 0xBF}
	}
	return utf8Step{bad: true}
}

// summarize fills the index's node summaries, interned (few are distinct).
func (x *Index) summarize() {
	n := len(x.nb)
	sums := make([]summary, n)
	parent := make([]int32, n)
	bad := make([]bool, n)      // the bytes of the path to the node are not UTF-8
	boundary := make([]bool, n) // the path before the node ends at a character boundary
	var open []int32            // open[d]: the node at depth d on the current path
	var steps []utf8Step        // steps[d]: the decoder after open[d]
	for i := range n {
		d := int(x.depth[i])
		open, steps = open[:d], steps[:d]
		before := utf8Step{}
		parent[i] = -1
		if d > 0 {
			parent[i], before = open[d-1], steps[d-1]
		}
		after := before.next(x.nb[i])
		boundary[i] = !before.bad && before.due == 0
		bad[i] = after.bad
		open, steps = append(open, int32(i)), append(steps, after)
	}
	// Children follow their parent in preorder: fold them up from the end.
	for i := n - 1; i >= 0; i-- {
		s := &sums[i] // holds its children's fold already
		if c := x.nb[i]; c < 0x80 {
			s.ascii.add(c)
		} else {
			s.flags |= sumNonASCII
		}
		if boundary[i] {
			s.chars = satAdd(s.chars, 1)
		}
		if p := parent[i]; p >= 0 {
			ps := &sums[p]
			ps.ascii[0] |= s.ascii[0]
			ps.ascii[1] |= s.ascii[1]
			ps.flags |= s.flags & sumNonASCII
			ps.chars = max(ps.chars, s.chars)
		}
	}
	// Validity: a node's suffixes are characters when it starts at a
	// boundary and no node below breaks UTF-8.
	broken := make([]bool, n)
	for i := n - 1; i >= 0; i-- {
		broken[i] = broken[i] || bad[i]
		if p := parent[i]; p >= 0 && broken[i] {
			broken[p] = true
		}
	}
	ids := map[summary]int32{}
	x.sum = make([]int32, n)
	for i := range n {
		s := sums[i]
		if boundary[i] && !broken[i] {
			s.flags |= sumChars
		}
		id, ok := ids[s]
		if !ok {
			id = int32(len(x.sums))
			ids[s] = id
			x.sums = append(x.sums, s)
		}
		x.sum[i] = id
		x.maxChars = max(x.maxChars, int(s.chars))
	}
	x.all = make([]uint32, x.MaskWords())
	for _, id := range x.ids {
		x.all[id>>5] |= 1 << (id & 31)
	}
}

func satAdd(a, b uint8) uint8 {
	if a > 255-b {
		return 255
	}
	return a + b
}

// tokEnd is one past the last token (in byte order) under node i.
func (x *Index) tokEnd(i int) int {
	if e := int(x.end[i]); e < len(x.nb) {
		return int(x.tokLo[e])
	}
	return len(x.ids)
}

// charClass is what one character does from a state: the state most
// ASCII bytes lead to, which ASCII bytes lead there, and whether every
// multi-byte character leads there too (through live states).
type charClass struct {
	succ  State
	ascii ascii
	utf8  bool
}

// link is what a chain of k characters from a state allows: the ASCII
// bytes every one of the k steps takes to its successor, and whether every
// step takes every multi-byte character.
type link struct {
	ascii ascii
	utf8  bool
}

// chainInfo is a state's chain: links[k-1] is for k characters; past the
// end, loops says the last link holds for any number (the chain reached a
// state that is its own successor), else nothing does.
type chainInfo struct {
	links []link
	loops bool
}

// class computes (once) the character class of state s.
func (m *Machine) class(s State) *charClass {
	st := m.states[s]
	if st.class != nil {
		return st.class
	}
	c := &charClass{succ: Dead}
	var to [128]State
	type count struct {
		sig uint64 // which stacks take the byte
		s   State
		n   int
	}
	var counts []count // few distinct successors
	tops := m.tops(s)
	for b := range 128 {
		var sig uint64
		if tops != nil {
			for k, set := range tops {
				if set.has(byte(b)) {
					sig |= 1 << k
				}
			}
		}
		k := 0
		for k < len(counts) && (tops == nil || counts[k].sig != sig) {
			k++
		}
		if tops == nil || k == len(counts) {
			// Bytes the same stacks take lead to the same state.
			t := m.advance(s, byte(b))
			k = 0
			for k < len(counts) && counts[k].s != t {
				k++
			}
			if k == len(counts) {
				counts = append(counts, count{sig, t, 0})
			}
		}
		to[b] = counts[k].s
		counts[k].n++
	}
	best := 0
	for _, k := range counts {
		if k.s != Dead && k.n > best {
			c.succ, best = k.s, k.n
		}
	}
	if c.succ != Dead {
		for b := range 128 {
			if to[b] == c.succ {
				c.ascii.add(byte(b))
			}
		}
		c.utf8 = m.allChars(s, c.succ)
	}
	if !m.cache(64) {
		return &charClass{succ: Dead}
	}
	m.states[s].class = c
	return c
}

// tops are the byte sets of s's stacks (nil when more than 64).
func (m *Machine) tops(s State) []*byteSet {
	st := m.states[s]
	if len(st.stacks) > 64 {
		return nil
	}
	out := make([]*byteSet, 0, len(st.stacks))
	for _, id := range st.stacks {
		if id != 0 {
			out = append(out, m.g.set(m.nodes[id].pos))
		}
	}
	return out
}

// same reports whether every byte of lo..hi leads from s to one state:
// each stack of s takes all of them or none.
func (m *Machine) same(s State, lo, hi byte) bool {
	for _, id := range m.states[s].stacks {
		if id == 0 {
			continue
		}
		set := m.g.set(m.nodes[id].pos)
		in := set.has(lo)
		for c := int(lo) + 1; c <= int(hi); c++ {
			if set.has(byte(c)) != in {
				return false
			}
		}
	}
	return true
}

// utf8Leads are the lead bytes of multi-byte characters, in groups that
// the UTF-8 decoder treats alike.
var utf8Leads = [][2]byte{{0xC2, 0xDF}, {0xE0, 0xE0}, {0xE1, 0xEC}, {0xED, 0xED}, {0xEE, 0xEF}, {0xF0, 0xF0}, {0xF1, 0xF3}, {0xF4, 0xF4}}

// allChars reports whether every multi-byte UTF-8 character (and every
// prefix of one) is taken from s, each ending in state to. It advances
// once per range of bytes that s's stacks treat alike.
func (m *Machine) allChars(s, to State) bool {
	var ok func(s State, u utf8Step) bool
	ok = func(s State, u utf8Step) bool {
		if u.due == 0 {
			return s == to
		}
		if !m.same(s, u.lo, u.hi) {
			return false
		}
		t := m.advance(s, u.lo)
		return t != Dead && ok(t, u.next(u.lo))
	}
	for _, g := range utf8Leads {
		if !m.same(s, g[0], g[1]) {
			return false
		}
		t := m.advance(s, g[0])
		if t == Dead || !ok(t, utf8Step{}.next(g[0])) {
			return false
		}
	}
	return true
}

// chain computes (once) state s's chain, up to the index's longest token
// in characters.
func (m *Machine) chain(s State) *chainInfo {
	if ch := m.states[s].chain; ch != nil {
		return ch
	}
	ch := &chainInfo{}
	cur := link{ascii: ascii{^uint64(0), ^uint64(0)}, utf8: true}
	q := s
	for len(ch.links) < m.idx.maxChars {
		c := m.class(q)
		if c.succ == Dead {
			break
		}
		cur = link{ascii: cur.ascii.and(c.ascii), utf8: cur.utf8 && c.utf8}
		if cur.ascii == (ascii{}) && !cur.utf8 {
			break
		}
		ch.links = append(ch.links, cur)
		if c.succ == q { // its own successor: every further step is the same
			ch.loops = true
			break
		}
		q = c.succ
	}
	if !m.cache(48 + 24*int64(len(ch.links))) {
		return &chainInfo{}
	}
	m.states[s].chain = ch
	return ch
}

// takesAll reports whether every token suffix summarized by sm is taken
// from state s.
func (ch *chainInfo) takesAll(sm summary) bool {
	if sm.flags&sumChars == 0 || sm.chars == 0 {
		return false
	}
	k := int(sm.chars)
	if k > len(ch.links) {
		if !ch.loops {
			return false
		}
		k = len(ch.links)
	}
	l := ch.links[k-1]
	return sm.ascii.subsetOf(l.ascii) && (sm.flags&sumNonASCII == 0 || l.utf8)
}

// fillRange sets bits lo..hi-1 of a bitset.
func fillRange(b []uint64, lo, hi int) {
	for lo < hi {
		w, off := lo>>6, lo&63
		n := min(64-off, hi-lo)
		var m uint64 = ^uint64(0)
		if n < 64 {
			m = (1<<n - 1) << off
		}
		b[w] |= m
		lo += n
	}
}

// toIDs turns a bitset over tokens in byte order into a mask over ids:
// it walks the fewer of the set and the clear bits.
func (x *Index) toIDs(sorted []uint64, mask []uint32) {
	n := len(x.ids)
	ones := 0
	for _, w := range sorted {
		ones += bits.OnesCount64(w)
	}
	if ones <= n/2 {
		for w, v := range sorted {
			for ; v != 0; v &= v - 1 {
				id := x.ids[w<<6+bits.TrailingZeros64(v)]
				mask[id>>5] |= 1 << (id & 31)
			}
		}
		return
	}
	copy(mask, x.all)
	for w, v := range sorted {
		v = ^v
		if rest := n - w<<6; rest < 64 {
			v &= 1<<rest - 1
		}
		for ; v != 0; v &= v - 1 {
			id := x.ids[w<<6+bits.TrailingZeros64(v)]
			mask[id>>5] &^= 1 << (id & 31)
		}
	}
}
