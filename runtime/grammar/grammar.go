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
	"fmt"
	"slices"
	"strings"
)

// Grammar is a compiled grammar over bytes, ready for a Machine. It is
// immutable and safe to share.
type Grammar struct {
	elems []elem    // every alternative of every rule, each ending in an end elem
	rules [][]int32 // rule → the start of each alternative in elems
	names []string  // rule names, for errors (helper rules are named after their parent)
	root  int32
	src   string // the GBNF text it was built from, when there is one
}

type elemKind uint8

const (
	eEnd   elemKind = iota // end of an alternative
	eBytes                 // one byte out of a set
	eRef                   // a rule
)

type elem struct {
	kind elemKind
	ref  int32
	set  byteSet
}

// byteSet is a set of bytes as a 256-bit bitmap.
type byteSet [4]uint64

func (s *byteSet) add(lo, hi byte) {
	for b := int(lo); b <= int(hi); b++ {
		s[b>>6] |= 1 << (b & 63)
	}
}

func (s *byteSet) has(b byte) bool { return s[b>>6]>>(b&63)&1 != 0 }

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

// builder lowers the syntax tree of a grammar into rules of elems.
type builder struct {
	g     *Grammar
	index map[string]int32 // rule name → rule
	alts  [][][]elem       // rule → alternatives, before flattening
	defs  map[string]*node // named rules of the source
}

// build compiles parsed rules, rooted at root.
func build(defs []ruleDef, root, src string) (*Grammar, error) {
	b := &builder{g: &Grammar{src: src}, index: map[string]int32{}, defs: map[string]*node{}}
	for _, d := range defs {
		if _, dup := b.defs[d.name]; dup {
			return nil, fmt.Errorf("grammar: rule %q is defined twice", d.name)
		}
		b.defs[d.name] = d.body
		b.rule(d.name)
	}
	r, ok := b.index[root]
	if !ok {
		return nil, fmt.Errorf("grammar: no %q rule", root)
	}
	b.g.root = r
	for _, d := range defs {
		alts, err := b.alternatives(d.name, d.body)
		if err != nil {
			return nil, err
		}
		b.alts[b.index[d.name]] = alts
	}
	// Flatten.
	g := b.g
	g.rules = make([][]int32, len(b.alts))
	for r, alts := range b.alts {
		for _, a := range alts {
			g.rules[r] = append(g.rules[r], int32(len(g.elems)))
			g.elems = append(g.elems, a...)
			g.elems = append(g.elems, elem{kind: eEnd})
		}
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return g, nil
}

// rule returns the index of the named rule, making it when new.
func (b *builder) rule(name string) int32 {
	if r, ok := b.index[name]; ok {
		return r
	}
	r := int32(len(b.alts))
	b.index[name] = r
	b.alts = append(b.alts, nil)
	b.g.names = append(b.g.names, name)
	return r
}

// helper makes a new rule named after its parent with these alternatives.
func (b *builder) helper(parent string, alts [][]elem) int32 {
	r := b.rule(fmt.Sprintf("%s-%d", parent, len(b.alts)))
	b.alts[r] = alts
	return r
}

// alternatives lowers n as the body of a rule.
func (b *builder) alternatives(rule string, n *node) ([][]elem, error) {
	if n.kind != nAlt {
		seq, err := b.sequence(rule, n)
		return [][]elem{seq}, err
	}
	var alts [][]elem
	for _, k := range n.kids {
		seq, err := b.sequence(rule, k)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
	}
	return alts, nil
}

// sequence lowers n as a sequence of elems.
func (b *builder) sequence(rule string, n *node) ([]elem, error) {
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
		return []elem{{kind: eRef, ref: b.helper(rule, alts)}}, nil
	case nLit:
		out := make([]elem, len(n.lit))
		for i, c := range n.lit {
			out[i].kind = eBytes
			out[i].set.add(c, c)
		}
		return out, nil
	case nClass:
		alts := utf8Alternatives(n.ranges)
		switch len(alts) {
		case 0:
			return nil, fmt.Errorf("grammar: rule %q: a character class that matches nothing", rule)
		case 1:
			return alts[0], nil
		}
		return []elem{{kind: eRef, ref: b.helper(rule, alts)}}, nil
	case nRef:
		if _, ok := b.defs[n.name]; !ok {
			return nil, fmt.Errorf("grammar: rule %q refers to undefined rule %q", rule, n.name)
		}
		return []elem{{kind: eRef, ref: b.index[n.name]}}, nil
	case nRepeat:
		return b.repeat(rule, n)
	}
	return nil, fmt.Errorf("grammar: rule %q: unknown node", rule)
}

