package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// A response's output is made from the reply's events (chat.ReplyEvent)
// as the reply is read, token by token: a reasoning item, a message, a
// function call per call, in the order the model writes them. Streamed,
// every change is an event of the Responses API (item added, deltas,
// done); not streamed, the same items are the response's output, so both
// are the same by construction. The whitespace around a message's text
// or a reasoning's (what separates them from the markers and calls) is
// not part of it: an item is added at its first other character, and
// trailing whitespace is held until more text follows.

// createResponse is POST /v1/responses.
func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) error {
	var body responsesRequest
	if err := decode(r, &body); err != nil {
		return err
	}
	if err := body.Check(); err != nil {
		return err
	}
	m, conv, items, err := s.responseConversation(r.Context(), r.URL.Path, &body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	info(ctx).stream, info(ctx).user = body.Stream, body.User
	events, err := s.start(ctx, m, []runtime.Request{conv.req}, 1)
	if err != nil {
		return err
	}
	run := newResponseRun(&body, m, conv.reply, items)
	cs := newChoices(1, []int{-1})
	reader := m.eng.NewReplyReader(conv.reply.opts)
	cs[0].read = func(tok runtime.Token) { run.out.read(tok, reader.Next(tok)) }
	end := func(st runtime.Stats) {
		evs, _ := reader.Close()
		run.out.take(evs)
		run.out.finish(st)
	}
	if body.Stream {
		s.streamResponse(ctx, w, events, cs, run, end)
		return nil
	}
	if err := collect(ctx, events, cs, false, m.eng.Tokenizer()); err != nil {
		return err
	}
	end(cs[0].stats)
	res, err := json.Marshal(run.final(usageOf(ctx, cs, 1), cs[0].stats))
	if err != nil {
		return err
	}
	s.keep(run, res)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(res)
	return nil
}

// streamResponse writes the response as the Responses API's events:
// response.created and response.in_progress, the output items' events as
// the reply is read, and response.completed (or response.incomplete, out
// of tokens). A stream that fails once begun ends with an error event and
// response.failed, saying what a request not yet begun would have been
// answered (Server.answer).
func (s *Server) streamResponse(ctx context.Context, w http.ResponseWriter, events <-chan event, cs []*choice, run *responseRun, end func(runtime.Stats)) {
	out := newSSE(w)
	b := run.out
	b.emit("response.created", map[string]any{"response": run.object("in_progress")})
	b.emit("response.in_progress", map[string]any{"response": run.object("in_progress")})
	b.flush(out)
	err := relay(ctx, events, cs, false, nil, func(int, string, []tokenLogprob) error { return b.flush(out) },
		func(_ int, st runtime.Stats) { end(st) })
	if err != nil {
		b.flush(out)
		he := s.answer(ctx, err)
		code := "server_error"
		switch {
		case he.code != nil:
			code = *he.code
		case he.status == http.StatusTooManyRequests:
			code = "rate_limit_exceeded"
		}
		b.emit("error", map[string]any{"code": code, "message": he.msg, "param": nil})
		failed := run.object("failed")
		failed.Error = &responseError{Code: code, Message: he.msg, Type: he.kind}
		b.emit("response.failed", map[string]any{"response": failed})
		b.flush(out)
		return
	}
	final := run.final(usageOf(ctx, cs, 1), cs[0].stats)
	name := "response.completed"
	if final.Status == "incomplete" {
		name = "response.incomplete"
	}
	b.emit(name, map[string]any{"response": final})
	if b.flush(out) == nil {
		if res, err := json.Marshal(final); err == nil {
			s.keep(run, res)
		}
	}
}

// keep stores a response (res, its object as JSON) when the request asked
// for it, with its conversation: the input (what it continued, and its
// own items) and its output as input items.
func (s *Server) keep(run *responseRun, res []byte) {
	if !run.head.Store {
		return
	}
	history, err := json.Marshal(append(run.items, run.out.asInput()...))
	if err != nil {
		return
	}
	s.stored.put(&storedResponse{id: run.head.ID, body: res, history: history})
}

// responseRun is one response as it is made.
type responseRun struct {
	head  responseObject // what does not change as it runs
	out   *outputBuilder
	items []inputItem // the conversation it continues, for the store
}

func newResponseRun(b *responsesRequest, m *model, rp replyPlan, items []inputItem) *responseRun {
	id := "resp_" + newID()
	head := responseObject{ID: id, Object: "response", CreatedAt: time.Now().Unix(), Model: m.name,
		Instructions: b.Instructions, MaxOutputTokens: b.MaxOutputTokens, ParallelToolCalls: b.Parallel(),
		Store: b.Store == nil || *b.Store, Temperature: 1, TopP: 1, Truncation: "disabled",
		Text: responseText{Format: &responseFormat{Type: "text"}}, ToolChoice: json.RawMessage(`"auto"`),
		Tools: b.Tools, Metadata: b.Metadata}
	if b.Temperature != nil {
		head.Temperature = *b.Temperature
	}
	if b.TopP != nil {
		head.TopP = *b.TopP
	}
	if b.Text != nil {
		head.Text.Verbosity = b.Text.Verbosity
		if b.Text.Format != nil {
			head.Text.Format = b.Text.Format
		}
	}
	if !isNull(b.ToolChoice) {
		head.ToolChoice = b.ToolChoice
	}
	if b.PreviousResponseID != "" {
		head.PreviousResponseID = &b.PreviousResponseID
	}
	if b.Reasoning != nil {
		head.Reasoning.Effort, head.Reasoning.Summary = b.Reasoning.Effort, b.Reasoning.Summary
		if head.Reasoning.Summary == nil {
			head.Reasoning.Summary = b.Reasoning.GenerateSummary
		}
	}
	if b.User != "" {
		head.User = &b.User
	}
	if head.Tools == nil {
		head.Tools = []responseTool{}
	}
	if head.Metadata == nil {
		head.Metadata = map[string]string{}
	}
	items = items[:len(items):len(items)] // the store's append copies
	return &responseRun{head: head, items: items,
		out: &outputBuilder{stream: b.Stream, format: rp.format, callPrefix: "call_" + strings.TrimPrefix(id, "resp_")}}
}

// object is the response as it stands, with status.
func (run *responseRun) object(status string) responseObject {
	o := run.head
	o.Status = status
	o.Output = run.out.output()
	return o
}

// final is the finished response: completed, or incomplete when it ran
// out of tokens, with its usage.
func (run *responseRun) final(u *usage, st runtime.Stats) responseObject {
	status := "completed"
	if *finishReason(st) == "length" {
		status = "incomplete"
	}
	o := run.object(status)
	if status == "completed" {
		now := time.Now().Unix()
		o.CompletedAt = &now
	} else {
		o.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	o.Usage = &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	o.Usage.OutputTokensDetails.ReasoningTokens = min(run.out.reasoningTokens(), u.CompletionTokens)
	return o
}

// responseObject is the Responses API's response.
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	CompletedAt        *int64             `json:"completed_at"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	} `json:"reasoning"`
	Store       bool              `json:"store"`
	Temperature float64           `json:"temperature"`
	Text        responseText      `json:"text"`
	ToolChoice  json.RawMessage   `json:"tool_choice"`
	Tools       []responseTool    `json:"tools"`
	TopP        float64           `json:"top_p"`
	Truncation  string            `json:"truncation"`
	Usage       *responseUsage    `json:"usage"`
	User        *string           `json:"user,omitempty"`
	Metadata    map[string]string `json:"metadata"`
	Background  bool              `json:"background"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Type    string `json:"type,omitempty"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		// CachedTokens is 0: the engine shares a prompt's cached blocks
		// without counting them for the request.
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// Output items, as the API shows them.

type messageItem struct {
	Type    string       `json:"type"` // "message"
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string `json:"type"` // "output_text"
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type reasoningItem struct {
	Type    string          `json:"type"` // "reasoning"
	ID      string          `json:"id"`
	Status  string          `json:"status"`
	Summary []any           `json:"summary"`
	Content []reasoningText `json:"content"`
}

type reasoningText struct {
	Type string `json:"type"` // "reasoning_text"
	Text string `json:"text"`
}

type functionCallItem struct {
	Type      string `json:"type"` // "function_call"
	ID        string `json:"id"`
	Status    string `json:"status"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// outItem is an output item being made.
type outItem struct {
	kind   chat.EventKind // EventReasoning, EventText or EventCall
	index  int            // its output_index, -1 until it is added
	id     string
	status string
	text   strings.Builder // the reasoning, the text, or the call's arguments
	held   string          // trailing whitespace not yet in text
	callID string
	name   string
}

// json is the item as the API shows it; part is its content part.
func (it *outItem) json() any {
	switch it.kind {
	case chat.EventReasoning:
		r := reasoningItem{Type: "reasoning", ID: it.id, Status: it.status, Summary: []any{}, Content: []reasoningText{}}
		if it.status != "in_progress" {
			r.Content = append(r.Content, reasoningText{Type: "reasoning_text", Text: it.text.String()})
		}
		return r
	case chat.EventText:
		m := messageItem{Type: "message", ID: it.id, Status: it.status, Role: "assistant", Content: []outputText{}}
		if it.status != "in_progress" {
			m.Content = append(m.Content, it.part().(outputText))
		}
		return m
	}
	return functionCallItem{Type: "function_call", ID: it.id, Status: it.status, CallID: it.callID, Name: it.name, Arguments: it.text.String()}
}

func (it *outItem) part() any {
	if it.kind == chat.EventReasoning {
		return reasoningText{Type: "reasoning_text", Text: it.text.String()}
	}
	return outputText{Type: "output_text", Text: it.text.String(), Annotations: []any{}, Logprobs: []any{}}
}

// outputBuilder makes a response's output items from the reply's events,
// and, streamed, the events that say so, queued until flushed.
type outputBuilder struct {
	stream     bool
	format     *chat.ReplyFormat
	callPrefix string // of the calls' ids

	items []*outItem // added, in order
	cur   *outItem   // the item being written, nil when none
	queue []map[string]any
	seq   int // the next event's sequence_number

	// Reasoning tokens: the tokens read, the number read when reasoning
	// was last written, and whether the reply went past its reasoning.
	tokens, reasoned int
	pastReasoning    bool
}

// read takes a token of the reply and the events it completed.
func (b *outputBuilder) read(tok runtime.Token, evs []chat.ReplyEvent) {
	if tok.ID >= 0 {
		b.tokens++
	}
	b.take(evs)
}

// take takes reply events.
func (b *outputBuilder) take(evs []chat.ReplyEvent) {
	for _, e := range evs {
		switch e.Kind {
		case chat.EventReasoning, chat.EventText:
			if b.cur == nil || b.cur.kind != e.Kind {
				b.end("completed")
				b.cur = &outItem{kind: e.Kind, index: -1}
			}
			b.write(b.cur, e.Text)
		case chat.EventCall:
			b.end("completed")
			b.cur = &outItem{kind: chat.EventCall, index: -1, callID: b.format.CallID(b.callPrefix, e.Call, e.ID), name: e.Name}
			b.add(b.cur)
		case chat.EventArgs:
			if b.cur == nil || b.cur.kind != chat.EventCall {
				continue // a call's arguments come right after it
			}
			b.cur.text.WriteString(e.Text)
			b.emit("response.function_call_arguments.delta", map[string]any{"item_id": b.cur.id, "output_index": b.cur.index, "delta": e.Text})
		}
		if e.Kind == chat.EventReasoning {
			b.reasoned = b.tokens
		} else if b.reasoned > 0 {
			b.pastReasoning = true
		}
	}
}

// reasoningTokens are the tokens of the reasoning: those read until it
// was last written, and its closing marker (one token in the families
// that reason: Qwen3's and DeepSeek's </think>) when the reply went on.
func (b *outputBuilder) reasoningTokens() int {
	if b.pastReasoning {
		return min(b.reasoned+1, b.tokens)
	}
	return b.reasoned
}

// write adds text to a reasoning or a message, which is added at its
// first character that is not a space.
func (b *outputBuilder) write(it *outItem, s string) {
	if it.index < 0 {
		if s = strings.TrimLeftFunc(s, unicode.IsSpace); s == "" {
			return
		}
		b.add(it)
	}
	s = it.held + s
	body := strings.TrimRightFunc(s, unicode.IsSpace)
	it.held = s[len(body):]
	if body == "" {
		return
	}
	it.text.WriteString(body)
	name := "response.output_text.delta"
	fields := map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "delta": body}
	if it.kind == chat.EventReasoning {
		name = "response.reasoning_text.delta"
	} else {
		fields["logprobs"] = []any{}
	}
	b.emit(name, fields)
}

// add makes it an output item.
func (b *outputBuilder) add(it *outItem) {
	prefix := map[chat.EventKind]string{chat.EventReasoning: "rs_", chat.EventText: "msg_", chat.EventCall: "fc_"}[it.kind]
	it.id, it.index, it.status = prefix+newID(), len(b.items), "in_progress"
	b.items = append(b.items, it)
	b.emit("response.output_item.added", map[string]any{"output_index": it.index, "item": it.json()})
	if it.kind != chat.EventCall {
		part := it.part()
		b.emit("response.content_part.added", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "part": part})
	}
}

