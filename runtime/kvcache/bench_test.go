package kvcache

import (
	"fmt"
	"testing"
)

// BenchmarkReserveCommit measures the scheduler's per-step bookkeeping: each
// op reserves and commits step tokens (1: decode, 512: a prefill chunk); a
// sequence is released and restarted when it reaches 4096 tokens, so full
// blocks are registered and evicted along the way.
func BenchmarkReserveCommit(b *testing.B) {
	for _, step := range []int{1, 512} {
		b.Run(fmt.Sprintf("step=%d", step), func(b *testing.B) {
			p, err := NewPool(1024, 16)
			if err != nil {
				b.Fatal(err)
			}
			s, tokens := p.NewSeq(), seqTokens(0, step)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if s.Len()+step > 4096 {
					s.Release()
				}
				if _, err := s.Reserve(step); err != nil {
					b.Fatal(err)
				}
				tokens[0] = int32(i) // a new prefix each time
				s.Commit(tokens)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(step), "ns/token")
		})
	}
}
