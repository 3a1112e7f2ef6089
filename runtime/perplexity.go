package runtime

import (
	"context"
	"fmt"
	"math"
)

// Perplexity is exp of the mean negative log-likelihood of each token of
// text given the ones before it, over windows of the model's context (each
// window starts afresh with BOS). progress, if not nil, is called with the
// tokens scored so far and the total.
func (e *Engine) Perplexity(ctx context.Context, text string, progress func(done, total int)) (ppl float64, tokens int, err error) {
	ids := e.model.Tokenizer.Encode(text, false)
	if len(ids) < 2 {
		return 0, 0, fmt.Errorf("perplexity needs at least 2 tokens of text, got %d", len(ids))
	}
	bos := int32(e.model.Tokenizer.BOS())
	window := e.model.Config.Context - 1
	var nll float64
	for start := 0; start < len(ids); start += window {
		chunk := []int32{}
		if bos >= 0 {
			chunk = append(chunk, bos)
		}
		for _, id := range ids[start:min(len(ids), start+window)] {
			chunk = append(chunk, int32(id))
		}
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

// logSoftmaxAt is log(softmax(logits)[i]), computed stably in float64.
func logSoftmaxAt(logits []float32, i int) float64 {
	mx := float64(logits[0])
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	return float64(logits[i]) - mx - math.Log(sum)
}
