package eval

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// Perplexity is exp of the mean negative log-likelihood of each token of
// text given the ones before it, over windows of the model's context (each
// window starts afresh with BOS). progress, if not nil, is called with the
// tokens scored so far and the total.
func Perplexity(ctx context.Context, e *runtime.Engine, text string, progress func(done, total int)) (ppl float64, tokens int, err error) {
	ids, err := scoredText(e, text)
	if err != nil {
		return 0, 0, err
	}
	var nll float64
	for chunk := range windows(e.Tokenizer(), ids, e.Model().Config.Context) {
		err := e.Score(ctx, chunk, func(i int, logits []float32) error {
			nll -= logSoftmaxAt(logits, int(chunk[i+1]))
			tokens++
			if progress != nil {
				progress(tokens, len(ids))
			}
			return nil
		})
		if err != nil {
			return 0, tokens, err
		}
	}
	return math.Exp(nll / float64(tokens)), tokens, nil
}

// scoredText is text's tokens, at least 2 of them.
func scoredText(e *runtime.Engine, text string) ([]int, error) {
	ids := e.Tokenizer().Encode(text, false)
	if len(ids) < 2 {
		return nil, fmt.Errorf("perplexity needs at least 2 tokens of text, got %d", len(ids))
	}
	return ids, nil
}

// windows cuts ids into the windows that are scored, each starting afresh
// with BOS and as long as a context of ctx tokens allows.
func windows(tok tokenizer.Tokenizer, ids []int, ctx int) iter.Seq[[]int32] {
	bos := int32(tok.BOS())
	window := ctx - 1
	return func(yield func([]int32) bool) {
		for start := 0; start < len(ids); start += window {
			chunk := []int32{}
			if bos >= 0 {
				chunk = append(chunk, bos)
			}
			for _, id := range ids[start:min(len(ids), start+window)] {
				chunk = append(chunk, int32(id))
			}
			if !yield(chunk) {
				return
			}
		}
	}
}

// logSoftmaxAt is log(softmax(logits)[i]), computed stably in float64.
func logSoftmaxAt(logits []float32, i int) float64 { return float64(logits[i]) - logNorm(logits) }

// logNorm is ln Σ exp(logits), computed stably in float64.
func logNorm(logits []float32) float64 {
	mx := float64(logits[0])
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(sum)
}

// Divergence compares a model's token distributions with a reference's
// over the same text, as llama.cpp's perplexity tool does with
// --kl-divergence: for each scored token, the KL divergence
// KL(ref ‖ model) = Σ_v p_ref(v)·(ln p_ref(v) − ln p_model(v)) of the
// distributions of the next token, and whether both put the same token on
// top.
type Divergence struct {
	Tokens      int
	PPL, RefPPL float64   // perplexity of the model and of the reference
	KLD         []float64 // per scored token, in the text's order
	SameTop     int       // tokens whose most likely next token is the same in both
	SumSqDeltaP float64   // Σ (p_model(t) − p_ref(t))² of the actual next token t
	sortedKLD   []float64 // KLD sorted, made on first use
}

// Compare scores text with e and with ref (another engine with the same
// vocabulary, for example the same file at full precision), in lockstep:
// the reference's logits of a position wait for the model's, so memory
// holds a few positions' distributions, never a whole window's. Windows
// are those of Perplexity, of the shorter context of the two.
func Compare(ctx context.Context, e, ref *runtime.Engine, text string, progress func(done, total int)) (*Divergence, error) {
	if ref == e {
		return nil, fmt.Errorf("compare: the reference must be another engine (load the model again)")
	}
	if v, rv := e.Model().Config.Vocab, ref.Model().Config.Vocab; v != rv {
		return nil, fmt.Errorf("compare: vocabularies of %d and %d tokens", v, rv)
	}
	ids, err := scoredText(e, text)
	if err != nil {
		return nil, err
	}
	d := &Divergence{}
	var nll, refNLL float64
	for chunk := range windows(e.Tokenizer(), ids, min(e.Model().Config.Context, ref.Model().Config.Context)) {
		err := scorePair(ctx, e, ref, chunk, func(i int, logits, refLogits []float32) {
			lq, lb := logSoftmax(logits), logSoftmax(refLogits)
			next := int(chunk[i+1])
			nll -= lq[next]
			refNLL -= lb[next]
			var kl float64
			for v, b := range lb {
				kl += float64(math.Exp(b) * (b - lq[v]))
			}
			d.KLD = append(d.KLD, kl)
			if backend.ArgmaxRow(logits) == backend.ArgmaxRow(refLogits) {
				d.SameTop++
			}
			dp := math.Exp(lq[next]) - math.Exp(lb[next])
			d.SumSqDeltaP += float64(dp * dp)
			d.Tokens++
			if progress != nil {
				progress(d.Tokens, len(ids))
			}
		})
		if err != nil {
			return nil, err
		}
	}
	d.PPL, d.RefPPL = math.Exp(nll/float64(d.Tokens)), math.Exp(refNLL/float64(d.Tokens))
	return d, nil
}

