package runtime

import (
	"math"
)

// MaxTopLogprobs is how many alternatives a token's log-probabilities can
// list, as in OpenAI's API.
const MaxTopLogprobs = 20

// Alternative is a token the model could have generated instead, with its
// log-probability.
type Alternative struct {
	ID      int32
	Logprob float32
}

// Logprobs returns the log-probability of token id under the model's
// distribution (the softmax of the raw logits, before penalties,
// temperature or truncation, as OpenAI and vLLM report it) and the top
// most likely tokens, most likely first, lower ids first among equals.
// The sums run in float64 so that a vocabulary of 150k tokens loses
// nothing to rounding.
func Logprobs(logits []float32, id int32, top int) (float32, []Alternative) {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	lp := func(i int32) float32 { return float32(float64(logits[i]) - lse) }
	if top <= 0 {
		return lp(id), nil
	}
	// An insertion into a short sorted list: top is at most 20.
	best := make([]int32, 0, top+1)
	for i, v := range logits {
		if len(best) == top && v <= logits[best[top-1]] {
			continue
		}
		j := len(best)
		best = append(best, int32(i))
		for j > 0 && logits[best[j-1]] < v {
			best[j] = best[j-1]
			j--
		}
		best[j] = int32(i)
		best = best[:min(len(best), top)]
	}
	alts := make([]Alternative, len(best))
	for i, b := range best {
		alts[i] = Alternative{ID: b, Logprob: lp(b)}
	}
	return lp(id), alts
}
