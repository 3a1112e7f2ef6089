package kvcache

import (
	"errors"
	"slices"
	"testing"
)

// harness drives a pool the way the engine would and plays the device: each
// slot holds a hash of the whole prefix up to its token, standing in for
// K/V (which depend on every earlier token). Reading a sequence's slots back
// therefore catches wrong sharing, a missed copy-on-write and reuse of a
// block still in use. After every operation it checks the invariants.
type harness struct {
	t      testing.TB
	p      *Pool
	mem    []uint64
	model  map[*Seq][]int32 // tokens each sequence committed
	order  []*Seq           // the keys of model, in creation order
	copies int
}

func newHarness(t testing.TB, blocks, blockSize int) *harness {
	t.Helper()
	p, err := NewPool(blocks, blockSize)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, p: p, mem: make([]uint64, blocks*blockSize), model: make(map[*Seq][]int32)}
}

func (h *harness) newSeq() *Seq {
	s := h.p.NewSeq()
	h.model[s] = nil
	h.order = append(h.order, s)
	return s
}

func (h *harness) seqs() []*Seq { return h.order }

// prefixHashes returns, for each position, an FNV-1a hash of tokens[:pos+1].
func prefixHashes(tokens []int32) []uint64 {
	hs := make([]uint64, len(tokens))
	h := uint64(14695981039346656037)
	for i, t := range tokens {
		for k := range 4 {
			h = (h ^ uint64(byte(t>>(8*k)))) * 1099511628211
		}
		hs[i] = h
	}
	return hs
}

func (h *harness) share(s *Seq, prompt []int32) int {
	h.t.Helper()
	n := s.Share(prompt)
	bs := h.p.blockSize
	if n%bs != 0 || (n > 0 && n > (len(prompt)-1)/bs*bs) {
		h.t.Fatalf("Share of %d tokens returned %d", len(prompt), n)
	}
	h.model[s] = slices.Clone(prompt[:n])
	h.check()
	return n
}

// reserve calls Reserve and performs the copies it returns at once, as the
// engine does before the step's writes. It checks that CanReserve agreed
// and that a failure left no trace.
func (h *harness) reserve(s *Seq, n int) ([]Copy, error) {
	h.t.Helper()
	before := snapshot(h.p, h.seqs()...)
	can := s.CanReserve(n)
	copies, err := s.Reserve(n)
	if can != (err == nil) {
		h.t.Fatalf("CanReserve(%d) = %v, Reserve: %v", n, can, err)
	}
	if err != nil {
		if !errors.Is(err, ErrFull) {
			h.t.Fatal(err)
		}
		if after := snapshot(h.p, h.seqs()...); after != before {
			h.t.Fatalf("failed Reserve changed state:\n%s\n%s", before, after)
		}
		return nil, err
	}
	bs := h.p.blockSize
	for _, c := range copies {
		copy(h.mem[int(c.Dst)*bs:int(c.Dst+1)*bs], h.mem[int(c.Src)*bs:int(c.Src+1)*bs])
	}
	h.copies += len(copies)
	h.check()
	return copies, nil
}

// commit writes tokens into reserved slots and commits them.
func (h *harness) commit(s *Seq, tokens ...int32) {
	h.t.Helper()
	all := append(slices.Clone(h.model[s]), tokens...)
	hs := prefixHashes(all)
	for pos := s.Len(); pos < len(all); pos++ {
		h.mem[s.Slot(pos)] = hs[pos]
	}
	s.Commit(tokens)
	h.model[s] = all
	h.check()
}

// extend is one engine step: reserve, copy, write, commit.
func (h *harness) extend(s *Seq, tokens ...int32) error {
	h.t.Helper()
	if _, err := h.reserve(s, len(tokens)); err != nil {
		return err
	}
	h.commit(s, tokens...)
	return nil
}

func (h *harness) truncate(s *Seq, n int) {
	h.t.Helper()
	s.Truncate(n)
	h.model[s] = h.model[s][:n]
	h.check()
}

func (h *harness) release(s *Seq) {
	h.t.Helper()
	s.Release()
	h.model[s] = nil
	h.check()
}

func (h *harness) check() {
	h.t.Helper()
	checkInvariants(h.t, h.p, h.seqs()...)
	for s, tokens := range h.model {
		if s.Len() != len(tokens) {
			h.t.Fatalf("Len %d, committed %d", s.Len(), len(tokens))
		}
		for pos, want := range prefixHashes(tokens) {
			if got := h.mem[s.Slot(pos)]; got != want {
				h.t.Fatalf("position %d of a %d-token sequence reads the K/V of another prefix", pos, len(tokens))
			}
		}
	}
	h.checkCached()
}

// checkCached verifies that every registered block holds the K/V of its key:
// its prefix is rebuilt by following parents while they are still registered.
func (h *harness) checkCached() {
	h.t.Helper()
	p, bs := h.p, h.p.blockSize
	byNode := make(map[uint64]int32)
	for _, b := range p.index {
		byNode[p.blocks[b].node] = b
	}
	for _, b := range p.index {
		var chain []int32
		for c := b; ; {
			chain = append(chain, c)
			parent := p.blocks[c].key.parent
			if parent == 0 {
				break
			}
			var ok bool
			if c, ok = byNode[parent]; !ok {
				chain = nil // an ancestor was evicted: the prefix is unknown
				break
			}
		}
		if chain == nil {
			continue
		}
		var prefix []int32
		for _, c := range slices.Backward(chain) {
			prefix = append(prefix, decodeTokens(p.blocks[c].key.tokens)...)
		}
		hs := prefixHashes(prefix)[len(prefix)-bs:]
		if got := h.mem[int(b)*bs : int(b+1)*bs]; !slices.Equal(got, hs) {
			h.t.Fatalf("cached block %d does not hold the K/V of its prefix", b)
		}
	}
}

func decodeTokens(s string) []int32 {
	tokens := make([]int32, len(s)/4)
	for i := range tokens {
		tokens[i] = int32(uint32(s[4*i]) | uint32(s[4*i+1])<<8 | uint32(s[4*i+2])<<16 | uint32(s[4*i+3])<<24)
	}
	return tokens
}

// seqTokens returns n tokens start, start+1, ...
func seqTokens(start, n int) []int32 {
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(start + i)
	}
	return tokens
}
