package server

import (
	"context"
	"net/http"
	"time"

	"github.com/tessera-llm/tessera/runtime"
)

// complete is POST /v1/completions: each prompt (text or token ids) is
// continued as it is, with n samples each.
func (s *Server) complete(w http.ResponseWriter, r *http.Request) error {
	var body completionRequest
	if err := decode(r, &body); err != nil {
		return err
	}
	m, err := s.model(body.Model, r.URL.Path)
	if err != nil {
		return err
	}
	reqs, n, err := body.Requests(16) // OpenAI's default of 16 tokens
	if err != nil {
		return err
	}
	adapters, err := m.requestAdapters(body.LoRA)
	if err != nil {
		return err
	}
	texts := make([]*string, len(reqs)) // each text prompt's own text, for echo
	for i := range reqs {
		reqs[i].Adapters = adapters
		if reqs[i].Tokens == nil {
			t := reqs[i].Prompt
			texts[i] = &t
		}
	}
	base, logprobs := reqs[0], reqs[0].Logprobs
	var trs [][]*runtime.Transcript // per prompt, per sample
	if body.Transcript && base.MaxTokens > 0 {
		trs = make([][]*runtime.Transcript, len(reqs))
		for p := range reqs {
			if reqs[p], trs[p], err = withTranscripts(r.Context(), m, reqs[p], n); err != nil {
				return err
			}
			texts[p] = nil // echo writes what the transcript wrote down
		}
	}
	// A text prompt is tokenized once, here, for echo, the first token's
	// logprobs and the engine alike (a prompt that nothing generates from
	// or echoes is not tokenized at all).
	if base.MaxTokens > 0 || body.Echo {
		for p := range reqs {
			if reqs[p].Tokens != nil {
				continue
			}
			ids, err := m.eng.PromptTokensContext(r.Context(), reqs[p])
			if err != nil {
				return err
			}
			reqs[p].Tokens, reqs[p].Prompt = ids, ""
		}
	}
	// Echo needs the prompt's text (and with logprobs, its scores) first.
	echoes := make([]echoed, len(reqs))
	if body.Echo {
		for i, req := range reqs {
			if echoes[i], err = s.echo(r.Context(), m, req, texts[i], logprobs); err != nil {
				return err
			}
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	info(ctx).stream, info(ctx).user = body.Stream, body.User
	last := lastTokens(m.eng, reqs, logprobs)
	var events <-chan event
	if base.MaxTokens > 0 {
		if events, err = s.start(ctx, m, reqs, n); err != nil {
			return err
		}
	} else { // echo only, as for scoring a text
		ch := make(chan event)
		close(ch)
		events = ch
	}
	cs := make([]*choice, len(reqs)*n)
	for p := range reqs {
		for i := range n {
			c := &choice{prev: last[p]}
			if base.MaxTokens == 0 {
				c.ended, c.stats.PromptTokens = true, echoes[p].tokens
			}
			if trs != nil {
				c.tr = trs[p][i]
			}
			cs[p*n+i] = c
		}
	}
	head := completion{ID: completionID("cmpl", r.Context()), Object: "text_completion", Created: time.Now().Unix(), Model: m.name, SystemFingerprint: m.fingerprint}
	if body.Stream {
		s.streamCompletion(ctx, w, events, cs, head, echoes, logprobs, body.StreamOptions.IncludeUsage, n, m)
		return nil
	}
	if err := collect(ctx, events, cs, logprobs, m.eng.Tokenizer()); err != nil {
		return err
	}
	for i, c := range cs {
		e := echoes[i/n]
		ch := completionChoice{Index: i, Text: e.text + c.text.String(), FinishReason: finishReason(c.stats)}
		if logprobs {
			ch.Logprobs = legacyLogprobs(e, c.lps)
		}
		ch.Transcript = c.tr
		head.Choices = append(head.Choices, ch)
	}
	head.Usage = usageOf(ctx, cs, n)
	writeJSON(w, http.StatusOK, head)
	return nil
}

// streamCompletion writes text_completion chunks: the echoed prompt first,
// then the text as it comes, a finish reason per choice, the usage if
// asked for, and [DONE].
func (s *Server) streamCompletion(ctx context.Context, w http.ResponseWriter, events <-chan event, cs []*choice, head completion, echoes []echoed, logprobs, withUsage bool, n int, m *model) {
	out := newSSE(w)
	chunk := func(ch completionChoice) error {
		c := head
		c.Choices = []completionChoice{ch}
		return out.send(c)
	}
	for i := range cs {
		if e := echoes[i/n]; e.text != "" {
			ch := completionChoice{Index: i, Text: e.text}
			if logprobs {
				ch.Logprobs = legacyLogprobs(e, nil)
			}
			chunk(ch)
		}
		if cs[i].ended { // nothing to generate
			chunk(completionChoice{Index: i, FinishReason: finishReason(cs[i].stats)})
		}
	}
	offsets := make([]int, len(cs))
	for i := range offsets {
		offsets[i] = len(echoes[i/n].text)
	}
	err := relay(ctx, events, cs, logprobs, m.eng.Tokenizer(), func(i int, text string, lps []tokenLogprob) error {
		ch := completionChoice{Index: i, Text: text}
		if lps != nil {
			ch.Logprobs = legacyLogprobs(echoed{}, lps)
			for k := range ch.Logprobs.TextOffset {
				ch.Logprobs.TextOffset[k] += offsets[i]
			}
			for _, lp := range lps {
				offsets[i] += len(lp.Token)
			}
		}
		return chunk(ch)
	}, func(i int, st runtime.Stats) {
		chunk(completionChoice{Index: i, FinishReason: finishReason(st), Transcript: cs[i].tr})
	})
	if err != nil {
		s.streamErr(ctx, out, err)
		return
	}
	u := head
	u.Choices, u.Usage = []completionChoice{}, usageOf(ctx, cs, n)
	if withUsage {
		out.send(u)
	}
	out.done()
}

// echoed is a prompt as echo returns it: its text, and with logprobs the
// entry of each token (the first has none: nothing predicts it).
type echoed struct {
	text   string
	tokens int
	lps    []tokenLogprob
	first  bool // lps[0] is the first token, without a logprob
}

// echo computes what echo adds for req, whose prompt is tokenized: the
// prompt's text (text, where the request gave one; else its tokens'
// text) and, with logprobs, how likely the model finds each of its tokens
// (Score).
func (s *Server) echo(ctx context.Context, m *model, req runtime.Request, text *string, logprobs bool) (echoed, error) {
	ids, err := m.eng.PromptTokensContext(ctx, req)
	if err != nil {
		return echoed{}, err
	}
	tok := m.eng.Tokenizer()
	e := echoed{tokens: len(ids)}
	if text != nil {
		e.text = *text
	} else {
		ints := make([]int, len(ids))
		for i, id := range ids {
			ints[i] = int(id)
		}
		e.text = tok.Decode(ints)
	}
	if !logprobs {
		return e, nil
	}
	entry := func(prev int, id int32, lp float32, top []runtime.Alternative) tokenLogprob {
		b := tok.TokenBytes(prev, int(id))
		t := tokenLogprob{Token: string(b), Logprob: finite(lp), Bytes: bytesOf(b), TopLogprobs: []topLogprob{}}
		for _, a := range top {
			ab := tok.TokenBytes(prev, int(a.ID))
			t.TopLogprobs = append(t.TopLogprobs, topLogprob{Token: string(ab), Logprob: finite(a.Logprob), Bytes: bytesOf(ab)})
		}
		return t
	}
	e.lps = []tokenLogprob{entry(-1, ids[0], 0, nil)}
	e.first = true
	err = m.eng.ScoreAdapters(ctx, ids, req.Adapters, func(i int, logits []float32) error {
		lp, top := runtime.Logprobs(logits, ids[i+1], req.TopLogprobs)
		e.lps = append(e.lps, entry(int(ids[i]), ids[i+1], lp, top))
		return nil
	})
	return e, err
}

// legacyLogprobs lays out the echoed prompt's and the generated tokens'
// logprobs as the completions API's parallel arrays.
func legacyLogprobs(e echoed, gen []tokenLogprob) *completionLogprobs {
	out := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float32{}, TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
	offset := 0
	for i, lp := range append(append([]tokenLogprob{}, e.lps...), gen...) {
		out.Tokens = append(out.Tokens, lp.Token)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(lp.Token)
		if i == 0 && e.first {
			out.TokenLogprobs = append(out.TokenLogprobs, nil)
			out.TopLogprobs = append(out.TopLogprobs, nil)
			continue
		}
		v := lp.Logprob
		out.TokenLogprobs = append(out.TokenLogprobs, &v)
		out.TopLogprobs = append(out.TopLogprobs, topMap(lp.TopLogprobs))
	}
	return out
}

func topMap(top []topLogprob) map[string]float32 {
	m := make(map[string]float32, len(top))
	for _, t := range top {
		if _, ok := m[t.Token]; !ok { // the likelier of two equal strings
			m[t.Token] = t.Logprob
		}
	}
	return m
}
