package runtime

import (
	"math"
	"sort"
	"testing"
)

func TestSamplerDeterministicCases(t *testing.T) {
	logits := []float32{1, 3, 2, 3.5, -1}
	tests := []struct {
		name    string
		opts    SamplerOptions
		history []int32
		want    int
	}{
		{"greedy", SamplerOptions{}, nil, 3},
		{"top-k 1", SamplerOptions{Temperature: 1, TopK: 1}, nil, 3},
		{"tiny top-p", SamplerOptions{Temperature: 1, TopP: 1e-6}, nil, 3},
		{"min-p 1", SamplerOptions{Temperature: 2, MinP: 1}, nil, 3},
		{"penalty moves greedy", SamplerOptions{RepeatPenalty: 2, RepeatLastN: 4}, []int32{3}, 1},
		{"penalty outside window", SamplerOptions{RepeatPenalty: 2, RepeatLastN: 1}, []int32{3, 0}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(20) {
				tt.opts.Seed = seed
				l := append([]float32(nil), logits...)
				if got := NewSampler(tt.opts).Sample(l, tt.history); got != tt.want {
					t.Fatalf("seed %d: got %d, want %d", seed, got, tt.want)
				}
			}
		})
	}
}

// TestSamplerDistribution draws many tokens and checks their frequencies
// against the softmax with a chi-square test (p = 0.001 critical value).
func TestSamplerDistribution(t *testing.T) {
	logits := []float32{0.5, 1.5, -0.2, 1.0, 0.0, 2.0}
	tests := []struct {
		name string
		opts SamplerOptions
		keep []int // tokens that survive the filters
	}{
		{"plain", SamplerOptions{Temperature: 1}, []int{0, 1, 2, 3, 4, 5}},
		{"hot", SamplerOptions{Temperature: 1.7}, []int{0, 1, 2, 3, 4, 5}},
		{"top-k 3", SamplerOptions{Temperature: 1, TopK: 3}, []int{5, 1, 3}},
		{"top-p .7", SamplerOptions{Temperature: 1, TopP: 0.7}, []int{5, 1, 3}},
	}
	const n = 40000
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Seed = 99
			s := NewSampler(tt.opts)
			counts := make([]int, len(logits))
			for range n {
				counts[s.Sample(append([]float32(nil), logits...), nil)]++
			}
			var z float64
			for _, i := range tt.keep {
				z += math.Exp(float64(logits[i]) / float64(tt.opts.Temperature))
			}
			kept := map[int]bool{}
			var chi2 float64
			for _, i := range tt.keep {
				kept[i] = true
				exp := n * math.Exp(float64(logits[i])/float64(tt.opts.Temperature)) / z
				d := float64(counts[i]) - exp
				chi2 += d * d / exp
			}
			for i, c := range counts {
				if !kept[i] && c > 0 {
					t.Errorf("token %d drawn %d times but should be filtered", i, c)
				}
			}
			// Critical values at p=0.001 for 2 and 5 degrees of freedom.
			crit := map[int]float64{2: 13.82, 5: 20.52}[len(tt.keep)-1]
			if chi2 > crit {
				t.Errorf("chi² = %.2f > %.2f: counts %v", chi2, crit, counts)
			}
		})
	}
}

func TestSamplerOptionsValidate(t *testing.T) {
	bad := []SamplerOptions{{Temperature: -1}, {TopK: -1}, {TopP: 1.5}, {MinP: -0.1}, {RepeatPenalty: -1}, {RepeatLastN: -3}}
	for _, o := range bad {
		if o.Validate() == nil {
			t.Errorf("%+v: want an error", o)
		}
	}
	if err := (SamplerOptions{Temperature: 0.8, TopK: 40, TopP: 0.9}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestSampleTopMatchesSample: drawing from the top-K candidates picks the
// same tokens as drawing from the whole logits, seed for seed.
func TestSampleTopMatchesSample(t *testing.T) {
	rng := NewSampler(SamplerOptions{Seed: 5}).rng
	logits := make([]float32, 1000)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	logits[10], logits[20] = logits[30], logits[30] // ties
	for _, o := range []SamplerOptions{
		{Temperature: 1, TopK: 40}, {Temperature: 0.7, TopK: 5, TopP: 0.9}, {Temperature: 1.3, TopK: 256, MinP: 0.05},
	} {
		full, top := NewSampler(o), NewSampler(o)
		for i := range 200 {
			ids, vals := topK(logits, o.TopK)
			a := full.Sample(append([]float32(nil), logits...), nil)
			b := top.SampleTop(ids, vals)
			if a != b {
				t.Fatalf("%+v draw %d: Sample %d, SampleTop %d", o, i, a, b)
			}
		}
	}
}

// topK is the plain definition: sort, lower index first among equals.
func topK(x []float32, k int) ([]int32, []float32) {
	ids := make([]int32, len(x))
	for i := range ids {
		ids[i] = int32(i)
	}
	sort.SliceStable(ids, func(a, b int) bool { return x[ids[a]] > x[ids[b]] })
	vals := make([]float32, k)
	for i := range vals {
		vals[i] = x[ids[i]]
	}
	return ids[:k], vals
}
