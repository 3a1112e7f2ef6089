package kvcache

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestWasteOnMixedWorkload serves sequences of random lengths 1..300 the way
// the engine would (prefill of a random prompt, then one token per decode
// step), some of them after a shared system prompt. Sharing only ever
// covers full blocks and every write block is private, so the waste must be
// exactly each sequence's last partial block.
//
// For lengths uniform in 1..300 and 16-token blocks that is 2274 wasted
// slots per 47424 allocated, 4.8%, in expectation; sharing a system prompt
// raises the ratio only because fewer blocks are allocated.
func TestWasteOnMixedWorkload(t *testing.T) {
	const bs, seqs = 16, 400
	for _, tc := range []struct {
		name   string
		shared bool
		max    float64
	}{
		{"independent", false, 0.05},
		{"half after a 64-token system prompt", true, 0.06},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 0))
			h := newHarness(t, seqs*19, bs)
			system := seqTokens(10_000, 64)
			wasted, live := 0, make([]*Seq, 0, seqs)
			for i := range seqs {
				length := 1 + r.IntN(300)
				prompt := seqTokens(100_000*i, 1+r.IntN(length))
				s := h.p.NewSeq()
				if tc.shared && i%2 == 0 && length > len(system) {
					// Still at most length tokens: length > 64.
					prompt = slices.Concat(system, seqTokens(100_000*i, max(1, len(prompt)-len(system))))
				}
				// Share, prefill, decode: the harness is bypassed for speed,
				// invariants are checked below.
				n := s.Share(prompt)
				mustExtend(t, s, prompt[n:])
				for s.Len() < length {
					mustExtend(t, s, []int32{int32(s.Len())})
				}
				wasted += h.p.BlocksNeeded(length)*bs - length
				live = append(live, s)
				if i%50 == 0 {
					checkInvariants(t, h.p, live...)
				}
			}
			checkInvariants(t, h.p, live...)
			st := h.p.Stats()
			if got := st.AllocatedSlots - st.UsedSlots; got != wasted {
				t.Errorf("%d slots wasted, want %d: one partial block per sequence", got, wasted)
			}
			t.Logf("%d sequences: %d blocks used, %d/%d slots hold tokens, waste %.2f%%, prefix hit rate %.2f",
				seqs, st.Used, st.UsedSlots, st.AllocatedSlots, 100*st.Waste, st.HitRate)
			if st.Waste >= tc.max {
				t.Errorf("waste %.4f, want < %.2f", st.Waste, tc.max)
			}
		})
	}
}

func mustExtend(t testing.TB, s *Seq, tokens []int32) {
	if _, err := s.Reserve(len(tokens)); err != nil {
		t.Fatal(err)
	}
	s.Commit(tokens)
}