// repeat lowers x{min,max}: x min times, then a chain of optional x's
// (max-min of them, or a right-recursive rule when max is unbounded).
// Right recursion keeps the stacks flat: the recursive reference is the
// last element of its alternative, which the matcher treats as a jump.
func (b *builder) repeat(rule string, n *node) ([]elem, error) {
	item, err := b.sequence(rule, n.kids[0])
	if err != nil {
		return nil, err
	}
	if len(item) != 1 { // one elem per repetition: a reference to the item
		item = []elem{{kind: eRef, ref: b.helper(rule, [][]elem{item})}}
	}
	var out []elem
	for range n.min {
		out = append(out, item...)
	}
	switch {
	case n.max < 0:
		r := b.rule(fmt.Sprintf("%s-%d", rule, len(b.alts)))
		b.alts[r] = [][]elem{append(slices.Clone(item), elem{kind: eRef, ref: r}), nil}
		out = append(out, elem{kind: eRef, ref: r})
	case n.max > n.min:
		var tail int32 = -1
		for range n.max - n.min {
			alt := slices.Clone(item)
			if tail >= 0 {
				alt = append(alt, elem{kind: eRef, ref: tail})
			}
			tail = b.helper(rule, [][]elem{alt, nil})
		}
		out = append(out, elem{kind: eRef, ref: tail})
	}
	return out, nil
}

// nullable reports, for every rule, whether it matches the empty string.
func (g *Grammar) nullable() []bool {
	null := make([]bool, len(g.rules))
	for changed := true; changed; {
		changed = false
		for r, alts := range g.rules {
			if null[r] {
				continue
			}
			for _, a := range alts {
				if g.nullableFrom(a, null) {
					null[r], changed = true, true
					break
				}
			}
		}
	}
	return null
}

func (g *Grammar) nullableFrom(pos int32, null []bool) bool {
	for ; g.elems[pos].kind != eEnd; pos++ {
		e := g.elems[pos]
		if e.kind == eBytes || !null[e.ref] {
			return false
		}
	}
	return true
}

// checkLeftRecursion rejects rules that can reach themselves without
// consuming a byte (directly, through other rules, or through nullable
// prefixes): the pushdown matcher would expand them forever.
func (g *Grammar) checkLeftRecursion() error {
	null := g.nullable()
	const (
		unseen = iota
		active
		done
	)
	mark := make([]int, len(g.rules))
	var path []int32
	var visit func(r int32) error
	visit = func(r int32) error {
		switch mark[r] {
		case active:
			var names []string
			for _, p := range path[slices.Index(path, r):] {
				names = append(names, g.names[p])
			}
			return fmt.Errorf("grammar: left recursion (or a repetition of something that can be empty): %s -> %s", strings.Join(names, " -> "), g.names[r])
		case done:
			return nil
		}
		mark[r] = active
		path = append(path, r)
		for _, a := range g.rules[r] {
			for pos := a; g.elems[pos].kind == eRef; pos++ {
				if err := visit(g.elems[pos].ref); err != nil {
					return err
				}
				if !null[g.elems[pos].ref] {
					break
				}
			}
		}
		path = path[:len(path)-1]
		mark[r] = done
		return nil
	}
	for r := range g.rules {
		if err := visit(int32(r)); err != nil {
			return err
		}
	}
	return nil
}