// end ends the item being written with status: what it holds is done.
func (b *outputBuilder) end(status string) {
	it := b.cur
	b.cur = nil
	if it == nil || it.index < 0 {
		return
	}
	it.status = status
	at := map[string]any{"item_id": it.id, "output_index": it.index}
	if it.kind != chat.EventCall {
		at["content_index"] = 0
	}
	with := func(k string, v any) map[string]any {
		m := map[string]any{k: v}
		for k, v := range at {
			m[k] = v
		}
		return m
	}
	switch it.kind {
	case chat.EventCall:
		if strings.TrimSpace(it.text.String()) == "" {
			it.text.WriteString("{}")
		}
		b.emit("response.function_call_arguments.done", with("arguments", it.text.String()))
	case chat.EventReasoning:
		b.emit("response.reasoning_text.done", with("text", it.text.String()))
	default:
		done := with("text", it.text.String())
		done["logprobs"] = []any{}
		b.emit("response.output_text.done", done)
	}
	if it.kind != chat.EventCall {
		b.emit("response.content_part.done", with("part", it.part()))
	}
	b.emit("response.output_item.done", map[string]any{"output_index": it.index, "item": it.json()})
}

// finish ends the output: the item being written is incomplete when the
// reply ran out of tokens. A reply of nothing (or of whitespace) is an
// empty message, as clients that read the first message expect one,
// except a reply cut short in its reasoning's leading whitespace: that is
// the reasoning, empty and incomplete, as its tokens are counted.
func (b *outputBuilder) finish(st runtime.Stats) {
	status := "completed"
	if *finishReason(st) == "length" {
		status = "incomplete"
	}
	if len(b.items) == 0 {
		if status == "completed" || b.cur == nil || b.cur.kind != chat.EventReasoning {
			b.cur = &outItem{kind: chat.EventText, index: -1}
		}
		b.add(b.cur)
	}
	b.end(status)
}

