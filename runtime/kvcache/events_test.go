package kvcache

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// mirror is what a watcher knows of the prefix cache from the events
// alone: each hash's block, and how many registered blocks have it.
type mirror struct {
	blocks map[uint64]Event
	count  map[uint64]int
	dups   int // stores of a hash already cached
}

func newMirror() *mirror { return &mirror{blocks: map[uint64]Event{}, count: map[uint64]int{}} }

func (m *mirror) apply(t testing.TB, e Event) {
	t.Helper()
	if !e.Stored {
		if m.count[e.Hash] == 0 {
			t.Fatalf("removed %x, which was never stored", e.Hash)
		}
		if m.count[e.Hash]--; m.count[e.Hash] == 0 {
			delete(m.count, e.Hash)
			delete(m.blocks, e.Hash)
		}
		return
	}
	// A stored block's hash is its content, chained from its parent.
	parent := e.Parent
	if e.First {
		parent = e.Namespace
	}
	if want := ChainHash(parent, e.Tokens); e.Hash != want {
		t.Fatalf("stored %x, but its parent and tokens hash to %x", e.Hash, want)
	}
	if old, ok := m.blocks[e.Hash]; ok && !equalEvents(old, e) {
		t.Fatalf("hash %x stored twice with different blocks: %+v, %+v", e.Hash, old, e)
	}
	m.blocks[e.Hash] = e
	m.count[e.Hash]++
	m.dups += m.count[e.Hash] - 1
}

func equalEvents(a, b Event) bool {
	return a.Stored == b.Stored && a.Hash == b.Hash && a.Namespace == b.Namespace && a.First == b.First &&
		a.Parent == b.Parent && slices.Equal(a.Tokens, b.Tokens)
}

// check compares the mirror with the pool's own cache.
func (m *mirror) check(t testing.TB, p *Pool) {
	t.Helper()
	want := newMirror()
	for _, e := range p.Cached() {
		want.apply(t, e)
	}
	if len(want.index()) != len(p.index) {
		t.Fatalf("Cached gives %d blocks, the index has %d", len(want.index()), len(p.index))
	}
	if !maps.Equal(m.count, want.count) {
		t.Fatalf("the events say %d hashes %v, the pool caches %d: %v", len(m.count), m.count, len(want.count), want.count)
	}
	for h, e := range want.blocks {
		if !equalEvents(m.blocks[h], e) {
			t.Fatalf("hash %x: the events say %+v, the pool %+v", h, m.blocks[h], e)
		}
	}
}

// index lists the mirror's blocks, once per registered copy.
func (m *mirror) index() []uint64 {
	var out []uint64
	for h, n := range m.count {
		for range n {
			out = append(out, h)
		}
	}
	return out
}

// TestEventsMirrorCache: a watcher that starts from Cached and applies the
// events holds exactly what the pool caches after every operation of a
// random workload on small pools (evictions, copy-on-write, truncation
// into full blocks, duplicate prefixes, two namespaces), and watching
// from the middle of it works as well as from the start.
func TestEventsMirrorCache(t *testing.T) {
	for _, tc := range []struct {
		blocks, blockSize, ops int
		seed                   uint64
	}{
		{16, 1, 3000, 1},
		{20, 3, 3000, 2},
		{24, 8, 3000, 3},
	} {
		t.Run(fmt.Sprintf("%dx%d", tc.blocks, tc.blockSize), func(t *testing.T) {
			r := rand.New(rand.NewPCG(tc.seed, 7))
			h := newHarness(t, tc.blocks, tc.blockSize)
			var m *mirror
			var stored, removed int
			watch := func(e Event) {
				if e.Stored {
					stored++
				} else {
					removed++
				}
				if m != nil {
					m.apply(t, e)
				}
			}
			h.p.Watch(watch)
			base := randTokens(r, 6*tc.blockSize)
			for i := range tc.ops {
				if i == tc.ops/3 { // from the middle, with blocks already cached
					m = newMirror()
					for _, e := range h.p.Cached() {
						m.apply(t, e)
					}
					stored, removed = 0, 0
				}
				if len(h.order) < 6 && r.IntN(10) == 0 {
					s := h.newSeq()
					if r.IntN(3) == 0 { // another namespace: an adapter's
						*s = *h.p.NewSeqIn(1<<63 | 5)
					}
					continue
				}
				if len(h.order) == 0 {
					continue
				}
				s := h.order[r.IntN(len(h.order))]
				switch op := r.IntN(8); {
				case op <= 2 && len(s.Table()) == 0:
					prompt := slices.Clone(base[:r.IntN(len(base))])
					if len(prompt) > 0 && r.IntN(3) == 0 {
						prompt[len(prompt)-1] = 9
					}
					h.share(s, prompt)
				case op <= 4:
					tokens := make([]int32, 1+r.IntN(2*tc.blockSize))
					for j := range tokens {
						tokens[j] = base[(s.Len()+j)%len(base)]
						if r.IntN(4*tc.blockSize) == 0 {
							tokens[j] = int32(3 + r.IntN(2))
						}
					}
					h.extend(s, tokens...)
				case op <= 6:
					h.truncate(s, r.IntN(s.Len()+1))
				default:
					h.release(s)
				}
				if m != nil {
					m.check(t, h.p)
				}
			}
			if stored == 0 || removed == 0 || m.dups == 0 {
				t.Errorf("the workload stored %d blocks (%d of a hash already cached) and removed %d: want all three, evictions included", stored, m.dups, removed)
			}
			t.Logf("%d stored (%d of a hash already cached), %d removed; %d cached at the end", stored, m.dups, removed, len(h.p.index))
		})
	}
}

// TestChainHashMatchesCBOR: ChainHash's encoding is the canonical CBOR
// that llm-d's KV indexer hashes (it uses fxamacker/cbor's canonical mode),
// across every integer width.
func TestChainHashMatchesCBOR(t *testing.T) {
	enc, err := cbor.CanonicalEncOptions().EncMode()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		parent uint64
		tokens []int32
	}{
		{0, nil},
		{23, []int32{0, 23, 24}},
		{255, []int32{255, 256, 65535, 65536}},
		{1 << 40, []int32{128000, 2147483647}},
		{1<<63 | 5, make([]int32, 30)},
		{^uint64(0), []int32{7}},
	} {
		u := make([]uint32, len(tc.tokens))
		for i, v := range tc.tokens {
			u[i] = uint32(v)
		}
		b, err := enc.Marshal([]any{tc.parent, u, nil})
		if err != nil {
			t.Fatal(err)
		}
		f := fnv.New64a()
		f.Write(b)
		if got, want := ChainHash(tc.parent, tc.tokens), f.Sum64(); got != want {
			t.Errorf("ChainHash(%d, %v) = %x, want %x (CBOR %x)", tc.parent, tc.tokens, got, want, b)
		}
	}
}
