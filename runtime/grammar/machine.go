package grammar

import (
	"slices"
	"sync"
	"unsafe"
)

// State is a state of a Machine: the set of parses alive after some
// bytes. States are small integers, so a sequence's matcher is one State.
type State int32

// Dead is the state after bytes the grammar cannot take.
const Dead State = -1

// Machine runs a Grammar over bytes and, given an Index, computes token
// masks. It interns every stack and state it meets and caches transitions
// and masks, so a mask is computed once per state however many sequences
// (or requests) reach it. It is safe for concurrent use.
//
// A parse is a stack of positions in the grammar's elems. Stacks are
// hash-consed nodes (pos, next): "at pos; when this alternative ends,
// continue with node next"; node 0 is the empty stack, a finished parse.
// A reference that is the last element of its alternative continues
// straight with next (a tail call), so repetitions and right recursion
// never grow a stack. Only stacks whose top is a byte set (or node 0) are
// kept in a state: the references above them are expanded eagerly.
type Machine struct {
	g   *Grammar
	idx *Index

	mu      sync.Mutex
	nodes   []stackNode
	nodeIDs map[stackNode]int32
	closure [][]int32 // node → the byte-set tops (and 0) it expands to; nil: not yet
	states  []*state
	stateID map[string]State
	start   State
	sorted  []uint64 // Mask's scratch bitset
}

type stackNode struct{ pos, next int32 }

type state struct {
	stacks []int32    // sorted node ids, byte-set tops or 0
	next   [256]State // transitions: 0 not computed yet, else the State + 1 (Dead + 1 for dead)
	mask   []uint32   // the token mask, once computed
	accept bool       // node 0 is in stacks: the grammar may end here
	more   bool       // some stack can take a byte
	class  *charClass // what one character does from here, once asked (bulk.go)
	chain  *chainInfo // and a chain of them
}

// NewMachine prepares g for matching over idx's vocabulary (idx may be
// nil for byte matching only).
func NewMachine(g *Grammar, idx *Index) *Machine {
	m := &Machine{g: g, idx: idx, nodeIDs: map[stackNode]int32{}, stateID: map[string]State{}}
	m.node(stackNode{-1, -1}) // node 0: the empty stack
	var tops []int32
	for _, a := range g.rules[g.root] {
		tops = append(tops, m.expand(m.node(stackNode{a, 0}))...)
	}
	m.start = m.intern(tops)
	return m
}

// Grammar is the grammar the machine runs.
func (m *Machine) Grammar() *Grammar { return m.g }

// Index is the vocabulary the machine masks, or nil.
func (m *Machine) Index() *Index { return m.idx }

// Start is the state before any byte.
func (m *Machine) Start() State { return m.start }

func (m *Machine) node(n stackNode) int32 {
	if id, ok := m.nodeIDs[n]; ok {
		return id
	}
	id := int32(len(m.nodes))
	m.nodes = append(m.nodes, n)
	m.closure = append(m.closure, nil)
	m.nodeIDs[n] = id
	return id
}

// expand returns the stacks node id stands for once the references at its
// top are expanded: those whose top is a byte set, and 0 if it can end.
func (m *Machine) expand(id int32) []int32 {
	if id == 0 {
		return []int32{0}
	}
	if c := m.closure[id]; c != nil {
		return c
	}
	n := m.nodes[id]
	e := &m.g.elems[n.pos]
	var out []int32
	switch e.kind {
	case eBytes:
		out = []int32{id}
	case eEnd:
		out = m.expand(n.next)
	case eRef:
		cont := n.next
		if m.g.elems[n.pos+1].kind != eEnd {
			cont = m.node(stackNode{n.pos + 1, n.next})
		}
		for _, a := range m.g.rules[e.ref] {
			out = append(out, m.expand(m.node(stackNode{a, cont}))...)
		}
		slices.Sort(out)
		out = slices.Compact(out)
	}
	m.closure[id] = out
	return out
}

// intern returns the state of a set of stacks.
func (m *Machine) intern(stacks []int32) State {
	if len(stacks) == 0 {
		return Dead
	}
	slices.Sort(stacks)
	stacks = slices.Compact(stacks)
	key := unsafe.String((*byte)(unsafe.Pointer(&stacks[0])), 4*len(stacks))
	if s, ok := m.stateID[key]; ok {
		return s
	}
	st := &state{stacks: stacks, accept: stacks[0] == 0, more: stacks[len(stacks)-1] != 0}
	s := State(len(m.states))
	m.states = append(m.states, st)
	m.stateID[string(key)] = s
	return s
}

// Advance is the state after byte c in state s (Dead if c cannot come).
func (m *Machine) Advance(s State, c byte) State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.advance(s, c)
}

func (m *Machine) advance(s State, c byte) State {
	if s == Dead {
		return Dead
	}
	st := m.states[s]
	if n := st.next[c]; n != 0 {
		return n - 1
	}
	var out []int32
	for _, id := range st.stacks {
		if id == 0 {
			continue
		}
		n := m.nodes[id]
		if m.g.elems[n.pos].set.has(c) {
			out = append(out, m.expand(m.node(stackNode{n.pos + 1, n.next}))...)
		}
	}
	next := m.intern(out)
	st = m.states[s] // intern may have grown the slice, not moved the state
	st.next[c] = next + 1
	return next
}

// AdvanceBytes feeds bs from state s.
func (m *Machine) AdvanceBytes(s State, bs []byte) State {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range bs {
		if s = m.advance(s, c); s == Dead {
			break
		}
	}
	return s
}

// CanEnd reports whether the text so far is a whole sentence of the
// grammar.
func (m *Machine) CanEnd(s State) bool {
	if s == Dead {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.states[s].accept
}

// Done reports whether s can end and cannot take another byte: the
// generation is complete.
func (m *Machine) Done(s State) bool {
	if s == Dead {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.states[s].accept && !m.states[s].more
}

// States is how many states the machine has met, for tests and metrics.
func (m *Machine) States() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.states)
}
