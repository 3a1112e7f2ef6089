package server

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/tokenizer"
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
	req, n, err := body.request(m.eng.Model().Config.Context, 1)
	if err != nil {
		return err
	}
	if req.Adapters, err = m.requestAdapters(body.LoRA); err != nil {
		return err
	}
	if len(body.Messages) == 0 {
		return badRequest("messages", "messages must hold at least one message")
	}
	for i, msg := range body.Messages {
		role := msg.Role
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer": // OpenAI's newer name for system
			role = "system"
		default:
			return badRequest("messages", "message %d has role %q; roles are system, developer, user, assistant and tool", i, msg.Role)
		}
		calls, err := chatToolCalls(msg.ToolCalls)
		if err != nil {
			return err
		}
		req.Messages = append(req.Messages, chat.Message{Role: role, Content: msg.Content.Text, ToolCalls: calls, ToolCallID: msg.ToolCallID})
	}
	plan, err := toolSetup(body.Tools, body.ToolChoice, body.ParallelToolCalls == nil || *body.ParallelToolCalls, toolFormatOf(m.eng.Chat()))
	if err != nil {
		return err
	}
	req.Tools = plan.defs
	// lead is reply text that the prompt already holds (a prefilled marker).
	lead := ""
	if plan.grammar != nil {
		if req.Constraint != nil {
			return badRequest("tool_choice", "tool_choice %s cannot be combined with response_format or a grammar", string(body.ToolChoice))
		}
		req.Constraint = plan.grammar
		if f := plan.format; f.prefill {
			ids, err := m.eng.PromptTokensContext(r.Context(), req)
			if err != nil {
				return err
			}
			for _, id := range tokenizer.EncodeSpecial(m.eng.Tokenizer(), f.marker, false) {
				ids = append(ids, int32(id))
			}
			req.Tokens, req.Messages, req.Tools, lead = ids, nil, nil, f.marker
		}
	}

	if body.TopLogprobs != nil {
		k := *body.TopLogprobs
		switch {
		case k < 0 || k > runtime.MaxTopLogprobs:
			return badRequest("top_logprobs", "top_logprobs must be between 0 and %d, not %d", runtime.MaxTopLogprobs, k)
		case k > 0 && !body.Logprobs:
			return badRequest("top_logprobs", "top_logprobs needs logprobs: true")
		}
		req.TopLogprobs = k
	}
	req.Logprobs = body.Logprobs
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	info(ctx).stream, info(ctx).user = body.Stream, body.User
	last := lastTokens(m.eng, []runtime.Request{req}, req.Logprobs)
	events, err := s.start(ctx, m, []runtime.Request{req}, n)
	if err != nil {
		return err
	}
	cs := newChoices(n, last)
	if plan.parse {
		marks := toolMarks(m.eng.Tokenizer(), plan.format)
		for _, c := range cs {
			c.text.WriteString(lead)
			c.marks = marks
		}
	}
	id, created := completionID("chatcmpl", r.Context()), time.Now().Unix()
	head := chatCompletion{ID: id, Object: "chat.completion", Created: created, Model: m.name}
	if body.Stream {
		s.streamChat(ctx, w, events, cs, head, req.Logprobs, body.StreamOptions.IncludeUsage, n, m, plan)
		return nil
	}
	if err := collect(ctx, events, cs, req.Logprobs, m.eng.Tokenizer()); err != nil {
		return err
	}
	for i, c := range cs {
		ch := chatChoice{Index: i, Message: &chatMessage{Role: "assistant", Content: textContent{Text: c.text.String(), Set: true}},
			FinishReason: finishReason(c.stats)}
		if plan.parse {
			text, calls := plan.format.parse(c.text.String(), fmt.Sprintf("call-%s-%d", id, i))
			ch.Message.Content.Text = text
			if len(calls) > 0 {
				ch.Message.ToolCalls = calls
				if *ch.FinishReason == "stop" { // out of tokens stays "length"
					reason := "tool_calls"
					ch.FinishReason = &reason
				}
			}
		}
		if req.Logprobs {
			ch.Logprobs = &chatLogprobs{Content: nonNil(c.lps)}
		}
		head.Choices = append(head.Choices, ch)
	}
	head.Usage = usageOf(ctx, cs, n)
	writeJSON(w, http.StatusOK, head)
	return nil
}

// streamChat writes the choices as chat.completion.chunk events: the
// assistant's role first, then content deltas, a last chunk per choice
// with its finish reason, the usage if asked for, and [DONE]. With tools
// (plan.parse) a choice's reply is held until it ends, then sent as one
// delta: its tool calls, or its text when it made none.
func (s *Server) streamChat(ctx context.Context, w http.ResponseWriter, events <-chan event, cs []*choice, head chatCompletion, logprobs, withUsage bool, n int, m *model, plan toolPlan) {
	out := newSSE(w)
	head.Object = "chat.completion.chunk"
	chunk := func(ch chatChoice) error {
		c := head
		c.Choices = []chatChoice{ch}
		return out.send(c)
	}
	for i := range cs {
		empty := ""
		chunk(chatChoice{Index: i, Delta: &chatDelta{Role: "assistant", Content: &empty}})
	}
	err := relay(ctx, events, cs, logprobs, m.eng.Tokenizer(), func(i int, text string, lps []tokenLogprob) error {
		if plan.parse {
			return nil // held for the end
		}
		ch := chatChoice{Index: i, Delta: &chatDelta{Content: &text}}
		if lps != nil {
			ch.Logprobs = &chatLogprobs{Content: lps}
		}
		return chunk(ch)
	}, func(i int, st runtime.Stats) {
		reason := finishReason(st)
		if plan.parse {
			text, calls := plan.format.parse(cs[i].text.String(), fmt.Sprintf("call-%s-%d", head.ID, i))
			d := &chatDelta{Content: &text}
			if len(calls) > 0 {
				for k := range calls {
					calls[k].Index = &k
				}
				d.ToolCalls = calls
				if *reason == "stop" {
					r := "tool_calls"
					reason = &r
				}
			}
			chunk(chatChoice{Index: i, Delta: d})
		}
		chunk(chatChoice{Index: i, Delta: &chatDelta{}, FinishReason: reason})
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
