package grammar

import (
	"errors"
	"slices"
	"sync"
	"unsafe"
)

// State is a state of a Machine: the set of parses alive after some
// bytes. States are small integers, so a sequence's matcher is one State.
type State int32

// Dead is the state after bytes the grammar cannot take (and every state
// of a machine that has run out of its budget: see Machine.Err).
const Dead State = -1

// Limits bound what a Machine may hold and do. A machine is shared by the
// requests with the same grammar and lives as long as its engine keeps
// it, and a grammar whose parses multiply (a repetition of something
// that may be empty, nested in another: ((a?){1000}){1000}, or
// ((a{0,1000}){0,1000}){0,1000}) has states of a million stacks each: what
// it may cost is decided here, not by the grammar.
type Limits struct {
	// Bytes bounds the machine's structure: its stacks and states, which
	// it keeps, and their closures, transition tables and character
	// classes, which are caches. When an operation starts with the
	// structure past half of Bytes, the caches are dropped (and made
	// again as they are needed); an operation that would take it past
	// Bytes ends the machine for good: every call after returns Dead (or
	// the error), Err says which budget it ran into, and its memory is
	// let go.
	Bytes int64
	// MaskBytes bounds the token masks it caches; past it the masks are
	// dropped and computed again as they are asked for.
	MaskBytes int64
	// Work bounds what one operation (an Advance, a Mask, the start) may
	// do: the stack ids it merges into closures and states, and the nodes
	// it makes. It is the time a step may take, as Bytes bounds the
	// memory: a state of a thousand stacks, each expanding to a thousand,
	// costs a million whether or not the result is new. An operation past
	// it ends the machine as one past Bytes does.
	Work int64
}

// DefaultLimits are NewMachine's: 64 MiB of structure, 64 MiB of masks
// (3,400 of them on a vocabulary of 152k tokens) and 2^24 ids of work an
// operation (about a quarter of a second; the costliest step of the
// tests' grammars over Qwen3's vocabulary does 116k). Why these:
// docs/DECISIONS.md, "Grammar budgets".
func DefaultLimits() Limits { return Limits{Bytes: 64 << 20, MaskBytes: 64 << 20, Work: 1 << 24} }

// What the parts of a machine cost, as its budget counts them: close to
// what the Go runtime holds for them, maps' overheads included.
const (
	nodeCost  = 72  // a stack node: its entry in nodes, nodeIDs, closure and mark
	stateCost = 128 // a state: its struct, its pointer and its entry in stateID
	stackCost = 8   // one stack of a state: in stacks and in the state's key
	idCost    = 4   // one node id in a closure
	sliceCost = 24  // a slice's header
)

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
//
// Everything it holds and does counts against its Limits (see there).
type Machine struct {
	g   *Grammar
	idx *Index
	lim Limits

	mu       sync.Mutex
	nodes    []stackNode
	nodeIDs  map[stackNode]int32
	closure  [][]int32 // node → the byte-set tops (and 0) it expands to; nil: not yet
	states   []*state
	stateID  map[string]State
	start    State
	sorted   []uint64 // Mask's scratch bitset
	mark     []uint32 // node → the union that last took it (union)
	gen      uint32   // the current union
	kept     int64    // bytes of nodes and states
	cached   int64    // bytes of closures, transition tables and classes
	maskUsed int64    // bytes of cached masks, against lim.MaskBytes
	work     int64    // the current operation's work, against lim.Work
	err      error    // the budget it ran into; then everything above is let go
}

type stackNode struct{ pos, next int32 }

type state struct {
	stacks []int32    // sorted node ids, byte-set tops or 0
	next   []State    // transitions by byte class: 0 not computed yet, else the State + 1 (Dead + 1 for dead); nil: none yet
	mask   []uint32   // the token mask, once computed
	accept bool       // node 0 is in stacks: the grammar may end here
	more   bool       // some stack can take a byte
	class  *charClass // what one character does from here, once asked (bulk.go)
	chain  *chainInfo // and a chain of them
}

