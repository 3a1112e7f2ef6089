package eval_test

import (
	"context"
	"math"
	"testing"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/eval"
)

// TestCompare: a model compared with itself (loaded twice) has KL 0 at
// every token and the same top token everywhere; int4 weights against the
// f32 reference have KL > 0 and some tokens ranked differently, and every
// figure equals what a plain float64 computation over the two engines'
// own logits gives. A 128-token context makes the text several windows.
func TestCompare(t *testing.T) {
	path := sharedFile(t, "stories260K.gguf")
	load := func(quant string) *runtime.Engine {
		eng, err := runtime.Load(path, runtime.Options{Device: "cpu", Quant: quant, Context: 128})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		return eng
	}
	text := storyText(t)[:3000]
	ref := load("f32")
	ctx := context.Background()

	self, err := eval.Compare(ctx, load("f32"), ref, text, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mean, _ := self.MeanKLD(); mean != 0 || self.KLDPercentile(100) != 0 || self.SameTop != self.Tokens || self.PPL != self.RefPPL {
		t.Errorf("the model against itself: mean KLD %g, max %g, same top %d of %d, perplexity %g against %g",
			mean, self.KLDPercentile(100), self.SameTop, self.Tokens, self.PPL, self.RefPPL)
	}
	if _, err := eval.Compare(ctx, ref, ref, text, nil); err == nil {
		t.Error("an engine compared with itself: no error")
	}

	q := load("int4")
	d, err := eval.Compare(ctx, q, ref, text, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The reference computation: each engine's logits of every window,
	// scored apart, then KL(p_ref ‖ p_q) = Σ p_ref·ln(p_ref/p_q).
	ids := ref.Tokenizer().Encode(text, false)
	var kls []float64
	same := 0
	var nll float64
	for start := 0; start < len(ids); start += 127 {
		chunk := []int32{int32(ref.Tokenizer().BOS())}
		for _, id := range ids[start:min(len(ids), start+127)] {
			chunk = append(chunk, int32(id))
		}
		logits := func(e *runtime.Engine) [][]float32 {
			var rows [][]float32
			if err := e.Score(ctx, chunk, func(_ int, l []float32) error {
				rows = append(rows, append([]float32(nil), l...))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			return rows
		}
		lq, lr := logits(q), logits(ref)
		for i := range lq {
			pq, pr := probs(lq[i]), probs(lr[i])
			var kl float64
			for v := range pr {
				if pr[v] > 0 {
					kl += pr[v] * math.Log(pr[v]/pq[v])
				}
			}
			kls = append(kls, kl)
			if top(pq) == top(pr) {
				same++
			}
			nll -= math.Log(pq[chunk[i+1]])
		}
	}
	if d.Tokens != len(kls) || len(d.KLD) != len(kls) {
		t.Fatalf("%d tokens (%d divergences) compared, want %d", d.Tokens, len(d.KLD), len(kls))
	}
	var sum float64
	for i, kl := range kls {
		sum += kl
		if math.Abs(d.KLD[i]-kl) > 1e-9+1e-6*kl {
			t.Errorf("token %d: KLD %g, the reference computation %g", i, d.KLD[i], kl)
		}
	}
	mean, stderr := d.MeanKLD()
	frac, _ := d.SameTopFraction()
	t.Logf("int4 against f32 over %d tokens: mean KLD %.6f ± %.6f, 99%% %.6f, max %.6f; same top %.2f%%; perplexity %.4f against %.4f",
		d.Tokens, mean, stderr, d.KLDPercentile(99), d.KLDPercentile(100), 100*frac, d.PPL, d.RefPPL)
	if want := sum / float64(len(kls)); mean <= 0 || math.Abs(mean-want) > 1e-9 {
		t.Errorf("mean KLD %g, want %g (and > 0)", mean, want)
	}
	if d.SameTop != same || same == d.Tokens {
		t.Errorf("same top token for %d of %d tokens, the reference computation %d (want < all)", d.SameTop, d.Tokens, same)
	}
	if want := math.Exp(nll / float64(len(kls))); math.Abs(d.PPL/want-1) > 1e-9 {
		t.Errorf("perplexity %g, want %g", d.PPL, want)
	}
	if lo, med, hi := d.KLDPercentile(0), d.KLDPercentile(50), d.KLDPercentile(100); !(lo <= med && med <= hi && hi > mean) {
		t.Errorf("KLD percentiles out of order: min %g, median %g, max %g (mean %g)", lo, med, hi, mean)
	}
}

// probs is softmax(logits) in float64.
func probs(logits []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	p := make([]float64, len(logits))
	var sum float64
	for i, v := range logits {
		p[i] = math.Exp(float64(v) - mx)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// top is the index of the largest value, the first among equals.
func top(p []float64) int {
	best := 0
	for i, v := range p {
		if v > p[best] {
			best = i
		}
	}
	return best
}
