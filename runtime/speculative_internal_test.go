package runtime

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestSpeculativeSamplingDistribution: tokens that come out of draft
// verification are distributed as the target's own samples. For fixed
// target logits at each position and a draft that proposes from its own
// (different) distribution, the first emitted token and the second one
// (given the first was accepted) are tallied over many trials and compared
// with the target's distribution by a chi-square test at p = 0.001. A
// wrong acceptance rule must fail the same test.
func TestSpeculativeSamplingDistribution(t *testing.T) {
	const vocab, trials = 8, 30000
	rng := rand.New(rand.NewPCG(7, 7))
	randomLogits := func() []float32 {
		l := make([]float32, vocab)
		for i := range l {
			l[i] = float32(rng.NormFloat64() * 1.5)
		}
		return l
	}
	target := [][]float32{randomLogits(), randomLogits(), randomLogits()}
	draftLogits := [][]float32{randomLogits(), randomLogits()}
	opts := SamplerOptions{Temperature: 1, Seed: 1}

	// The target's own distribution at position 0.
	want := distOf(NewSampler(opts), target[0])

	run := func(rule func(p, q float32, u float64) bool) []int {
		counts := make([]int, vocab)
		s := NewSampler(opts)
		ds := NewSampler(SamplerOptions{Temperature: 1, Seed: 2})
		for range trials {
			var draft []int32
			var qs [][]candidate
			for _, l := range draftLogits {
				q := cloneDist(ds.Dist(slices.Clone(l), nil))
				draft = append(draft, int32(ds.pick(q)))
				qs = append(qs, q)
			}
			rows := [][]float32{slices.Clone(target[0]), slices.Clone(target[1]), slices.Clone(target[2])}
			out := verifyWith(rule, s, nil, draft, qs, rows)
			counts[out[0]]++
		}
		return counts
	}
	if chi2 := chiSquare(run(acceptRatio), want, trials); chi2 > chi2Crit7 {
		t.Errorf("the acceptance rule changes the distribution: chi² = %.1f > %.1f", chi2, chi2Crit7)
	}
	wrong := func(p, q float32, u float64) bool { return u < float64(p) } // ignores q
	if chi2 := chiSquare(run(wrong), want, trials); chi2 <= chi2Crit7 {
		t.Errorf("a wrong acceptance rule passed: chi² = %.1f", chi2)
	}
	always := func(p, q float32, u float64) bool { return true }
	if chi2 := chiSquare(run(always), want, trials); chi2 <= chi2Crit7 {
		t.Errorf("accepting every draft passed: chi² = %.1f", chi2)
	}
}

// TestSpeculativeSamplingNgram: with a deterministic (one-hot) draft, the
// emitted token is still distributed as the target's.
func TestSpeculativeSamplingNgram(t *testing.T) {
	const trials = 30000
	target := [][]float32{{0.5, 2, -1, 0.3, 1.2, 0, -0.5, 0.9}, {1, 1, 1, 1, 1, 1, 1, 1}}
	opts := SamplerOptions{Temperature: 0.8, Seed: 3}
	want := distOf(NewSampler(opts), target[0])
	s := NewSampler(opts)
	counts := make([]int, 8)
	for range trials {
		out := verifySampled(s, nil, []int32{4}, nil, [][]float32{slices.Clone(target[0]), slices.Clone(target[1])})
		counts[out[0]]++
	}
	if chi2 := chiSquare(counts, want, trials); chi2 > chi2Crit7 {
		t.Errorf("chi² = %.1f > %.1f: counts %v", chi2, chi2Crit7, counts)
	}
}

// chi2Crit7 is the chi-square critical value for 7 degrees of freedom at
// p = 0.001.
const chi2Crit7 = 24.32

func distOf(s *Sampler, logits []float32) []float64 {
	p := make([]float64, len(logits))
	for _, c := range s.Dist(slices.Clone(logits), nil) {
		p[c.id] = float64(c.p)
	}
	return p
}

func chiSquare(counts []int, p []float64, n int) float64 {
	var chi2 float64
	for i, c := range counts {
		exp := p[i] * float64(n)
		if exp == 0 {
			if c > 0 {
				return math.Inf(1)
			}
			continue
		}
		d := float64(c) - exp
		chi2 += d * d / exp
	}
	return chi2
}

func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		toks []int32
		k    int
		want []int32
	}{
		{[]int32{1, 2, 3, 4, 1, 2}, 3, []int32{3, 4, 1}},
		{[]int32{5, 6, 7, 5, 6, 8, 9, 5, 6}, 2, []int32{8, 9}}, // the latest match wins
		{[]int32{1, 2, 3}, 2, nil},
		{[]int32{7}, 2, nil},
		{[]int32{1, 2, 9, 9, 1, 2, 3, 4, 5, 9}, 3, []int32{1, 2, 3}}, // after the latest 9
	} {
		if got := lookup(tc.toks, tc.k); !slices.Equal(got, tc.want) {
			t.Errorf("lookup(%v, %d) = %v, want %v", tc.toks, tc.k, got, tc.want)
		}
	}
}

// TestSpecObserve drives the switch that turns speculation off: plain
// decoding is measured first; a window of speculation that does not beat
// it turns speculation off for a growing backoff, one that does keeps it
// on; and steps with nothing to propose while speculating (an n-gram draft
// without a match) count in speculation's window rather than ending a
// plain period that is not running.
func TestSpecObserve(t *testing.T) {
	ms := time.Millisecond
	p := newSpec()
	for range plainWindow / 4 { // four tokens per 400 ms chain: 10 tok/s
		p.observe(400*ms, 4, 0, 0)
	}
	if p.off != 0 || p.plain != 10 || !p.speculating() {
		t.Fatalf("after the plain window: off %d, plain %g, speculating %v", p.off, p.plain, p.speculating())
	}
	p.observe(900*ms, 2, 2, 1) // the first step catches up: not measured
	// Speculation at 2 tok/s interleaved with a matchless plain step at
	// 10 tok/s: after three steps, 6 tokens in 1.4 s, clearly slower.
	p.observe(500*ms, 1, 2, 0)
	p.observe(400*ms, 4, 0, 0) // nothing proposed
	if p.plain != 10 || p.off != 0 || p.window.steps != 2 {
		t.Fatalf("a matchless step while speculating: plain %g, off %d, window %+v", p.plain, p.off, p.window)
	}
	p.observe(500*ms, 1, 1, 0)
	if p.off != firstBackoff || p.backoff != 4*firstBackoff || p.plain != 10 {
		t.Fatalf("speculation slower than plain: off %d, next backoff %d, plain %g", p.off, p.backoff, p.plain)
	}
	// Back on after the backoff, and faster than plain this time.
	for p.off > 0 {
		p.observe(400*ms, 4, 0, 0)
	}
	p.observe(300*ms, 3, 2, 2)
	for range specWindow / 4 {
		p.observe(200*ms, 4, 3, 3) // 20 tok/s
	}
	if p.off != 0 || p.backoff != firstBackoff || !p.speculating() {
		t.Fatalf("speculation faster than plain: off %d, backoff %d", p.off, p.backoff)
	}
}