// zero is the closure of node 0, the finished parse.
var zero = []int32{0}

// NewMachine prepares g for matching over idx's vocabulary (idx may be
// nil for byte matching only), within DefaultLimits.
func NewMachine(g *Grammar, idx *Index) *Machine {
	return NewMachineWith(g, idx, DefaultLimits())
}

// NewMachineWith is NewMachine within lim. A grammar whose start alone
// needs more than lim gives a machine whose Err says so.
func NewMachineWith(g *Grammar, idx *Index, lim Limits) *Machine {
	m := &Machine{g: g, idx: idx, lim: lim, nodeIDs: map[stackNode]int32{}, stateID: map[string]State{}, start: Dead}
	m.lock()
	defer m.unlock()
	m.node(stackNode{-1, -1}) // node 0: the empty stack
	var tops [][]int32
	for _, a := range g.rules[g.root] {
		if tops = append(tops, m.expand(m.node(stackNode{a, 0}))); m.err != nil {
			return m
		}
	}
	m.start = m.intern(m.union(tops))
	return m
}

// Grammar is the grammar the machine runs.
func (m *Machine) Grammar() *Grammar { return m.g }

// Index is the vocabulary the machine masks, or nil.
func (m *Machine) Index() *Index { return m.idx }

// Start is the state before any byte (Dead when the start alone was past
// the machine's limits).
func (m *Machine) Start() State { return m.start }

// Err is the budget the machine ran into (wrapping ErrBudget), or nil.
// Once it is set, the machine is spent: Advance returns Dead, Mask this
// error, CanEnd and Done false.
func (m *Machine) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Bytes is what the machine holds, structure and cached masks, as its
// limits count them.
func (m *Machine) Bytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kept + m.cached + m.maskUsed
}

// Worn reports whether the stacks and states the machine keeps have
// grown to a quarter of its Bytes (or it is spent): a cache of machines
// should give new requests a fresh one and leave this one to the requests
// that use it, so that a grammar used for days never ends a request for
// what earlier ones left behind.
func (m *Machine) Worn() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err != nil || m.kept > m.lim.Bytes/4
}

// lock starts an operation: it takes the lock, resets the operation's
// work, and drops the caches when the structure is past half its limit.
func (m *Machine) lock() {
	m.mu.Lock()
	m.work = 0
	if m.err == nil && m.kept+m.cached > m.lim.Bytes/2 {
		m.dropCaches()
	}
}

// unlock ends an operation: a machine that ran into a limit lets its
// memory go here, never in the middle of an operation, whose loops still
// index what it frees.
func (m *Machine) unlock() {
	if m.err != nil && m.nodes != nil {
		m.nodes, m.nodeIDs, m.closure, m.states, m.stateID, m.sorted, m.mark = nil, nil, nil, nil, nil, nil, nil
		m.kept, m.cached, m.maskUsed, m.start = 0, 0, 0, Dead
	}
	m.mu.Unlock()
}

// dropCaches lets go of what the machine can make again: closures,
// transition tables, character classes and chains (not masks, which have
// a limit of their own).
func (m *Machine) dropCaches() {
	clear(m.closure)
	for _, st := range m.states {
		st.next, st.class, st.chain = nil, nil, nil
	}
	m.cached = 0
}

// fits reports whether n more bytes of structure fit the limit, ending
// the machine when they do not.
func (m *Machine) fits(n int64) bool {
	if m.err != nil {
		return false
	}
	if m.kept+m.cached+n > m.lim.Bytes {
		m.err = budgetError("the grammar's matcher needs more than %d MiB (its Bytes limit): %s", m.lim.Bytes>>20, multiply)
		return false
	}
	return true
}

// keep counts n bytes of nodes or states; cache n bytes of caches. Both
// report false when they did not fit.
func (m *Machine) keep(n int64) bool {
	ok := m.fits(n)
	if ok {
		m.kept += n
	}
	return ok
}

