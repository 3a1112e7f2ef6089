package kvcache

import (
	"errors"
	"slices"
	"testing"
)

func TestNewPool(t *testing.T) {
	for _, tc := range []struct {
		blocks, size int
		ok           bool
	}{
		{1, 1, true},
		{1024, 16, true},
		{0, 16, false},
		{16, 0, false},
		{-1, 16, false},
		{1<<27 + 1, 16, false}, // one block past 2^31 int32 slots
	} {
		p, err := NewPool(tc.blocks, tc.size)
		if (err == nil) != tc.ok {
			t.Errorf("NewPool(%d, %d): %v", tc.blocks, tc.size, err)
			continue
		}
		if err == nil && (p.Blocks() != tc.blocks || p.BlockSize() != tc.size) {
			t.Errorf("NewPool(%d, %d) has %d blocks of %d", tc.blocks, tc.size, p.Blocks(), p.BlockSize())
		}
	}
}

func TestAllocationAcrossBlockBoundaries(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33} {
		for _, step := range []int{max(n, 1), 1} { // prefill at once, or decode token by token
			h := newHarness(t, 8, 16)
			s := h.newSeq()
			for done := 0; done < n; done += step {
				if err := h.extend(s, seqTokens(done, min(step, n-done))...); err != nil {
					t.Fatal(err)
				}
			}
			want := (n + 15) / 16
			if got := len(s.Table()); got != want || h.p.Stats().Used != want {
				t.Errorf("%d tokens in steps of %d: %d blocks in the table, %d used, want %d", n, step, got, h.p.Stats().Used, want)
			}
			for pos := range n {
				if got, want := s.Slot(pos), s.Table()[pos/16]*16+int32(pos%16); got != want {
					t.Errorf("Slot(%d) = %d, want %d", pos, got, want)
				}
			}
			if st := h.p.Stats(); st.UsedSlots != n || st.AllocatedSlots != 16*want {
				t.Errorf("%d tokens: stats %+v", n, st)
			}
		}
	}
}

func TestReserveIsIdempotentUntilCommit(t *testing.T) {
	h := newHarness(t, 8, 4)
	s := h.newSeq()
	for range 3 {
		if _, err := h.reserve(s, 5); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(s.Table()); got != 2 {
		t.Fatalf("three Reserve(5) hold %d blocks, want 2", got)
	}
	h.commit(s, seqTokens(0, 3)...) // commit part of the reservation
	if _, err := h.reserve(s, 1); err != nil || len(s.Table()) != 2 {
		t.Fatalf("Reserve within the reservation: %v, %d blocks", err, len(s.Table()))
	}
	h.truncate(s, s.Len()) // drops the reservation
	if got := len(s.Table()); got != 1 {
		t.Fatalf("Truncate(Len) keeps %d blocks, want 1", got)
	}
}

func TestErrFullChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *harness) *Seq // leaves the pool exhausted; returns the sequence to grow
		n     int
	}{
		{"more blocks than the pool", func(h *harness) *Seq { return h.newSeq() }, 9 * 4},
		{"last blocks taken", func(h *harness) *Seq {
			h.extend(h.newSeq(), seqTokens(0, 7*4)...)
			s := h.newSeq()
			h.extend(s, 100)
			return s
		}, 8},
		{"copy-on-write with no block", func(h *harness) *Seq {
			a, b := h.newSeq(), h.newSeq()
			h.extend(a, seqTokens(0, 8)...)
			h.share(b, seqTokens(0, 9))
			h.truncate(b, 2) // into a block a still uses
			h.extend(h.newSeq(), seqTokens(50, 6*4)...)
			return b
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 8, 4)
			s := tc.setup(h)
			if s.CanReserve(tc.n) {
				t.Fatalf("CanReserve(%d) on an exhausted pool", tc.n)
			}
			// extend checks that the failed Reserve left no trace.
			if err := h.extend(s, seqTokens(200, tc.n)...); !errors.Is(err, ErrFull) {
				t.Fatalf("Reserve(%d): %v, want ErrFull", tc.n, err)
			}
		})
	}
}

func TestReleaseReturnsEverything(t *testing.T) {
	h := newHarness(t, 32, 4)
	prompt := seqTokens(0, 21)
	var seqs []*Seq
	for i := range 4 {
		s := h.newSeq()
		n := h.share(s, prompt)
		h.extend(s, prompt[n:]...)
		h.extend(s, seqTokens(100*i, 3+i)...)
		seqs = append(seqs, s)
	}
	for _, s := range seqs {
		h.release(s)
		if s.Len() != 0 || len(s.Table()) != 0 {
			t.Fatalf("released sequence has %d tokens, %d blocks", s.Len(), len(s.Table()))
		}
	}
	st := h.p.Stats()
	if st.Used != 0 || st.Free+st.Cached != st.Blocks || st.AllocatedSlots != 0 || st.Waste != 0 {
		t.Fatalf("after releasing all: %+v", st)
	}
	// The prompt's full blocks stay cached; a released Seq is reusable.
	if n := h.share(seqs[0], prompt); n != 20 {
		t.Fatalf("reused Seq shares %d tokens of the cached prompt, want 20", n)
	}
	h.extend(seqs[0], prompt[20:]...)
}

func TestLRUEviction(t *testing.T) {
	h := newHarness(t, 3, 4)
	prompt := seqTokens(0, 9) // two full blocks and one token
	a := h.newSeq()
	h.extend(a, prompt[:8]...)
	h.release(a) // cached, tail first: LRU order a1, a0
	if st := h.p.Stats(); st.Cached != 2 || st.Free != 1 {
		t.Fatalf("after release: %+v", st)
	}

	c := h.newSeq()
	h.extend(c, seqTokens(50, 4)...) // takes the free block: nothing evicted
	if n := h.share(a, prompt); n != 8 {
		t.Fatalf("Share after using the free block: %d, want 8", n)
	}
	h.release(a)

	d := h.newSeq()
	h.extend(d, seqTokens(60, 4)...) // free list empty: evicts a1, the tail
	if n := h.share(a, prompt); n != 4 {
		t.Fatalf("Share after evicting the tail: %d, want 4", n)
	}
	h.release(a)
	h.extend(h.newSeq(), seqTokens(70, 4)...) // evicts a0
	if n := h.share(a, prompt); n != 0 {
		t.Fatalf("Share after evicting everything: %d, want 0", n)
	}
	if st := h.p.Stats(); st.Free != 0 || st.Cached != 0 || st.PrefixLookups != 3*9 || st.PrefixHits != 12 {
		t.Fatalf("final stats %+v", st)
	}
	if !slices.Equal(c.Table(), []int32{2}) {
		t.Fatalf("c's table %v, want the free block 2", c.Table())
	}
}
