package server

import (
	"context"

	"github.com/tessera-llm/tessera/runtime"
)

// Transcripts (Tessera's "transcript": true on chat and completions): each
// choice comes back with its generation written down (runtime.Transcript:
// the model's hash, the prompt's ids as rendered, the sampling and its
// seed, the output ids and their log-probabilities, the engine, backend
// and system_fingerprint), for `tessera replay` to run again anywhere.

// withTranscripts makes req ready to be written down: its prompt rendered
// into ids (once, for the transcripts and the engine alike) and its
// tokens' log-probabilities asked for; and it starts the transcript of
// each of its n samples, sample i drawing with seed+i as StartN does.
func withTranscripts(ctx context.Context, m *model, req runtime.Request, n int) (runtime.Request, []*runtime.Transcript, error) {
	if len(req.Images) > 0 {
		return req, nil, badRequest("transcript", "a transcript writes down token ids, which do not carry images: ask for one without images")
	}
	ids, err := m.eng.PromptTokensContext(ctx, req)
	if err != nil {
		return req, nil, err
	}
	req.Tokens, req.Messages, req.Tools, req.Prompt = ids, nil, nil, ""
	req.Logprobs = true
	trs := make([]*runtime.Transcript, n)
	for i := range trs {
		r := req
		r.Sampler.Seed += uint64(i)
		if trs[i], err = m.eng.NewTranscript(r, ids); err != nil {
			return req, nil, err
		}
	}
	return req, trs, nil
}