func (m *Machine) cache(n int64) bool {
	ok := m.fits(n)
	if ok {
		m.cached += n
	}
	return ok
}

// spend counts n units of the operation's work; false: past the Work
// limit, which ends the machine.
func (m *Machine) spend(n int64) bool {
	if m.err != nil {
		return false
	}
	if m.work += n; m.work > m.lim.Work {
		m.err = budgetError("one step of the grammar's matcher needs more than %d units of work (its Work limit): %s", m.lim.Work, multiply)
		return false
	}
	return true
}

// multiply says why a grammar runs into a machine's limits.
const multiply = "its parses multiply, as a repetition of something that may be empty does when nested in another (((a?){1000}){1000}, ((a{0,1000}){0,1000}){0,1000}); nest fewer repetitions or make them unambiguous"

func (m *Machine) node(n stackNode) int32 {
	if id, ok := m.nodeIDs[n]; ok {
		return id
	}
	if !m.spend(1) || !m.keep(nodeCost) {
		return 0
	}
	id := int32(len(m.nodes))
	m.nodes = append(m.nodes, n)
	m.closure = append(m.closure, nil)
	m.mark = append(m.mark, 0)
	m.nodeIDs[n] = id
	return id
}

// expand returns the stacks node id stands for once the references at its
// top are expanded: those whose top is a byte set, and 0 if it can end
// (nil when a limit ran out). A node's closure is made of the closures
// of the nodes below it (its rule's alternatives, or what follows an
// ended alternative): expand computes them depth first with a stack of
// its own, since a chain of them is as long as the grammar makes it (a
// thousand optional items in a row), and memoizes each.
func (m *Machine) expand(id int32) []int32 {
	if id == 0 {
		return zero
	}
	if c := m.closure[id]; c != nil {
		return c
	}
	type frame struct {
		id   int32
		deps []int32 // the nodes its closure is made of
		done int     // deps[:done] have their closures
	}
	stack := []frame{{id: id, deps: m.deps(id)}}
	for len(stack) > 0 && m.err == nil {
		f := &stack[len(stack)-1]
		for f.done < len(f.deps) && (f.deps[f.done] == 0 || m.closure[f.deps[f.done]] != nil) {
			f.done++
		}
		if f.done < len(f.deps) {
			if len(stack) > len(m.nodes) { // cannot happen: build rejects left recursion
				m.err = errors.New("grammar: a cycle of references that consume nothing")
				break
			}
			d := f.deps[f.done]
			stack = append(stack, frame{id: d, deps: m.deps(d)})
			continue
		}
		m.closure[f.id] = m.combine(f.id, f.deps)
		stack = stack[:len(stack)-1]
	}
	if m.err != nil {
		return nil
	}
	return m.closure[id]
}

// deps are the nodes node id's closure is made of.
func (m *Machine) deps(id int32) []int32 {
	n := m.nodes[id]
	switch e := m.g.elems[n.pos]; e.kind {
	case eEnd:
		return []int32{n.next}
	case eRef:
		cont := n.next
		if m.g.elems[n.pos+1].kind != eEnd {
			cont = m.node(stackNode{n.pos + 1, n.next})
		}
		alts := m.g.rules[e.ref]
		deps := make([]int32, len(alts))
		for i, a := range alts {
			deps[i] = m.node(stackNode{a, cont})
		}
		return deps
	}
	return nil
}

// combine makes node id's closure from its deps' closures.
func (m *Machine) combine(id int32, deps []int32) []int32 {
	switch len(deps) {
	case 0: // a byte set on top
		if !m.cache(idCost + sliceCost) {
			return nil
		}
		return []int32{id}
	case 1: // shared, not copied
		return m.expand(deps[0])
	}
	lists := make([][]int32, len(deps))
	for i, d := range deps {
		lists[i] = m.expand(d)
	}
	out := m.union(lists)
	if !m.cache(int64(len(out))*idCost + sliceCost) {
		return nil
	}
	return out
}

