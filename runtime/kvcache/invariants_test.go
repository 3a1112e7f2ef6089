package kvcache

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
)

// checkInvariants verifies the pool's bookkeeping against the tables of
// seqs, which must be every sequence of the pool that holds blocks.
func checkInvariants(t testing.TB, p *Pool, seqs ...*Seq) {
	t.Helper()
	bs := p.blockSize
	refs := make([]int32, len(p.blocks))
	live := 0
	for _, s := range seqs {
		for _, b := range s.table {
			refs[b]++
		}
		if len(s.table) > 0 {
			live++
			if _, ok := p.live[s]; !ok {
				t.Fatalf("sequence with blocks %v is not live", s.table)
			}
		}
	}
	if live != len(p.live) {
		t.Fatalf("%d live sequences recorded, %d passed hold blocks", len(p.live), live)
	}
	used := 0
	for b, blk := range p.blocks {
		if blk.ref != refs[b] {
			t.Fatalf("block %d: refcount %d, referenced by %d tables", b, blk.ref, refs[b])
		}
		if blk.ref > 0 {
			used++
		}
	}

	// Every unreferenced block is in exactly one of the free list (if
	// unregistered) and the LRU (if registered); referenced ones in neither.
	where := make([]string, len(p.blocks))
	for _, b := range p.free {
		if where[b] != "" {
			t.Fatalf("block %d twice in the free list", b)
		}
		where[b] = "free"
		if blk := p.blocks[b]; blk.ref != 0 || blk.node != 0 {
			t.Fatalf("free block %d has ref %d, node %d", b, blk.ref, blk.node)
		}
	}
	n := 0
	for b, prev := p.cached.next[p.cached.sentinel()], p.cached.sentinel(); b != p.cached.sentinel(); b, prev = p.cached.next[b], b {
		if p.cached.prev[b] != prev {
			t.Fatalf("LRU links broken at block %d", b)
		}
		if where[b] != "" {
			t.Fatalf("cached block %d is also %s", b, where[b])
		}
		where[b] = "cached"
		if blk := p.blocks[b]; blk.ref != 0 || blk.node == 0 {
			t.Fatalf("cached block %d has ref %d, node %d", b, blk.ref, blk.node)
		}
		n++
	}
	if n != p.cached.len {
		t.Fatalf("LRU holds %d blocks, records %d", n, p.cached.len)
	}
	for b, blk := range p.blocks {
		if (blk.ref == 0) != (where[b] != "") {
			t.Fatalf("block %d: ref %d but %q", b, blk.ref, where[b])
		}
	}

	// The index and the blocks' own records agree, and node ids are unique.
	registered := 0
	nodes := make(map[uint64]bool)
	for b, blk := range p.blocks {
		if blk.node == 0 {
			continue
		}
		registered++
		if nodes[blk.node] {
			t.Fatalf("node %d registered twice", blk.node)
		}
		nodes[blk.node] = true
		if got, ok := p.index[blk.key]; !ok || got != int32(b) {
			t.Fatalf("block %d registered, index has %d, %v", b, got, ok)
		}
		if len(blk.key.tokens) != 4*bs {
			t.Fatalf("block %d registered with %d bytes of tokens", b, len(blk.key.tokens))
		}
	}
	if registered != len(p.index) {
		t.Fatalf("%d registered blocks, %d index entries", registered, len(p.index))
	}

	for _, s := range seqs {
		checkSeq(t, p, s)
	}
	checkStats(t, p, seqs, used)
}

func checkSeq(t testing.TB, p *Pool, s *Seq) {
	t.Helper()
	bs := p.blockSize
	if s.cap < len(s.tokens) || len(s.table) != p.BlocksNeeded(s.cap) {
		t.Fatalf("seq of %d tokens, %d reserved, has %d blocks", len(s.tokens), s.cap, len(s.table))
	}
	if len(s.nodes) != len(s.tokens)/bs {
		t.Fatalf("seq of %d tokens has %d block identities", len(s.tokens), len(s.nodes))
	}
	if len(slices.Compact(slices.Sorted(slices.Values(s.table)))) != len(s.table) {
		t.Fatalf("table %v repeats a block", s.table)
	}
	for i, b := range s.table {
		blk := p.blocks[b]
		lo, hi := i*bs, min((i+1)*bs, len(s.tokens))
		if blk.node != 0 && lo < hi {
			// A registered block records the tokens its users committed,
			// after the same parent.
			parent := s.root
			if i > 0 {
				parent = s.nodes[i-1]
			}
			if blk.key.parent != parent {
				t.Fatalf("block %d (logical %d): registered after node %d, seq has %d", b, i, blk.key.parent, parent)
			}
			if want := keyBytes(s.tokens[lo:hi]); !bytes.HasPrefix([]byte(blk.key.tokens), want) {
				t.Fatalf("block %d (logical %d): registered tokens differ from committed %v", b, i, s.tokens[lo:hi])
			}
			if hi-lo == bs && blk.node != s.nodes[i] {
				t.Fatalf("block %d (logical %d): node %d, seq says %d", b, i, blk.node, s.nodes[i])
			}
		}
		if (i+1)*bs > len(s.tokens) && s.cap > len(s.tokens) && (blk.ref != 1 || blk.node != 0) {
			t.Fatalf("block %d (logical %d) takes reserved writes but has ref %d, node %d", b, i, blk.ref, blk.node)
		}
	}
}

func keyBytes(tokens []int32) []byte {
	b := make([]byte, 0, 4*len(tokens))
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return b
}

func checkStats(t testing.TB, p *Pool, seqs []*Seq, used int) {
	t.Helper()
	st := p.Stats()
	if st.Blocks != len(p.blocks) || st.Used != used || st.Free != len(p.free) || st.Cached != p.cached.len {
		t.Fatalf("stats %+v, want %d blocks, %d used, %d free, %d cached", st, len(p.blocks), used, len(p.free), p.cached.len)
	}
	if st.Free+st.Used+st.Cached != st.Blocks {
		t.Fatalf("stats %+v don't add up", st)
	}
	fill := make(map[int32]int)
	for _, s := range seqs {
		for pos := range s.tokens {
			b := s.table[pos/p.blockSize]
			fill[b] = max(fill[b], pos%p.blockSize+1)
		}
	}
	usedSlots := 0
	for _, n := range fill {
		usedSlots += n
	}
	if st.AllocatedSlots != used*p.blockSize || st.UsedSlots != usedSlots {
		t.Fatalf("stats %+v, want %d allocated and %d used slots", st, used*p.blockSize, usedSlots)
	}
}

// snapshot renders everything Reserve could change, to show that a failed
// call changed nothing.
func snapshot(p *Pool, seqs ...*Seq) string {
	s := fmt.Sprintf("%v %v %v %v %d %d %d %d", p.blocks, p.free, p.cached, p.index, p.lastNode, len(p.live), p.lookups, p.hits)
	for _, q := range seqs {
		s += fmt.Sprintf(" | %v %v %v %d", q.table, q.tokens, q.nodes, q.cap)
	}
	return s
}
