package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// Anthropic's Messages API: POST /v1/messages and
// /v1/messages/count_tokens, for the agents and SDKs that speak it. A
// request becomes the same conversation a Chat Completions request does
// (newConversation): its turns go through the model's own chat template,
// tool_use and tool_result blocks as the template's tool calls and tool
// messages, and the reply is read by the model's reply parser into
// thinking, text and tool_use blocks, streamed as they come
// (blockWriter). Errors on these paths take Anthropic's shape
// (writeAnthropicError). Image blocks of user turns go to a model loaded
// with a vision projector. What the server cannot do (documents,
// Anthropic's server tools, a prefilled assistant turn) is refused with a
// 400 that says so, never ignored.

// anthropicPath reports whether path is the Messages API's, whose errors
// take Anthropic's shape.
func anthropicPath(path string) bool {
	return path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/")
}

// The request is wire's (wire.AnthropicRequest), read as every home
// reads requests.
type anthropicRequest = wire.AnthropicRequest

// messages is POST /v1/messages.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) error {
	body, m, conv, err := s.readAnthropic(r, true)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	info(ctx).stream, info(ctx).user = body.Stream, body.Metadata.UserID
	events, err := s.start(ctx, m, []runtime.Request{conv.req}, 1)
	if err != nil {
		return err
	}
	c := newChoices(1, []int{-1})[0]
	c.marks = conv.reply.marks
	id := requestID(ctx)
	head := anthropicMessage{ID: "msg_" + id, Type: "message", Role: "assistant", Model: m.name, Content: []anthropicContent{},
		Usage: anthropicUsage{InputTokens: len(conv.req.Tokens)}}
	blocks := &blockWriter{open: -1, callID: func(k int, model string) string { return conv.reply.format.CallID("toolu_"+id, k, model) }}
	if body.Stream {
		s.streamMessage(ctx, w, events, c, head, conv.reply, blocks, m)
		return nil
	}
	if err := collect(ctx, events, []*choice{c}, false, m.eng.Tokenizer()); err != nil {
		return err
	}
	p := conv.reply.parser()
	blocks.add(p.Feed(c.text.String()))
	last, _ := p.Close()
	blocks.add(last)
	blocks.stop()
	head.Content = blocks.content()
	head.StopReason, head.StopSequence = stopReason(c.stats, blocks.calls)
	u := usageOf(ctx, []*choice{c}, 1)
	head.Usage.InputTokens, head.Usage.OutputTokens = u.PromptTokens, u.CompletionTokens
	writeJSON(w, http.StatusOK, head)
	return nil
}

// countTokens is POST /v1/messages/count_tokens: the prompt tokens the
// same request would run, rendered and tokenized as it would be.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) error {
	_, _, conv, err := s.readAnthropic(r, false)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": len(conv.req.Tokens)})
	return nil
}

// readAnthropic reads a Messages request's body, its model, and its
// conversation ready to run (with what a reply needs when generate).
func (s *Server) readAnthropic(r *http.Request, generate bool) (*anthropicRequest, *model, *conversation, error) {
	body := &anthropicRequest{}
	if err := decode(r, body); err != nil {
		return nil, nil, nil, err
	}
	m, err := s.model(body.Model, r.URL.Path)
	if err != nil {
		return nil, nil, nil, err
	}
	conv, err := anthropicConversation(r.Context(), body, m, generate, s.imageReader())
	if err != nil {
		return nil, nil, nil, err
	}
	return body, m, conv, nil
}

// anthropicConversation checks the request and makes it ready to run on m, from
// its prompt's tokens; generate adds what a reply needs (max_tokens,
// sampling, stop sequences), which count_tokens has none of. Image blocks
// are read by imgs.
func anthropicConversation(ctx context.Context, body *anthropicRequest, m *model, generate bool, imgs wire.ImageReader) (*conversation, error) {
	var req runtime.Request
	var err error
	if generate {
		if req, err = body.Request(m.eng.Model().Config.Context); err != nil {
			return nil, err
		}
		req.Adapters = m.adapters()
	}
	var images []string
	if req.Messages, images, err = body.ChatMessages(); err != nil {
		return nil, err
	}
	for i, u := range images {
		img, err := imgs.Read(ctx, u)
		if err != nil {
			return nil, badRequest("messages", "image %d: %v", i, err)
		}
		req.Images = append(req.Images, img)
	}
	if req.TemplateVars, err = body.TemplateVars(m.eng.Chat()); err != nil {
		return nil, err
	}
	if req.Constraint, err = body.Format(); err != nil {
		return nil, err
	}
	tools, choice, parallel, err := body.ChatTools()
	if err != nil {
		return nil, err
	}
	conv, err := newConversation(ctx, m, req, tools, choice, parallel)
	if err != nil {
		return nil, err
	}
	if _, err := conv.promptTokens(ctx, m); err != nil {
		return nil, err
	}
	return conv, nil
}

// promptTokens renders and tokenizes the conversation's prompt, if
// newConversation has not, and runs the request from those tokens: they
// are what the reply's usage counts before it starts (message_start) and
// what count_tokens answers, exactly as the request runs them.
func (c *conversation) promptTokens(ctx context.Context, m *model) ([]int32, error) {
	if c.req.Tokens == nil {
		ids, err := m.eng.PromptTokensContext(ctx, c.req)
		if err != nil {
			return nil, err
		}
		c.req.Tokens, c.req.Messages, c.req.Tools = ids, nil, nil
	}
	return c.req.Tokens, nil
}

// stopReason is Anthropic's name for how a reply ended, and the stop
// sequence that ended it. A reply cut by the context's end is max_tokens,
// as it was before Anthropic's model_context_window_exceeded, which
// clients may not know.
func stopReason(st runtime.Stats, calls int) (reason, sequence *string) {
	r := "end_turn"
	switch {
	case st.Stop != "":
		r, sequence = "stop_sequence", &st.Stop
	case !st.StoppedAtEOS && !st.Complete:
		r = "max_tokens"
	case calls > 0:
		r = "tool_use"
	}
	return &r, sequence
}
