// Package grammar constrains generation to a formal language: a GBNF
// grammar (llama.cpp's format), a regular expression or a JSON Schema is
// compiled into a Grammar over bytes, and a Machine walks it token by
// token, telling which tokens of a vocabulary may come next.
//
// Why bytes: tokenizers cut text anywhere, in the middle of a literal, a
// character class or a UTF-8 character. A grammar over bytes lets a token
// be checked by feeding its bytes one at a time, whatever its boundaries
// are, for byte-level BPE and SentencePiece vocabularies alike. Character
// classes over code points are compiled to alternatives of UTF-8 byte
// sequences when the grammar is built, so the matcher never decodes text.
//
// The recognizer is a pushdown automaton with a set of stacks (the
// grammar may be ambiguous; every live parse is a stack). Stacks are
// hash-consed, so a set of stacks is a short sorted list of ids, and sets
// are interned as states with a transition table per byte; a token mask is
// computed once per state by walking the vocabulary in sorted order
// (Index), pruning every token that shares a dead prefix, and cached.
// Left recursion is rejected when the grammar is built.
package grammar

import (
	"errors"
	"fmt"
	"strings"
)

// Grammar is a compiled grammar over bytes, ready for a Machine. It is
// immutable and safe to share.
type Grammar struct {
	elems []elem    // every alternative of every rule, each ending in an end elem
	sets  []byteSet // the distinct byte sets of eBytes elems
	// classOf partitions the bytes into classes that every set treats
	// alike: a byte's class is all a transition needs to know of it, so
	// a state's transition table has classes entries, not 256 (a JSON
	// Schema's grammar has about 40).
	classOf [256]uint8
	classes int
	rules   [][]int32 // rule → the start of each alternative in elems
	names   []string  // the source's rule names; helper rules have none
	owner   []int32   // rule → the source rule a helper was made for (itself for a source rule)
	root    int32
	src     string // the GBNF text it was built from, when there is one
}

type elemKind uint8

const (
	eEnd   elemKind = iota // end of an alternative
	eBytes                 // one byte out of the set sets[ref]
	eRef                   // the rule ref
)

// elem is one position of an alternative: 8 bytes, so that a grammar at
// its size budget (MaxElems) holds 4 MiB of them.
type elem struct {
	kind elemKind
	ref  int32
}

// byteSet is a set of bytes as a 256-bit bitmap.
type byteSet [4]uint64

func (s *byteSet) add(lo, hi byte) {
	for b := int(lo); b <= int(hi); b++ {
		s[b>>6] |= 1 << (b & 63)
	}
}

func (s *byteSet) has(b byte) bool { return s[b>>6]>>(b&63)&1 != 0 }

// set is the byte set of the eBytes elem at pos.
func (g *Grammar) set(pos int32) *byteSet { return &g.sets[g.elems[pos].ref] }

// name is rule r's name for errors: a helper rule is named after the
// source rule it was made for.
func (g *Grammar) name(r int32) string {
	if o := g.owner[r]; o != r {
		return fmt.Sprintf("%s-%d", g.names[o], r)
	}
	return g.names[r]
}

// Source is the GBNF text the grammar was parsed from (for a JSON Schema
// or a regular expression, the text they compiled to).
func (g *Grammar) Source() string { return g.src }

// Rules is the number of rules after helper rules were added.
func (g *Grammar) Rules() int { return len(g.rules) }

// Match reports whether the whole of text is in the grammar's language.
func (g *Grammar) Match(text string) bool {
	m := NewMachine(g, nil)
	st := m.Start()
	for i := 0; i < len(text) && st != Dead; i++ {
		st = m.Advance(st, text[i])
	}
	return st != Dead && m.CanEnd(st)
}

// The compile budgets. A grammar comes from a request, so what it may
// cost is bounded before it is spent: its text, how deeply it nests (the
// parsers and the lowering recurse once per level), and the elements it
// lowers to (x{0,1000} is a thousand copies of x, and a repetition nests
// in another: the budget is what the copies add up to).
const (
	// MaxSource bounds the text of a grammar, a regular expression or a
	// JSON Schema, in bytes: a megabyte is far beyond any real one.
	MaxSource = 1 << 20
	// MaxNesting bounds groups within groups (parentheses in GBNF and
	// regular expressions, values within values in a JSON Schema's JSON).
	MaxNesting = 1000
	// MaxElems bounds the elements a grammar lowers to: 4 MiB of them,
	// and room for a JSON Schema of a hundred strings of maxLength 1000.
	MaxElems = 1 << 19
)

