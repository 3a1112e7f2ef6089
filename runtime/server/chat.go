package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// chat is POST /v1/chat/completions: the messages go through the model's
// chat template, and the reply is generated from the assistant's turn.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) error {
	var body chatRequest
	if err := decode(r, &body); err != nil {
		return err
	}
	m, err := s.model(body.Model, r.URL.Path)
	if err != nil {
		return err
	}
	req, n, err := body.Request(r.Context(), m.eng.Model().Config.Context, s.imageReader())
	if err != nil {
		return err
	}
	if req.Adapters, err = m.requestAdapters(body.LoRA); err != nil {
		return err
	}
	conv, err := newConversation(r.Context(), m, req, body.Tools, body.ToolChoice, body.Parallel())
	if err != nil {
		return err
	}
	req = conv.req
	var trs []*runtime.Transcript
	if body.Transcript {
		if req, trs, err = withTranscripts(r.Context(), m, req, n); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	info(ctx).stream, info(ctx).user = body.Stream, body.User
	last := lastTokens(m.eng, []runtime.Request{req}, req.Logprobs)
	events, err := s.start(ctx, m, []runtime.Request{req}, n)
	if err != nil {
		return err
	}
	cs := newChoices(n, last)
	for i, c := range cs {
		c.marks = conv.reply.marks
		if trs != nil {
			c.tr = trs[i]
		}
	}
	id, created := completionID("chatcmpl", r.Context()), time.Now().Unix()
	head := chatCompletion{ID: id, Object: "chat.completion", Created: created, Model: m.name, SystemFingerprint: m.fingerprint}
	if body.Stream {
		s.streamChat(ctx, w, events, cs, head, body.Logprobs, body.StreamOptions.IncludeUsage, n, m, conv.reply)
		return nil
	}
	if err := collect(ctx, events, cs, req.Logprobs, m.eng.Tokenizer()); err != nil {
		return err
	}
	for i, c := range cs {
		p := conv.reply.parser()
		p.Feed(c.text.String())
		_, reply := p.Close()
		msg := &chatMessage{Role: "assistant", Content: textContent{Text: reply.Text, Set: true}, ReasoningContent: reply.Reasoning}
		ch := chatChoice{Index: i, Message: msg, FinishReason: finishReason(c.stats)}
		for _, call := range callIDs(conv.reply.format, fmt.Sprintf("call-%s-%d", id, i), reply.Calls) {
			tc := toolCall{ID: call.ID, Type: "function"}
			tc.Function.Name, tc.Function.Arguments = call.Name, call.Arguments
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
		if len(msg.ToolCalls) > 0 && *ch.FinishReason == "stop" { // out of tokens stays "length"
			reason := "tool_calls"
			ch.FinishReason = &reason
		}
		if body.Logprobs {
			ch.Logprobs = &chatLogprobs{Content: nonNil(c.lps)}
		}
		ch.Transcript = c.tr
		head.Choices = append(head.Choices, ch)
	}
	head.Usage = usageOf(ctx, cs, n)
	writeJSON(w, http.StatusOK, head)
	return nil
}

// streamChat writes the choices as chat.completion.chunk events: the
// assistant's role first, then deltas as the reply's parser reads them
// (reasoning_content, content, and tool calls: a call's id and name as
// soon as its name is read, its arguments as they are written), a last
// chunk per choice with its finish reason, the usage if asked for, and
// [DONE].
func (s *Server) streamChat(ctx context.Context, w http.ResponseWriter, events <-chan event, cs []*choice, head chatCompletion, logprobs, withUsage bool, n int, m *model, rp replyPlan) {
	out := newSSE(w)
	head.Object = "chat.completion.chunk"
	chunk := func(ch chatChoice) error {
		c := head
		c.Choices = []chatChoice{ch}
		return out.send(c)
	}
	parsers := make([]*chat.ReplyParser, len(cs))
	calls := make([]int, len(cs)) // calls started per choice
	for i := range cs {
		empty := ""
		chunk(chatChoice{Index: i, Delta: &chatDelta{Role: "assistant", Content: &empty}})
		parsers[i] = rp.parser()
	}
	// send writes choice i's reply events, the logprobs going with the
	// first chunk.
	send := func(i int, evs []chat.ReplyEvent, lps []tokenLogprob) error {
		if len(evs) == 0 && lps != nil {
			empty := ""
			evs = []chat.ReplyEvent{{Kind: chat.EventText, Text: empty}}
		}
		for _, e := range evs {
			d := &chatDelta{}
			switch e.Kind {
			case chat.EventText:
				d.Content = &e.Text
			case chat.EventReasoning:
				d.ReasoningContent = &e.Text
			case chat.EventCall:
				tc := toolCallDelta{Index: e.Call, ID: rp.format.CallID(fmt.Sprintf("call-%s-%d", head.ID, i), e.Call, e.ID), Type: "function"}
				tc.Function.Name = e.Name
				d.ToolCalls = []toolCallDelta{tc}
				calls[i]++
			case chat.EventArgs:
				tc := toolCallDelta{Index: e.Call}
				tc.Function.Arguments = e.Text
				d.ToolCalls = []toolCallDelta{tc}
			}
			ch := chatChoice{Index: i, Delta: d}
			if lps != nil {
				ch.Logprobs, lps = &chatLogprobs{Content: lps}, nil
			}
			if err := chunk(ch); err != nil {
				return err
			}
		}
		return nil
	}
	err := relay(ctx, events, cs, logprobs, m.eng.Tokenizer(), func(i int, text string, lps []tokenLogprob) error {
		return send(i, parsers[i].Feed(text), lps)
	}, func(i int, st runtime.Stats) {
		evs, _ := parsers[i].Close()
		send(i, evs, nil)
		reason := finishReason(st)
		if calls[i] > 0 && *reason == "stop" {
			r := "tool_calls"
			reason = &r
		}
		chunk(chatChoice{Index: i, Delta: &chatDelta{}, FinishReason: reason, Transcript: cs[i].tr})
	})
	if err != nil {
		s.streamErr(ctx, out, err)
		return
	}
	u := head
	u.Choices, u.Usage = []chatChoice{}, usageOf(ctx, cs, n)
	if withUsage {
		out.send(u)
	}
	out.done()
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