// maxStacks bounds the stacks of one state (and one closure): a JSON
// Schema's enum of ten thousand strings starts with ten thousand, the
// largest state of the tests' other grammars has 150, and a grammar whose
// parses multiply meets a million in its first steps. Past it the machine
// ends at once, long before it would fill its Bytes.
const maxStacks = 1 << 16

// union merges lists of ids into one, sorted and without repeats (nil
// when the work limit runs out). Repeats are common, the same stacks
// reached by many paths, so it marks the ids it has taken rather than
// sorting them all: its cost is the ids it looks at, which it spends.
func (m *Machine) union(lists [][]int32) []int32 {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if !m.spend(int64(n)) {
		return nil
	}
	if m.gen++; m.gen == 0 { // wrapped: old marks would look current
		clear(m.mark)
		m.gen = 1
	}
	out := make([]int32, 0, min(n, 64))
	for _, l := range lists {
		for _, id := range l {
			if m.mark[id] != m.gen {
				m.mark[id] = m.gen
				out = append(out, id)
			}
		}
		if len(out) > maxStacks {
			m.err = budgetError("a state of the grammar's matcher has more than %d parses alive at once: %s", maxStacks, multiply)
			return nil
		}
	}
	slices.Sort(out)
	return slices.Clip(out)
}

// intern returns the state of a set of stacks, sorted and without
// repeats (a union's).
func (m *Machine) intern(stacks []int32) State {
	if len(stacks) == 0 || !m.spend(int64(len(stacks))) {
		return Dead
	}
	key := unsafe.String((*byte)(unsafe.Pointer(&stacks[0])), 4*len(stacks))
	if s, ok := m.stateID[key]; ok {
		return s
	}
	if !m.keep(stateCost + stackCost*int64(len(stacks))) {
		return Dead
	}
	st := &state{stacks: stacks, accept: stacks[0] == 0, more: stacks[len(stacks)-1] != 0}
	s := State(len(m.states))
	m.states = append(m.states, st)
	m.stateID[string(key)] = s
	return s
}

// Advance is the state after byte c in state s (Dead if c cannot come,
// or if the machine ran out of its limits: see Err).
func (m *Machine) Advance(s State, c byte) State {
	m.lock()
	defer m.unlock()
	return m.advance(s, c)
}

func (m *Machine) advance(s State, c byte) State {
	if s == Dead || m.err != nil {
		return Dead
	}
	st := m.states[s]
	k := m.g.classOf[c]
	if st.next != nil {
		if n := st.next[k]; n != 0 {
			return n - 1
		}
	}
	var lists [][]int32
	for _, id := range st.stacks {
		if id == 0 {
			continue
		}
		n := m.nodes[id]
		if m.g.set(n.pos).has(c) {
			if lists = append(lists, m.expand(m.node(stackNode{n.pos + 1, n.next}))); m.err != nil {
				return Dead
			}
		}
	}
	next := m.intern(m.union(lists))
	if m.err != nil {
		return Dead
	}
	if st.next == nil {
		if !m.cache(int64(4*m.g.classes) + sliceCost) {
			return Dead
		}
		st.next = make([]State, m.g.classes)
	}
	st.next[k] = next + 1
	return next
}

// AdvanceBytes feeds bs from state s.
func (m *Machine) AdvanceBytes(s State, bs []byte) State {
	m.lock()
	defer m.unlock()
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
	m.mu.Lock()
	defer m.mu.Unlock()
	return s != Dead && m.err == nil && m.states[s].accept
}

// Done reports whether s can end and cannot take another byte: the
// generation is complete.
func (m *Machine) Done(s State) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return s != Dead && m.err == nil && m.states[s].accept && !m.states[s].more
}

// States is how many states the machine has met, for tests and metrics.
func (m *Machine) States() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.states)
}
