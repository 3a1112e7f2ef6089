package runtime

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
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
		toks  []int32
		k     int
		want  []int32
		match int
	}{
		{[]int32{1, 2, 3, 4, 1, 2}, 3, []int32{3, 4, 1}, 2},
		{[]int32{5, 6, 7, 5, 6, 8, 9, 5, 6}, 2, []int32{8, 9}, 2}, // the latest match wins
		{[]int32{1, 2, 3}, 2, nil, 0},
		{[]int32{7}, 2, nil, 0},
		{[]int32{1, 2, 9, 9, 1, 2, 3, 4, 5, 9}, 3, []int32{1, 2, 3}, 1}, // after the latest 9
		{[]int32{1, 2, 3, 4, 5, 1, 2, 3, 4}, 8, []int32{5, 1, 2, 3, 4}, 4},
		{[]int32{1, 2, 1, 2}, 0, nil, 0},
	} {
		if got, n := lookup(tc.toks, tc.k); !slices.Equal(got, tc.want) || n != tc.match {
			t.Errorf("lookup(%v, %d) = %v, %d, want %v, %d", tc.toks, tc.k, got, n, tc.want, tc.match)
		}
	}
}