// scorePair runs Score over tokens on a and b at once and calls fn with
// both engines' logits of each position, in order.
func scorePair(ctx context.Context, a, b *runtime.Engine, tokens []int32, fn func(i int, la, lb []float32)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	bb := b.Budgets() // Score's chunks are at most this many rows
	rows := make(chan []float32, 2*min(bb.MaxBatchTokens, bb.MaxSeqs))
	done := make(chan error, 1)
	go func() {
		defer close(rows)
		done <- b.Score(ctx, tokens, func(i int, logits []float32) error {
			select {
			case rows <- append([]float32(nil), logits...):
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	err := a.Score(ctx, tokens, func(i int, logits []float32) error {
		lb, ok := <-rows
		if !ok {
			return fmt.Errorf("compare: the reference stopped at position %d", i)
		}
		fn(i, logits, lb)
		return nil
	})
	cancel()
	for range rows { // let the reference's Score end
	}
	if berr := <-done; berr != nil && !errors.Is(berr, context.Canceled) {
		return fmt.Errorf("reference: %w", berr) // the cause, where the model's Score saw only its end
	}
	return err
}

// logSoftmax is ln softmax(logits), in float64.
func logSoftmax(logits []float32) []float64 {
	n := logNorm(logits)
	out := make([]float64, len(logits))
	for i, v := range logits {
		out[i] = float64(v) - n
	}
	return out
}

// MeanKLD is the mean KL divergence and its standard error.
func (d *Divergence) MeanKLD() (mean, stderr float64) {
	n := float64(len(d.KLD))
	var s, s2 float64
	for _, v := range d.KLD {
		s += v
		s2 += v * v
	}
	mean = s / n
	if n > 1 {
		stderr = math.Sqrt(max(0, s2/n-mean*mean) / (n - 1))
	}
	return mean, stderr
}

// KLDPercentile is the p-th percentile (0..100) of the per-token KL
// divergences, interpolated linearly between neighbouring ranks: 0 is the
// minimum, 100 the maximum.
func (d *Divergence) KLDPercentile(p float64) float64 {
	if len(d.sortedKLD) != len(d.KLD) {
		d.sortedKLD = slices.Clone(d.KLD)
		slices.Sort(d.sortedKLD)
	}
	s := d.sortedKLD
	if len(s) == 0 {
		return math.NaN()
	}
	at := float64(p / 100 * float64(len(s)-1))
	lo := int(math.Floor(at))
	hi := min(lo+1, len(s)-1)
	return s[lo] + float64((at-float64(lo))*(s[hi]-s[lo]))
}

// SameTopFraction is the fraction of tokens whose most likely next token
// is the same for both models (llama.cpp's "Same top p"), and its
// standard error.
func (d *Divergence) SameTopFraction() (f, stderr float64) {
	n := float64(d.Tokens)
	f = float64(d.SameTop) / n
	if n > 1 {
		stderr = math.Sqrt(f * (1 - f) / (n - 1))
	}
	return f, stderr
}

// RMSDeltaP is the root mean square of p_model(t) − p_ref(t) over the
// actual next tokens t.
func (d *Divergence) RMSDeltaP() float64 { return math.Sqrt(d.SumSqDeltaP / float64(d.Tokens)) }
