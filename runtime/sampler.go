package runtime

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// SamplerOptions choose how the next token is drawn from the logits. The
// zero value is greedy decoding.
type SamplerOptions struct {
	// Temperature divides the logits; 0 means greedy (argmax).
	Temperature float32
	// TopK keeps the K most likely tokens (0: all).
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probabilities
	// add up to at least P (0 or 1: all).
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely (0: none).
	MinP float32
	// RepeatPenalty divides positive (and multiplies negative) logits of the
	// tokens among the last RepeatLastN (1 or 0: off).
	RepeatPenalty float32
	RepeatLastN   int
	// FrequencyPenalty and PresencePenalty are OpenAI's additive penalties
	// over the generated tokens (the prompt does not count): a token's
	// logit loses FrequencyPenalty for each time it was generated, and
	// PresencePenalty once if it was at all. Both lie in [-2, 2]; 0 is off.
	FrequencyPenalty, PresencePenalty float32
	// LogitBias is added to the logits of the tokens it names, in [-100,
	// 100] as in OpenAI's API: -100 bans a token, 100 all but forces it.
	LogitBias map[int32]float32
	// Seed makes sampling reproducible: the same seed, model and prompt give
	// the same tokens.
	Seed uint64
}

// Validate reports options that make no sense.
func (o SamplerOptions) Validate() error {
	switch {
	case o.Temperature < 0 || math.IsNaN(float64(o.Temperature)):
		return fmt.Errorf("temperature %g must be >= 0", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("top-k %d must be >= 0", o.TopK)
	case o.TopP < 0 || o.TopP > 1:
		return fmt.Errorf("top-p %g must be in [0, 1]", o.TopP)
	case o.MinP < 0 || o.MinP > 1:
		return fmt.Errorf("min-p %g must be in [0, 1]", o.MinP)
	case o.RepeatPenalty < 0:
		return fmt.Errorf("repeat penalty %g must be >= 0", o.RepeatPenalty)
	case o.RepeatLastN < 0:
		return fmt.Errorf("repeat-last-n %d must be >= 0", o.RepeatLastN)
	case !(o.FrequencyPenalty >= -2 && o.FrequencyPenalty <= 2):
		return fmt.Errorf("frequency penalty %g must be in [-2, 2]", o.FrequencyPenalty)
	case !(o.PresencePenalty >= -2 && o.PresencePenalty <= 2):
		return fmt.Errorf("presence penalty %g must be in [-2, 2]", o.PresencePenalty)
	case !validBias(o.LogitBias):
		return fmt.Errorf("logit bias values must be in [-100, 100] and name token ids >= 0")
	case math.IsNaN(float64(o.TopP)) || math.IsNaN(float64(o.MinP)) || math.IsNaN(float64(o.RepeatPenalty)) || math.IsInf(float64(o.Temperature), 0):
		return fmt.Errorf("sampling options must be finite numbers")
	}
	return nil
}

// greedy is true when the next token is the argmax of the raw logits, which
// a backend can compute without sending the logits back.
func (o SamplerOptions) greedy() bool {
	return o.Temperature == 0 && !o.penalised()
}

// penalised is true when a penalty changes the logits of tokens already
// seen, so that sampling needs every logit rather than a top-k set.
func (o SamplerOptions) penalised() bool {
	return o.RepeatPenalty != 0 && o.RepeatPenalty != 1 || o.FrequencyPenalty != 0 || o.PresencePenalty != 0 || len(o.LogitBias) > 0
}

func validBias(b map[int32]float32) bool {
	for id, v := range b {
		if id < 0 || !(v >= -100 && v <= 100) {
			return false
		}
	}
	return true
}

// Sampler draws tokens from logits. It is not safe for concurrent use.
type Sampler struct {
	opts   SamplerOptions
	src    *rand.PCG // rng's source, whose state draws and skip save and move
	rng    *rand.Rand
	cand   []candidate
	prompt int // leading tokens of a history that are the prompt (for the OpenAI penalties)
}

type candidate struct {
	id int
	p  float32 // logit, then probability
}

// NewSampler returns a sampler seeded with opts.Seed.
func NewSampler(opts SamplerOptions) *Sampler {
	src := rand.NewPCG(opts.Seed, 0x7e55e7a)
	return &Sampler{opts: opts, src: src, rng: rand.New(src)}
}

// Sample picks the next token. history holds the tokens so far (for the
// repetition penalty). logits is modified.
func (s *Sampler) Sample(logits []float32, history []int32) int {
	return s.pick(s.Dist(logits, history))
}

// Dist is the distribution Sample draws from: the surviving tokens with
// their probabilities (summing to one), most likely first. Greedy
// decoding's distribution is the argmax alone. logits is modified; the
// result is valid until the sampler's next call.
func (s *Sampler) Dist(logits []float32, history []int32) []candidate {
	s.penalise(logits, history)
	return s.dist(logits)
}

// penalise applies the logit bias and the penalties to logits, in place.
// penalties lists the same changes for a backend to apply.
func (s *Sampler) penalise(logits []float32, history []int32) {
	o := s.opts
	for id, b := range o.LogitBias {
		if int(id) < len(logits) {
			logits[id] += b
		}
	}
	if o.RepeatPenalty != 0 && o.RepeatPenalty != 1 {
		recent := history[max(0, len(history)-o.RepeatLastN):]
		seen := map[int32]bool{}
		for _, t := range recent {
			if seen[t] || int(t) >= len(logits) {
				continue
			}
			seen[t] = true
			if logits[t] > 0 {
				logits[t] /= o.RepeatPenalty
			} else {
				logits[t] *= o.RepeatPenalty
			}
		}
	}
	if o.FrequencyPenalty != 0 || o.PresencePenalty != 0 {
		counts := map[int32]int{}
		for _, t := range history[min(s.prompt, len(history)):] {
			if int(t) < len(logits) && t >= 0 {
				counts[t]++
			}
		}
		for t, n := range counts {
			logits[t] -= float32(float32(n)*o.FrequencyPenalty) + o.PresencePenalty
		}
	}
}

// dist is Dist of logits already penalised.
func (s *Sampler) dist(logits []float32) []candidate {
	o := s.opts
	if o.Temperature == 0 {
		best := 0
		for i, v := range logits {
			if v > logits[best] {
				best = i
			}
		}
		s.cand = append(s.cand[:0], candidate{best, 1})
		return s.cand
	}
	// Candidates sorted by logit, most likely first, ties by id.
	c := s.cand[:0]
	for i, v := range logits {
		c = append(c, candidate{i, v})
	}
	slices.SortFunc(c, func(a, b candidate) int {
		if r := cmp.Compare(b.p, a.p); r != 0 {
			return r
		}
		return cmp.Compare(a.id, b.id)
	})
	if o.TopK > 0 && o.TopK < len(c) {
		c = c[:o.TopK]
	}
	c = dropMasked(c)
	s.cand = c
	return s.filter(c)
}

// usesCandidates reports whether the sampler can draw from a backend's
// top-K candidate set instead of the whole vocabulary's logits: top-k is
// on and no repetition penalty needs the other logits.
func (o SamplerOptions) usesCandidates(max int) bool {
	return o.Temperature > 0 && o.TopK > 0 && o.TopK <= max && !o.penalised()
}

// SampleTop draws from the top-K candidates of the logits, given largest
// first with lower ids first among equals (as backend.TopK returns them).
// It picks the token Sample would pick from the whole logits.
func (s *Sampler) SampleTop(ids []int32, logits []float32) int {
	c := s.cand[:0]
	for i, id := range ids {
		c = append(c, candidate{int(id), logits[i]})
	}
	c = dropMasked(c)
	s.cand = c
	return s.pick(s.filter(c))
}

// dropMasked cuts candidates sorted most likely first at the first -Inf
// logit (a token a grammar masked), keeping at least one: rounding in pick
// must never land on a masked token.
func dropMasked(c []candidate) []candidate {
	for i, x := range c {
		if i > 0 && math.IsInf(float64(x.p), -1) {
			return c[:i]
		}
	}
	return c
}

// filter turns candidates sorted most likely first into probabilities:
// softmax with temperature, then min-p and top-p, renormalised. top-p's
// running sum is float64, as every sum here: a float32 running sum's
// rounding depends on the order it adds in, which a GPU reproducing the
// cut past thousands of candidates (sample.wgsl's radix selection, which
// sums exactly) cannot follow; in float64 the cut is the exact one but
// where it lies within ~1e-12 of top-p.
func (s *Sampler) filter(c []candidate) []candidate {
	o := s.opts
	mx := c[0].p
	var sum float64
	for i := range c {
		c[i].p = float32(math.Exp(float64((c[i].p - mx) / o.Temperature)))
		sum += float64(c[i].p)
	}
	for i := range c {
		c[i].p = float32(float64(c[i].p) / sum)
	}
	if o.MinP > 0 {
		floor := c[0].p * o.MinP
		n := 1
		for n < len(c) && c[n].p >= floor {
			n++
		}
		c = c[:n]
	}
	if o.TopP > 0 && o.TopP < 1 {
		var cum float64
		for i := range c {
			cum += float64(c[i].p)
			if cum >= float64(o.TopP) {
				c = c[:i+1]
				break
			}
		}
	}
	var total float64
	for _, x := range c {
		total += float64(x.p)
	}
	for i := range c {
		c[i].p = float32(float64(c[i].p) / total)
	}
	return c
}

// pick draws a token from a distribution.
func (s *Sampler) pick(c []candidate) int {
	if len(c) == 1 {
		return c[0].id
	}
	r := s.rng.Float64()
	for _, x := range c {
		r -= float64(x.p)
		if r < 0 {
			return x.id
		}
	}
	return c[len(c)-1].id
}

// penalties lists what penalise does to a vocabulary of vocab logits after
// history, one entry a token changed, for a backend to apply (Penalty's
// steps are penalise's, in its order).
func (s *Sampler) penalties(history []int32, vocab int) []backend.Penalty {
	o := s.opts
	at := map[int32]int{}
	var out []backend.Penalty
	entry := func(id int32) *backend.Penalty {
		i, ok := at[id]
		if !ok {
			i = len(out)
			at[id] = i
			out = append(out, backend.Penalty{ID: id})
		}
		return &out[i]
	}
	for id, b := range o.LogitBias {
		if int(id) < vocab {
			entry(id).Bias = b
		}
	}
	if o.RepeatPenalty != 0 && o.RepeatPenalty != 1 {
		for _, t := range history[max(0, len(history)-o.RepeatLastN):] {
			if t >= 0 && int(t) < vocab {
				entry(t).Repeat = o.RepeatPenalty
			}
		}
	}
	if o.FrequencyPenalty != 0 || o.PresencePenalty != 0 {
		counts := map[int32]int{}
		for _, t := range history[min(s.prompt, len(history)):] {
			if int(t) < vocab && t >= 0 {
				counts[t]++
			}
		}
		for t, n := range counts {
			entry(t).Sub = float32(float32(n)*o.FrequencyPenalty) + o.PresencePenalty
		}
	}
	slices.SortFunc(out, func(a, b backend.Penalty) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// draws returns the next n values pick would draw, leaving the stream
// where it is: a backend that samples takes them, and skip then moves
// the stream past those it used.
func (s *Sampler) draws(n int) []float64 {
	state, err := s.src.MarshalBinary()
	if err != nil { // PCG's MarshalBinary cannot fail
		panic(err)
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = s.rng.Float64()
	}
	if err := s.src.UnmarshalBinary(state); err != nil {
		panic(err)
	}
	return out
}

// skip moves the stream past n draws.
func (s *Sampler) skip(n int) {
	for range n {
		s.rng.Float64()
	}
}

// onDevice reports whether a backend's sample kernel can draw for these
// options from a vocabulary of vocab (at most backend.MaxSampleColumns):
// top-k is off (or covers the row) or at most backend.MaxTopK. Greedy
// decoding without penalties is the plain argmax, which needs no sampling.
func (o SamplerOptions) onDevice(vocab int) bool {
	return !o.greedy() && vocab <= backend.MaxSampleColumns && (o.TopK == 0 || o.TopK >= vocab || o.TopK <= backend.MaxTopK)
}

// historyPenalised reports whether the penalties depend on the tokens
// generated so far (the logit bias does not): such rows cannot chain, the
// host not knowing a chain's tokens before it ends.
func (o SamplerOptions) historyPenalised() bool {
	return o.RepeatPenalty != 0 && o.RepeatPenalty != 1 && o.RepeatLastN > 0 || o.FrequencyPenalty != 0 || o.PresencePenalty != 0
}

// sampleRow is how a backend draws for s after history, with n draws.
func (s *Sampler) sampleRow(history []int32, vocab, n int) backend.SampleRow {
	o := s.opts
	r := backend.SampleRow{Temperature: o.Temperature, TopP: o.TopP, MinP: o.MinP, Penalties: s.penalties(history, vocab)}
	if o.TopK > 0 && o.TopK < vocab {
		r.TopK = o.TopK
	}
	if o.Temperature > 0 {
		r.Draws = s.draws(n)
	}
	return r
}

// samplePenalised is Sample of logits a backend already penalised.
func (s *Sampler) samplePenalised(logits []float32) int {
	return s.pick(s.dist(logits))
}