// output is the items as the API shows them.
func (b *outputBuilder) output() []any {
	out := make([]any, len(b.items))
	for i, it := range b.items {
		out[i] = it.json()
	}
	return out
}

// asInput is the output as input items, for the store: what a client
// continuing the conversation would send back.
func (b *outputBuilder) asInput() []inputItem {
	var out []inputItem
	for _, it := range b.items {
		switch it.kind {
		case chat.EventReasoning:
			parts, _ := json.Marshal([]reasoningText{{Type: "reasoning_text", Text: it.text.String()}})
			out = append(out, inputItem{Type: "reasoning", Content: parts})
		case chat.EventText:
			text, _ := json.Marshal(it.text.String())
			out = append(out, inputItem{Type: "message", Role: "assistant", Content: text})
		case chat.EventCall:
			args := it.text.String()
			if !json.Valid([]byte(args)) { // cut short: the call is kept without them
				args = "{}"
			}
			out = append(out, inputItem{Type: "function_call", CallID: it.callID, Name: it.name, Arguments: &args})
		}
	}
	return out
}

// emit queues a stream event (streamed only).
func (b *outputBuilder) emit(name string, fields map[string]any) {
	if !b.stream {
		return
	}
	fields["type"], fields["sequence_number"] = name, b.seq
	b.seq++
	b.queue = append(b.queue, fields)
}

// flush writes the queued events.
func (b *outputBuilder) flush(out *sse) error {
	for len(b.queue) > 0 {
		ev := b.queue[0]
		b.queue = b.queue[1:]
		if err := out.named(ev["type"].(string), ev); err != nil {
			return fmt.Errorf("writing the stream: %w", err)
		}
	}
	return nil
}
