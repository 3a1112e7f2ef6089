package cpu

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestTeamRunsEachElementOnce covers sizes around the number of parts, and
// a team reused for many operations back to back, as a forward pass uses it.
func TestTeamRunsEachElementOnce(t *testing.T) {
	for _, size := range []int{1, 2, 3, 8} {
		tm := newTeam(size)
		for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 31, 32, 33, 1000} {
			for range 50 {
				hits := make([]atomic.Int32, n)
				tm.run(n, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						hits[i].Add(1)
					}
				})
				for i := range hits {
					if h := hits[i].Load(); h != 1 {
						t.Fatalf("size %d, n %d: element %d ran %d times", size, n, i, h)
					}
				}
			}
		}
	}
}

// TestTeamHelpersExit: an idle team leaves no goroutine behind.
func TestTeamHelpersExit(t *testing.T) {
	before := runtime.NumGoroutine()
	tm := newTeam(4)
	tm.run(100, func(lo, hi int) {})
	deadline := time.Now().Add(5 * time.Second)
	for tm.helpers.Load() != 0 || runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d helpers alive, %d goroutines (before %d) after 5 s idle", tm.helpers.Load(), runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
}
