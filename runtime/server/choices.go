package server

import (
	"context"
	"strings"

	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime"
)

// choice gathers one choice's generation as its events arrive.
type choice struct {
	text  strings.Builder
	prev  int            // the token before the next, for the bytes of alternatives
	lps   []tokenLogprob // with logprobs: one per generated token
	stats runtime.Stats
	err   error
	ended bool
	// marks are control tokens whose pieces the text keeps (a tool
	// format's marker, which the reply is parsed for).
	marks map[int32]string
	// read, when set, sees every token as it is added: a reply reader
	// that needs each token, not the text of an event (the Responses
	// API's, which counts the reasoning's tokens).
	read func(runtime.Token)
	// tr, with "transcript": true, writes the choice's generation down.
	tr *runtime.Transcript
}

// newChoices makes n choices whose prompts end with token last (for the
// logprobs of the first token's alternatives; -1 when unknown).
func newChoices(n int, last []int) []*choice {
	cs := make([]*choice, n)
	for i := range cs {
		cs[i] = &choice{prev: last[i%len(last)]}
	}
	return cs
}

// addAll takes the tokens of an event and returns their text and, with
// logprobs, their entries: what one streamed chunk carries.
func (c *choice) addAll(toks []runtime.Token, logprobs bool, t tokenizer.Tokenizer) (string, []tokenLogprob) {
	var text strings.Builder
	var lps []tokenLogprob
	for _, tok := range toks {
		text.WriteString(c.marks[tok.ID])
		text.WriteString(tok.Text)
		if lp := c.add(tok, logprobs, t); lp != nil {
			lps = append(lps, *lp)
		}
	}
	return text.String(), lps
}

// add takes a token; with logprobs it returns the token's entry.
func (c *choice) add(tok runtime.Token, logprobs bool, t tokenizer.Tokenizer) *tokenLogprob {
	c.text.WriteString(c.marks[tok.ID])
	c.text.WriteString(tok.Text)
	if c.read != nil {
		c.read(tok)
	}
	if c.tr != nil {
		c.tr.Add(tok)
	}
	if !logprobs || tok.ID < 0 {
		return nil
	}
	e := tokenLogprob{Token: string(tok.Bytes), Logprob: finite(tok.Logprob), Bytes: bytesOf(tok.Bytes), TopLogprobs: []topLogprob{}}
	for _, a := range tok.Top {
		b := t.TokenBytes(c.prev, int(a.ID))
		e.TopLogprobs = append(e.TopLogprobs, topLogprob{Token: string(b), Logprob: finite(a.Logprob), Bytes: bytesOf(b)})
	}
	c.prev = int(tok.ID)
	c.lps = append(c.lps, e)
	return &c.lps[len(c.lps)-1]
}

// collect reads every event into cs, for an answer that is not streamed.
// It returns the first choice's error: a request fails as a whole.
func collect(ctx context.Context, events <-chan event, cs []*choice, logprobs bool, t tokenizer.Tokenizer) error {
	for ev := range events {
		c := cs[ev.choice]
		if ev.end {
			c.ended, c.stats, c.err = true, ev.stats, ev.err
			if c.tr != nil {
				c.tr.End(ev.stats)
			}
			continue
		}
		for _, tok := range ev.toks {
			c.add(tok, logprobs, t)
		}
	}
	for _, c := range cs {
		if c.err != nil {
			return c.err
		}
	}
	if !allEnded(cs) { // the events stopped early: the context ended
		return context.Cause(ctx)
	}
	return nil
}

func allEnded(cs []*choice) bool {
	for _, c := range cs {
		if !c.ended {
			return false
		}
	}
	return true
}

// relay reads every event of a streamed answer into cs and passes it on:
// text (with the logprobs of its tokens) through text, each choice's end
// through end. It returns what ended the stream early: a choice's error,
// the context's end, or a failed write (the client is gone; the request's
// context then cancels the rest).
func relay(ctx context.Context, events <-chan event, cs []*choice, logprobs bool, t tokenizer.Tokenizer,
	text func(i int, text string, lps []tokenLogprob) error, end func(i int, st runtime.Stats)) error {
	var failed error
	for ev := range events {
		c := cs[ev.choice]
		if ev.end {
			c.ended, c.stats, c.err = true, ev.stats, ev.err
			if c.tr != nil {
				c.tr.End(ev.stats)
			}
			if ev.err != nil {
				failed = ev.err
			} else {
				end(ev.choice, ev.stats)
			}
			continue
		}
		s, lps := c.addAll(ev.toks, logprobs, t)
		if s == "" && lps == nil {
			continue // nothing to show yet (half a character, or a possible stop string)
		}
		if err := text(ev.choice, s, lps); err != nil {
			return err
		}
	}
	if failed == nil && !allEnded(cs) {
		failed = context.Cause(ctx)
	}
	return failed
}

// usageOf counts the tokens of choices, n of them per prompt: each
// prompt's tokens count once, as OpenAI counts them.
func usageOf(ctx context.Context, cs []*choice, n int) *usage {
	u := &usage{}
	for i, c := range cs {
		if i%n == 0 {
			u.PromptTokens += c.stats.PromptTokens
		}
		u.CompletionTokens += c.stats.Generated
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	info(ctx).usage = *u
	return u
}

// lastTokens is the last prompt token of each request, for the bytes of
// the first token's alternatives; only computed when logprobs are asked.
// A request whose prompt is tokenized already (a chat, prepared by
// newConversation) is read, not tokenized again.
func lastTokens(eng *runtime.Engine, reqs []runtime.Request, logprobs bool) []int {
	out := make([]int, len(reqs))
	for i, r := range reqs {
		out[i] = -1
		if !logprobs {
			continue
		}
		ids := r.Tokens
		if ids == nil {
			ids, _ = eng.PromptTokens(r)
		}
		if len(ids) > 0 {
			out[i] = int(ids[len(ids)-1])
		}
	}
	return out
}

// streamErr ends a stream that failed after it began (err nil: it did
// not) with an error event: what a request that has not begun would be
// answered (Server.answer), in the stream since its status is already
// 200. The caller then returns, which ends the response; a stream that
// fails ends so, never without a word.
func (s *Server) streamErr(ctx context.Context, out *sse, err error) {
	if err == nil {
		return
	}
	he := s.answer(ctx, err)
	out.fail(he.status, he.kind, he.msg)
}
