package kvcache

import (
	"slices"
	"testing"
)

func TestShareIdenticalPrompt(t *testing.T) {
	for _, tc := range []struct{ prompt, shared int }{
		{0, 0},
		{1, 0},
		{16, 0}, // the only block holds the last token
		{17, 16},
		{31, 16},
		{32, 16},
		{33, 32},
		{100, 96},
	} {
		h := newHarness(t, 32, 16)
		prompt := seqTokens(1000, tc.prompt)
		a, b := h.newSeq(), h.newSeq()
		h.extend(a, prompt...)
		n := h.share(b, prompt)
		if n != tc.shared {
			t.Errorf("prompt of %d: Share = %d, want %d", tc.prompt, n, tc.shared)
			continue
		}
		if !slices.Equal(b.Table(), a.Table()[:n/16]) {
			t.Errorf("prompt of %d: shared table %v, a has %v", tc.prompt, b.Table(), a.Table())
		}
		if st := h.p.Stats(); st.PrefixLookups != tc.prompt || st.PrefixHits != n {
			t.Errorf("prompt of %d: %d lookups, %d hits", tc.prompt, st.PrefixLookups, st.PrefixHits)
		}
		// b computes the rest itself; its copy of a's full last block stays
		// private because a's is the one registered.
		h.extend(b, prompt[n:]...)
		if tc.prompt%16 == 0 && tc.prompt > 0 {
			last := b.Table()[len(b.Table())-1]
			if last == a.Table()[len(a.Table())-1] || h.p.blocks[last].node != 0 {
				t.Errorf("prompt of %d: b's recomputed last block %d is shared or registered", tc.prompt, last)
			}
		}
		// Both sequences now grow independently.
		h.extend(a, 1, 2, 3)
		h.extend(b, 4, 5, 6)
	}
}

func TestShareKeysOnTheWholePrefix(t *testing.T) {
	h := newHarness(t, 32, 4)
	a := h.newSeq()
	h.extend(a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	for _, tc := range []struct {
		name   string
		prompt []int32
		shared int
	}{
		{"same blocks", []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, 12},
		{"differs in the second block", []int32{1, 2, 3, 4, 5, 6, 0, 8, 9, 10, 11, 12, 13}, 4},
		{"second block after another first", []int32{0, 2, 3, 4, 5, 6, 7, 8, 9}, 0},
		{"second block alone", []int32{5, 6, 7, 8, 9}, 0},
		{"shorter", []int32{1, 2, 3, 4, 5}, 4},
	} {
		s := h.newSeq()
		if n := h.share(s, tc.prompt); n != tc.shared {
			t.Errorf("%s: Share = %d, want %d", tc.name, n, tc.shared)
		}
		h.release(s)
	}
}

func TestCopyOnWriteAfterTruncateIntoSharedBlock(t *testing.T) {
	h := newHarness(t, 16, 16)
	a, b := h.newSeq(), h.newSeq()
	h.extend(a, seqTokens(0, 32)...)
	prompt := append(seqTokens(0, 16), seqTokens(500, 4)...) // 20 tokens, first block equal
	if n := h.share(b, prompt); n != 16 {
		t.Fatalf("Share = %d, want 16", n)
	}
	shared := a.Table()[0]
	h.truncate(b, 10)
	if blk := h.p.blocks[shared]; blk.ref != 2 || blk.node == 0 {
		t.Fatalf("after b truncates into it, a's first block has ref %d, node %d; want it shared and cached", blk.ref, blk.node)
	}
	copies, err := h.reserve(b, 10) // performs the copy
	if err != nil {
		t.Fatal(err)
	}
	if len(copies) != 1 || copies[0].Src != shared || copies[0].Dst != b.Table()[0] || b.Table()[0] == shared {
		t.Fatalf("Reserve returned copies %v with b's table %v; want a copy of block %d", copies, b.Table(), shared)
	}
	// The harness writes b's new tokens and verifies a still reads its own K/V.
	h.commit(b, seqTokens(700, 10)...)
	if h.p.blocks[shared].ref != 1 {
		t.Fatalf("a's block has ref %d after b copied it, want 1", h.p.blocks[shared].ref)
	}
	// a's full block is still cached for the original prompt.
	c := h.newSeq()
	if n := h.share(c, seqTokens(0, 33)); n != 32 {
		t.Fatalf("Share of a's prompt after b diverged = %d, want 32", n)
	}
}

func TestTruncateIntoCachedBlockWithoutOtherUsers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filler int // blocks taken by another sequence before b reserves
		copied bool
	}{
		{"copies while a block is free", 0, true},
		{"takes it over when the pool is full", 6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 8, 4)
			a, b := h.newSeq(), h.newSeq()
			h.extend(a, seqTokens(0, 8)...)
			h.share(b, seqTokens(0, 9))
			h.truncate(b, 6) // shared with a: stays registered
			h.release(a)     // b is the only user of a registered block
			if tc.filler > 0 {
				h.extend(h.newSeq(), seqTokens(100, 4*tc.filler)...)
			}
			shared := b.Table()[1]
			copies, err := h.reserve(b, 1)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(copies) == 1; got != tc.copied {
				t.Fatalf("copies %v, want copied = %v", copies, tc.copied)
			}
			h.commit(b, 99)
			// Copying keeps the full block cached; taking it over does not.
			if n := h.share(h.newSeq(), seqTokens(0, 9)); (n == 8) != tc.copied {
				t.Fatalf("Share of the old prompt = %d (block %d)", n, shared)
			}
		})
	}
}

func TestTruncateAndRegrow(t *testing.T) {
	// a holds 40 tokens in blocks of 16: two full (cached) blocks and one
	// partial. After Truncate(n) the old prompt still shares every full
	// block that is either below n or was released whole into the cache; a
	// full block cut into a partial one left the cache.
	for _, tc := range []struct{ n, shared int }{
		{40, 32}, {33, 32}, {32, 32}, {20, 16}, {17, 16}, {16, 32}, {1, 0}, {0, 32},
	} {
		h := newHarness(t, 8, 16)
		a := h.newSeq()
		h.extend(a, seqTokens(0, 40)...)
		before := h.p.Stats()
		h.truncate(a, tc.n)
		if got, want := len(a.Table()), (tc.n+15)/16; got != want {
			t.Errorf("Truncate(%d): %d blocks, want %d", tc.n, got, want)
		}
		st := h.p.Stats()
		if released := 3 - (tc.n+15)/16; st.Free+st.Cached != before.Free+before.Cached+released {
			t.Errorf("Truncate(%d): %+v, want %d more blocks unused than %+v", tc.n, st, released, before)
		}
		if got := h.share(h.newSeq(), seqTokens(0, 41)); got != tc.shared {
			t.Errorf("Truncate(%d): old prompt shares %d tokens, want %d", tc.n, got, tc.shared)
		}
		h.extend(a, seqTokens(900, 50-tc.n)...)
		if a.Len() != 50 || len(a.Table()) != 4 {
			t.Errorf("regrown from %d: %d tokens in %d blocks", tc.n, a.Len(), len(a.Table()))
		}
	}
}
