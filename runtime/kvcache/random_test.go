package kvcache

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestRandomOperations runs seeded random mixes of every operation against
// the harness, whose model (committed tokens) and simulated device memory
// are checked, with the invariants, after each one. Pools are small so that
// ErrFull, eviction and copy-on-write are common; tokens come from a tiny
// alphabet and a few shared "system prompts" so that prefixes collide.
func TestRandomOperations(t *testing.T) {
	for _, tc := range []struct {
		blocks, blockSize, ops int
		seed                   uint64
	}{
		{24, 1, 4000, 1},
		{20, 3, 4000, 2},
		{40, 4, 6000, 3},
		{24, 16, 4000, 4},
	} {
		t.Run(fmt.Sprintf("%dx%d", tc.blocks, tc.blockSize), func(t *testing.T) {
			r := rand.New(rand.NewPCG(tc.seed, 0))
			h := newHarness(t, tc.blocks, tc.blockSize)
			bases := make([][]int32, 3)
			for i := range bases {
				bases[i] = randTokens(r, 8*tc.blockSize)
			}
			// token returns the next token of a sequence at pos: mostly its
			// base prompt's, sometimes noise.
			token := func(base, pos int) int32 {
				if r.IntN(2*tc.blockSize) == 0 {
					return int32(r.IntN(3))
				}
				return bases[base][pos%len(bases[base])]
			}
			var counts struct{ full, hits, trunc int }
			for range tc.ops {
				if len(h.order) == 0 || r.IntN(20) == 0 && len(h.order) < 8 {
					h.newSeq()
					continue
				}
				s := h.order[r.IntN(len(h.order))]
				base := r.IntN(len(bases))
				switch op := r.IntN(10); {
				case op <= 3 && len(s.Table()) == 0:
					prompt := make([]int32, r.IntN(4*tc.blockSize+2))
					for i := range prompt {
						prompt[i] = token(base, i)
					}
					if h.share(s, prompt) > 0 {
						counts.hits++
					}
				case op <= 4:
					tokens := make([]int32, 1+r.IntN(2*tc.blockSize))
					for i := range tokens {
						tokens[i] = token(base, s.Len()+i)
					}
					if h.extend(s, tokens...) != nil {
						counts.full++
					}
				case op == 5:
					if _, err := h.reserve(s, r.IntN(2*tc.blockSize)); err != nil {
						counts.full++
					}
				case op == 6 && s.cap > s.Len(), op == 7 && s.cap > s.Len():
					tokens := make([]int32, 1+r.IntN(s.cap-s.Len()))
					for i := range tokens {
						tokens[i] = token(base, s.Len()+i)
					}
					h.commit(s, tokens...)
				case op <= 8:
					h.truncate(s, r.IntN(s.Len()+1))
					counts.trunc++
				default:
					h.release(s)
				}
			}
			st := h.p.Stats()
			t.Logf("%d ErrFull, %d sharing hits (rate %.2f), %d copies, %d truncates", counts.full, counts.hits, st.HitRate, h.copies, counts.trunc)
			// With one-token blocks no block is ever partly filled: nothing to copy.
			if counts.full == 0 || counts.hits == 0 || h.copies == 0 && tc.blockSize > 1 {
				t.Errorf("the mix missed a path: %d ErrFull, %d hits, %d copies", counts.full, counts.hits, h.copies)
			}
		})
	}
}

func randTokens(r *rand.Rand, n int) []int32 {
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(r.IntN(3))
	}
	return tokens
}
