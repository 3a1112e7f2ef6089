package eval

import (
	"math"
	"testing"
	"time"
)

// TestAggregateRate: the aggregate counts the tokens made after every
// sequence has its first, over the time from then to the last token.
func TestAggregateRate(t *testing.T) {
	at := func(s ...float64) []time.Time {
		var ts []time.Time
		for _, v := range s {
			ts = append(ts, time.Unix(1000, 0).Add(time.Duration(v*float64(time.Second))))
		}
		return ts
	}
	for _, tc := range []struct {
		name  string
		times [][]time.Time
		want  float64
	}{
		{"together", [][]time.Time{at(0, 1, 2, 3, 4), at(0, 1, 2, 3, 4)}, 8.0 / 4},
		// The first sequence's tokens before the second's first are not
		// counted, nor is the second's first.
		{"staggered", [][]time.Time{at(0, 1, 2, 3, 4, 5, 6), at(3, 4, 5, 6)}, 6.0 / 3},
		{"one ended before the last began", [][]time.Time{at(0, 1), at(2, 3, 4)}, 2.0 / 2},
		{"ends apart", [][]time.Time{at(0, 1, 2, 3), at(1, 2, 3, 4, 5)}, 6.0 / 4},
		{"a single token each", [][]time.Time{at(0), at(0)}, 0},
		{"none", [][]time.Time{nil, nil}, 0},
	} {
		if got := aggregateRate(tc.times); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %g tok/s, want %g", tc.name, got, tc.want)
		}
	}
}
