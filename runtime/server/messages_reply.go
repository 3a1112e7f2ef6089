package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"unicode"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// The Messages API's answers: a message of content blocks, the same
// blocks as a stream of Anthropic's events, and errors in Anthropic's
// shape.

// anthropicMessage is the answer of POST /v1/messages (and, with no
// content and no stop reason yet, the message of a stream's
// message_start).
type anthropicMessage struct {
	ID           string             `json:"id"`
	Type         string             `json:"type"` // "message"
	Role         string             `json:"role"` // "assistant"
	Model        string             `json:"model"`
	Content      []anthropicContent `json:"content"`
	StopReason   *string            `json:"stop_reason"`
	StopSequence *string            `json:"stop_sequence"`
	Usage        anthropicUsage     `json:"usage"`
}

// anthropicUsage counts a message's tokens. input_tokens is the whole
// prompt: the cache fields are there because clients add them up, and
// they are 0 since the engine's prefix cache costs nothing to fill or
// read.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// anthropicContent is a content block of a reply: thinking (with an empty
// signature: there is no Anthropic model to verify it for), text, or
// tool_use.
type anthropicContent struct {
	Type      string          `json:"type"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Text      *string         `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// anthropicEvent is one event of a stream; its type is also its SSE
// event name.
type anthropicEvent struct {
	Type         string            `json:"type"`
	Message      *anthropicMessage `json:"message,omitempty"`       // message_start
	Index        *int              `json:"index,omitempty"`         // content_block_*
	ContentBlock *anthropicContent `json:"content_block,omitempty"` // content_block_start
	Delta        any               `json:"delta,omitempty"`         // content_block_delta, message_delta
	Usage        *anthropicOutput  `json:"usage,omitempty"`         // message_delta
}

// anthropicOutput is a message_delta's usage: the output tokens so far.
type anthropicOutput struct {
	OutputTokens int `json:"output_tokens"`
}

// anthropicDelta is a content_block_delta's delta: text_delta,
// thinking_delta or input_json_delta.
type anthropicDelta struct {
	Type        string  `json:"type"`
	Text        *string `json:"text,omitempty"`
	Thinking    *string `json:"thinking,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

// anthropicStop is a message_delta's delta.
type anthropicStop struct {
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// blockWriter turns a reply's events (chat.ReplyEvent, in the order the
// parser reads them) into content blocks: reasoning into thinking
// blocks, text into text blocks, a call into a tool_use block that starts
// as soon as its name is read and whose input comes as the arguments are
// written. A thinking or text block is trimmed of the whitespace around
// it (what separates a reply's parts: Qwen3's blank line after
// </think>, the newline between calls), so that whitespace alone never
// makes a block; whole and streamed, a reply has the same blocks. With
// emit set, each block's start, deltas and stop are sent as they come.
type blockWriter struct {
	blocks []anthropicContent
	bufs   []*strings.Builder // each block's text, thinking or input
	open   int                // the block being written, -1 when none
	held   string             // whitespace at the end of the open block, written if more of it follows
	calls  int
	callID func(k int, model string) string // the id of call k, which the model named model
	emit   func(name string, v any) error   // the stream's events; nil when not streamed
}

// add writes the blocks of events.
func (w *blockWriter) add(events []chat.ReplyEvent) error {
	for _, e := range events {
		var err error
		switch e.Kind {
		case chat.EventText:
			err = w.text("text", e.Text)
		case chat.EventReasoning:
			err = w.text("thinking", e.Text)
		case chat.EventCall:
			if err = w.stop(); err == nil {
				w.calls++
				err = w.start(anthropicContent{Type: "tool_use", ID: w.callID(e.Call, e.ID), Name: e.Name, Input: json.RawMessage(`{}`)})
			}
		case chat.EventArgs:
			// A call's arguments follow its start, before anything else.
			if w.open >= 0 && w.blocks[w.open].Type == "tool_use" {
				err = w.delta(anthropicDelta{Type: "input_json_delta", PartialJSON: &e.Text}, e.Text)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// text writes s to a block of kind (text or thinking), starting one if
// the open block is of another kind.
func (w *blockWriter) text(kind, s string) error {
	same := w.open >= 0 && w.blocks[w.open].Type == kind
	if same {
		s = w.held + s
	} else {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	body := strings.TrimRightFunc(s, unicode.IsSpace)
	if body == "" {
		if same {
			w.held = s
		}
		return nil
	}
	if !same {
		if err := w.stop(); err != nil {
			return err
		}
		empty := ""
		b := anthropicContent{Type: kind, Text: &empty}
		if kind == "thinking" {
			b = anthropicContent{Type: kind, Thinking: &empty, Signature: &empty}
		}
		if err := w.start(b); err != nil {
			return err
		}
	}
	w.held = s[len(body):]
	d := anthropicDelta{Type: "text_delta", Text: &body}
	if kind == "thinking" {
		d = anthropicDelta{Type: "thinking_delta", Thinking: &body}
	}
	return w.delta(d, body)
}

func (w *blockWriter) start(b anthropicContent) error {
	w.blocks, w.bufs = append(w.blocks, b), append(w.bufs, &strings.Builder{})
	w.open = len(w.blocks) - 1
	return w.send(anthropicEvent{Type: "content_block_start", Index: &w.open, ContentBlock: &b})
}

func (w *blockWriter) delta(d anthropicDelta, s string) error {
	w.bufs[w.open].WriteString(s)
	return w.send(anthropicEvent{Type: "content_block_delta", Index: &w.open, Delta: d})
}

// stop ends the open block, if any: the whitespace held at its end is
// dropped.
func (w *blockWriter) stop() error {
	if w.open < 0 {
		return nil
	}
	i := w.open
	w.open, w.held = -1, ""
	return w.send(anthropicEvent{Type: "content_block_stop", Index: &i})
}

func (w *blockWriter) send(e anthropicEvent) error {
	if w.emit == nil {
		return nil
	}
	return w.emit(e.Type, e)
}

// content is the blocks written, whole. A call's input is its arguments,
// or {} where they are not a JSON object (a call cut off by max_tokens),
// as Anthropic's SDKs make of such a call's deltas.
func (w *blockWriter) content() []anthropicContent {
	out := make([]anthropicContent, len(w.blocks))
	for i, b := range w.blocks {
		s := w.bufs[i].String()
		switch b.Type {
		case "text":
			b.Text = &s
		case "thinking":
			b.Thinking = &s
		case "tool_use":
			if t := strings.TrimSpace(s); strings.HasPrefix(t, "{") && json.Valid([]byte(t)) {
				b.Input = json.RawMessage(t)
			}
		}
		out[i] = b
	}
	return out
}

// streamMessage writes a reply as Anthropic's events: message_start (the
// message with no content yet, and its input tokens), each block's
// content_block_start, content_block_delta and content_block_stop as the
// parser reads them (blockWriter), then message_delta (the stop reason
// and the output tokens) and message_stop. A reply that fails once the
// stream has begun ends with an error event, as Anthropic's does.
func (s *Server) streamMessage(ctx context.Context, w http.ResponseWriter, events <-chan event, c *choice, head anthropicMessage, rp replyPlan, blocks *blockWriter, m *model) {
	out := newSSE(w)
	blocks.emit = out.named
	out.named("message_start", anthropicEvent{Type: "message_start", Message: &head})
	p := rp.parser()
	err := relay(ctx, events, []*choice{c}, false, m.eng.Tokenizer(), func(_ int, text string, _ []tokenLogprob) error {
		return blocks.add(p.Feed(text))
	}, func(_ int, st runtime.Stats) {
		last, _ := p.Close()
		blocks.add(last)
		blocks.stop()
		reason, seq := stopReason(st, blocks.calls)
		out.named("message_delta", anthropicEvent{Type: "message_delta", Delta: anthropicStop{StopReason: reason, StopSequence: seq},
			Usage: &anthropicOutput{OutputTokens: st.Generated}})
		out.named("message_stop", anthropicEvent{Type: "message_stop"})
	})
	if err != nil {
		out.named("error", anthropicErrorBody(s.answer(ctx, err)))
		return
	}
	usageOf(ctx, []*choice{c}, 1)
}

// anthropicError is an error in Anthropic's shape, answered or streamed.
type anthropicError struct {
	Type  string `json:"type"` // "error"
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// anthropicErrorBody is he in Anthropic's shape: its type is Anthropic's
// for the status (overloaded_error for 503, the server loading or
// shutting down: Anthropic's own is 529, which no proxy or client outside
// Anthropic's knows).
func anthropicErrorBody(he *httpError) anthropicError {
	var e anthropicError
	e.Type, e.Error.Message = "error", he.msg
	switch he.status {
	case http.StatusUnauthorized:
		e.Error.Type = "authentication_error"
	case http.StatusForbidden:
		e.Error.Type = "permission_error"
	case http.StatusNotFound:
		e.Error.Type = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		e.Error.Type = "request_too_large"
	case http.StatusTooManyRequests:
		e.Error.Type = "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		e.Error.Type = "overloaded_error"
	case http.StatusGatewayTimeout:
		e.Error.Type = "timeout_error"
	default:
		e.Error.Type = "invalid_request_error"
		if he.status >= 500 {
			e.Error.Type = "api_error"
		}
	}
	return e
}

// writeAnthropicError answers he in Anthropic's shape, with its status.
func writeAnthropicError(w http.ResponseWriter, he *httpError) {
	writeJSON(w, he.status, anthropicErrorBody(he))
}
