package kvcache

import "testing"

// Misuse is a scheduler bug, not a runtime condition: it panics rather than
// corrupting the tables.
func TestMisusePanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		call func(s *Seq)
	}{
		{"Share on a non-empty Seq", func(s *Seq) { s.Share(seqTokens(0, 9)) }},
		{"Commit past the reservation", func(s *Seq) { s.Commit(seqTokens(0, 4)) }},
		{"Truncate past Len", func(s *Seq) { s.Truncate(6) }},
		{"Truncate below 0", func(s *Seq) { s.Truncate(-1) }},
		{"Slot past the table", func(s *Seq) { s.Slot(8) }},
		{"Slot below 0", func(s *Seq) { s.Slot(-1) }},
		{"Reserve a negative count", func(s *Seq) { s.Reserve(-1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := NewPool(4, 4)
			s := p.NewSeq()
			mustExtend(t, s, seqTokens(0, 5))
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			tc.call(s)
		})
	}
}