// ErrBudget is returned (wrapped) when a grammar or its matcher would
// need more than a budget allows: the compile budgets above, or a
// Machine's Limits.
var ErrBudget = errors.New("grammar budget exceeded")

// budgetError names the budget a grammar ran into.
func budgetError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBudget, fmt.Sprintf(format, args...))
}

// builder lowers the syntax tree of a grammar into rules of elems.
type builder struct {
	g     *Grammar
	index map[string]int32 // rule name → rule
	alts  [][][]elem       // rule → alternatives, before flattening
	defs  map[string]*node // named rules of the source
	sets  map[byteSet]int32
	elems int // elems made so far, against MaxElems
}

// build compiles parsed rules, rooted at root.
func build(defs []ruleDef, root, src string) (*Grammar, error) {
	b := &builder{g: &Grammar{src: src}, index: map[string]int32{}, defs: map[string]*node{}, sets: map[byteSet]int32{}}
	for _, d := range defs {
		if _, dup := b.defs[d.name]; dup {
			return nil, fmt.Errorf("grammar: rule %q is defined twice", d.name)
		}
		b.defs[d.name] = d.body
		r := b.rule(-1)
		b.index[d.name] = r
		b.g.names[r] = d.name
	}
	r, ok := b.index[root]
	if !ok {
		return nil, fmt.Errorf("grammar: no %q rule", root)
	}
	b.g.root = r
	for _, d := range defs {
		r := b.index[d.name]
		alts, err := b.alternatives(r, d.body)
		if err != nil {
			return nil, err
		}
		b.alts[r] = alts
	}
	// Flatten.
	g := b.g
	g.rules = make([][]int32, len(b.alts))
	g.elems = make([]elem, 0, b.elems)
	for r, alts := range b.alts {
		g.rules[r] = make([]int32, 0, len(alts))
		for _, a := range alts {
			g.rules[r] = append(g.rules[r], int32(len(g.elems)))
			g.elems = append(g.elems, a...)
			g.elems = append(g.elems, elem{kind: eEnd})
		}
		b.alts[r] = nil
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	g.partition()
	return g, nil
}

// partition computes the byte classes: starting from one class, each set
// splits every class into its bytes inside and outside the set.
func (g *Grammar) partition() {
	var class [256]int16 // all bytes in class 0
	n := 1
	for i := range g.sets {
		set := &g.sets[i]
		var inside [256]int16 // class → the class its bytes inside set move to, plus one
		for b := range 256 {
			if set.has(byte(b)) {
				c := class[b]
				if inside[c] == 0 {
					inside[c] = int16(n) + 1
					n++
				}
				class[b] = inside[c] - 1
			}
		}
		// Renumber densely: a class whose every byte moved is empty now.
		var id [512]int16
		for i := range id {
			id[i] = -1
		}
		n = 0
		for b := range 256 {
			if id[class[b]] < 0 {
				id[class[b]] = int16(n)
				n++
			}
			class[b] = id[class[b]]
		}
	}
	for b := range 256 {
		g.classOf[b] = uint8(class[b])
	}
	g.classes = n
}

// rule makes a new rule for the source rule owner (-1: it is one).
func (b *builder) rule(owner int32) int32 {
	r := int32(len(b.alts))
	if owner < 0 {
		owner = r
	}
	b.alts = append(b.alts, nil)
	b.g.names = append(b.g.names, "")
	b.g.owner = append(b.g.owner, owner)
	return r
}

// grow counts n more elems against MaxElems.
func (b *builder) grow(n int) error {
	if b.elems += n; b.elems > MaxElems {
		return budgetError("the grammar lowers to more than %d elements (MaxElems): bounded repetitions multiply what they repeat, so nest fewer or smaller ones", MaxElems)
	}
	return nil
}

// helper makes a new rule for source rule owner with these alternatives.
func (b *builder) helper(owner int32, alts [][]elem) (int32, error) {
	if err := b.grow(len(alts)); err != nil { // their end elems
		return 0, err
	}
	r := b.rule(owner)
	b.alts[r] = alts
	return r, nil
}

// bytes is the elem of one byte out of set.
func (b *builder) bytes(set byteSet) elem {
	id, ok := b.sets[set]
	if !ok {
		id = int32(len(b.g.sets))
		b.sets[set] = id
		b.g.sets = append(b.g.sets, set)
	}
	return elem{kind: eBytes, ref: id}
}

// alternatives lowers n as the body of rule.
func (b *builder) alternatives(rule int32, n *node) ([][]elem, error) {
	if n.kind != nAlt {
		seq, err := b.sequence(rule, n)
		if err == nil {
			err = b.grow(1)
		}
		return [][]elem{seq}, err
	}
	var alts [][]elem
	for _, k := range n.kids {
		seq, err := b.sequence(rule, k)
		if err == nil {
			err = b.grow(1)
		}
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
	}
	return alts, nil
}

// sequence lowers n as a sequence of elems. It recurses once per level of
// the syntax tree, which the parsers bound (MaxNesting).
func (b *builder) sequence(rule int32, n *node) ([]elem, error) {
	switch n.kind {
	case nSeq:
		var out []elem
		for _, k := range n.kids {
			s, err := b.sequence(rule, k)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	case nAlt:
		alts, err := b.alternatives(rule, n)
		if err != nil {
			return nil, err
		}
		if len(alts) == 1 {
			return alts[0], nil
		}
		return b.ref(b.helper(rule, alts))
	case nLit:
		if err := b.grow(len(n.lit)); err != nil {
			return nil, err
		}
		out := make([]elem, len(n.lit))
		for i, c := range n.lit {
			var set byteSet
			set.add(c, c)
			out[i] = b.bytes(set)
		}
		return out, nil
	case nClass:
		var alts [][]elem
		for _, sets := range utf8Alternatives(n.ranges) {
			if err := b.grow(len(sets)); err != nil {
				return nil, err
			}
			alt := make([]elem, len(sets))
			for i, set := range sets {
				alt[i] = b.bytes(set)
			}
			alts = append(alts, alt)
		}
		switch len(alts) {
		case 0:
			return nil, fmt.Errorf("grammar: rule %q: a character class that matches nothing", b.g.name(rule))
		case 1:
			return alts[0], nil
		}
		return b.ref(b.helper(rule, alts))
	case nRef:
		r, ok := b.index[n.name]
		if !ok {
			return nil, fmt.Errorf("grammar: rule %q refers to undefined rule %q", b.g.name(rule), n.name)
		}
		return []elem{{kind: eRef, ref: r}}, b.grow(1)
	case nRepeat:
		return b.repeat(rule, n)
	}
	return nil, fmt.Errorf("grammar: rule %q: unknown node", b.g.name(rule))
}

// ref is the one elem that refers to rule r.
func (b *builder) ref(r int32, err error) ([]elem, error) {
	if err != nil {
		return nil, err
	}
	return []elem{{kind: eRef, ref: r}}, b.grow(1)
}

// repeat lowers x{min,max}: x min times, then a chain of optional x's
// (max-min of them, or a right-recursive rule when max is unbounded).
// Right recursion keeps the stacks flat: the recursive reference is the
// last element of its alternative, which the matcher treats as a jump.
func (b *builder) repeat(rule int32, n *node) ([]elem, error) {
	item, err := b.sequence(rule, n.kids[0])
	if err != nil {
		return nil, err
	}
	if len(item) != 1 { // one elem per repetition: a reference to the item
		if item, err = b.ref(b.helper(rule, [][]elem{item})); err != nil {
			return nil, err
		}
	}
	// The copies below, counted before they are made: min references,
	// and four elems for each optional one (its alternative, a reference
	// to the next, and the two alternatives' ends).
	if err := b.grow(n.min + 1 + 4*max(n.max-n.min, 1)); err != nil {
		return nil, err
	}
	out := make([]elem, 0, n.min+1)
	for range n.min {
		out = append(out, item...)
	}
	switch {
	case n.max < 0:
		r := b.rule(b.g.owner[rule])
		b.alts[r] = [][]elem{{item[0], {kind: eRef, ref: r}}, nil}
		out = append(out, elem{kind: eRef, ref: r})
	case n.max > n.min:
		tail := int32(-1)
		for range n.max - n.min {
			alt := []elem{item[0]}
			if tail >= 0 {
				alt = append(alt, elem{kind: eRef, ref: tail})
			}
			tail = b.rule(b.g.owner[rule])
			b.alts[tail] = [][]elem{alt, nil}
		}
		out = append(out, elem{kind: eRef, ref: tail})
	}
	return out, nil
}

// nullable reports, for every rule, whether it matches the empty string.
// It is a worklist over the references, linear in the grammar's size
// whatever order the rules come in (a fixpoint of passes over the rules
// would take one pass per link of a chain written backwards).
func (g *Grammar) nullable() []bool {
	null := make([]bool, len(g.rules))
	// For each alternative, the references it still waits on to be
	// nullable; for each rule, the alternatives that refer to it.
	waiting := map[int32]int{}             // alternative start → refs not yet known nullable
	users := make([][]int32, len(g.rules)) // rule → alternative starts that refer to it
	owner := map[int32]int32{}             // alternative start → its rule
	var queue []int32
	for r, alts := range g.rules {
		for _, a := range alts {
			refs, bytes := 0, false
			for pos := a; g.elems[pos].kind != eEnd; pos++ {
				if e := g.elems[pos]; e.kind == eBytes {
					bytes = true
				} else {
					refs++
				}
			}
			if bytes {
				continue
			}
			if refs == 0 {
				if !null[r] {
					null[r] = true
					queue = append(queue, int32(r))
				}
				continue
			}
			waiting[a], owner[a] = refs, int32(r)
			for pos := a; g.elems[pos].kind != eEnd; pos++ {
				users[g.elems[pos].ref] = append(users[g.elems[pos].ref], a)
			}
		}
	}
	for len(queue) > 0 {
		r := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, a := range users[r] {
			if waiting[a]--; waiting[a] == 0 && !null[owner[a]] {
				null[owner[a]] = true
				queue = append(queue, owner[a])
			}
		}
	}
	return null
}

// checkLeftRecursion rejects rules that can reach themselves without
// consuming a byte (directly, through other rules, or through nullable
// prefixes): the pushdown matcher would expand them forever. It walks
// depth first with a stack of its own, so a long chain of rules costs
// memory, not goroutine stack.
func (g *Grammar) checkLeftRecursion() error {
	null := g.nullable()
	const (
		unseen = iota
		active
		done
	)
	mark := make([]uint8, len(g.rules))
	// heads lists, for a rule, the rules it can start with.
	heads := func(r int32) []int32 {
		var out []int32
		for _, a := range g.rules[r] {
			for pos := a; g.elems[pos].kind == eRef; pos++ {
				out = append(out, g.elems[pos].ref)
				if !null[g.elems[pos].ref] {
					break
				}
			}
		}
		return out
	}
	type frame struct {
		rule  int32
		heads []int32
	}
	for start := range g.rules {
		if mark[start] != unseen {
			continue
		}
		path := []frame{{int32(start), heads(int32(start))}}
		mark[start] = active
		for len(path) > 0 {
			top := &path[len(path)-1]
			if len(top.heads) == 0 {
				mark[top.rule] = done
				path = path[:len(path)-1]
				continue
			}
			next := top.heads[0]
			top.heads = top.heads[1:]
			switch mark[next] {
			case active:
				var names []string
				in := false
				for _, f := range path {
					in = in || f.rule == next
					if in {
						names = append(names, g.name(f.rule))
					}
				}
				if len(names) > 8 { // a long cycle: its ends say enough
					names = append(names[:4:4], append([]string{"..."}, names[len(names)-3:]...)...)
				}
				return fmt.Errorf("grammar: left recursion (or a repetition of something that can be empty): %s -> %s", strings.Join(names, " -> "), g.name(next))
			case unseen:
				mark[next] = active
				path = append(path, frame{next, heads(next)})
			}
		}
	}
	return nil
}
