package runtime

import "github.com/tessera-llm/tessera/runtime/backend"

// On-device sampling: with a backend that implements backend.Sampling (the
// GPU), sampled rows are drawn by kernels, so that a sampled step reads
// back a few bytes a sequence instead of its logits and sampled steps chain
// like greedy ones. The Sampler stays the reference and the source of
// randomness: it hands the backend the next values of its PCG stream
// (draws) and its penalties (penalties), and moves its stream past the
// draws the device used (skip). The device settles every draw, a flat
// row's past its 256 ranked candidates included (sample.wgsl's radix
// selection), so no step reads a logits row back to draw.

// deviceSampler is the backend's on-device sampling, or nil.
func (e *Engine) deviceSampler() backend.Sampling {
	s, _ := e.be.(backend.Sampling)
	return s
}

// drawsOnDevice reports whether w's token is drawn on the device in a step
// that does not chain.
func (e *Engine) drawsOnDevice(w work) bool {
	s := w.s
	return w.out && w.draft == nil && !s.req.Logprobs && s.sampler.opts.onDevice(e.model.Config.Vocab) && e.deviceSampler() != nil
}

// chainsSampled reports whether s, which samples, can decode in a chain:
// drawn on the device, with no penalty that depends on the tokens the
// chain generates.
func (e *Engine) chainsSampled(s *sequence) bool {
	o := s.sampler.opts
	return e.deviceSampler() != nil && o.onDevice(e.model.Config.Vocab) && !o.historyPenalised()
}

// sampleOnDevice draws the rows of plan that drawsOnDevice picks, in one
// dispatch and one read-back: the result is indexed by output row (nil:
// no row was drawn). Rows before the last drawn one that are not drawn
// take the argmax, unused. Call it after the masks are recorded.
func (e *Engine) sampleOnDevice(plan []work, results []result) ([]backend.Drawn, []bool, error) {
	ds := e.deviceSampler()
	if ds == nil {
		return nil, nil, nil
	}
	vocab := e.model.Config.Vocab
	var rows []backend.SampleRow
	on := make([]bool, len(plan))
	out, n := 0, 0
	for j, w := range plan {
		if results[j].err == nil && e.drawsOnDevice(w) {
			on[j] = true
			for len(rows) <= out {
				rows = append(rows, backend.SampleRow{})
			}
			rows[out] = w.s.sampler.sampleRow(w.s.tokens, vocab, 1)
			n = out + 1
		}
		out += w.outputs()
	}
	if n == 0 {
		return nil, nil, nil
	}
	if err := ds.SetSampling(rows); err != nil {
		return nil, nil, err
	}
	drawn, err := ds.Sample(e.net.logits, n)
	return drawn, on, err
}
