//go:build js

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"syscall/js"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// A chat in the browser is the request of OpenAI's Chat Completions, as
// the HTTP server reads it (runtime/server): messages with tool calls,
// tool results and reasoning, tools and tool_choice, the template's
// variables. The page's input object is read through JSON, so that a
// field of the wrong shape is a bad request with a message naming it,
// never a crash; the reply is read as it is generated (runtime's
// ReplyReader) into reasoning, text and tool calls.

// chatInput is a {messages} input of generate and tokenize: the
// conversation fields of a chat request (wire.Chat), as the server reads
// them.
type chatInput = wire.Chat

func badRequest(param, format string, args ...any) error {
	return &wire.ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// readChat reads a {messages} input as JSON, and the messages and
// template variables of the request it makes (wire, as the server).
func readChat(v js.Value) (runtime.Request, *chatInput, error) {
	var req runtime.Request
	s, err := jsCall(js.Global().Get("JSON"), "stringify", v)
	if err != nil {
		return req, nil, badRequest("messages", "the request is not JSON: %v", err)
	}
	in := &chatInput{}
	if err := wire.Unmarshal([]byte(s.String()), in); err != nil {
		return req, nil, err
	}
	if err := in.Read(context.Background(), &req, wire.ImageReader{Limits: vision.DefaultLimits}); err != nil {
		return req, nil, err
	}
	return req, in, nil
}

// prepareChat readies req, read from in, to run on eng: its tools
// (wire.Tools), and (runtime.Engine.PrepareChat) the prompt's tokens,
// a required call's grammar and prefill, and how its reply is read.
func prepareChat(ctx context.Context, eng *runtime.Engine, req runtime.Request, in *chatInput) (runtime.Request, chat.ParseOptions, error) {
	defs, tools, err := in.ChatTools(eng.ReplyFormat())
	if err != nil {
		return req, chat.ParseOptions{}, err
	}
	req.Tools = defs
	return eng.PrepareChat(ctx, req, tools)
}

// replyEvents are a reply's events as the page sees them: {kind: "text" |
// "reasoning", text}, {kind: "call", call, name, id} and {kind: "args",
// call, text}. A call's id is the format's (chat.ReplyFormat.CallID),
// made from prefix where the model gave none, so that the page need not
// know each family's rule for ids.
func replyEvents(evs []chat.ReplyEvent, f *chat.ReplyFormat, prefix string) []any {
	out := make([]any, 0, len(evs))
	for _, e := range evs {
		switch e.Kind {
		case chat.EventText:
			out = append(out, map[string]any{"kind": "text", "text": e.Text})
		case chat.EventReasoning:
			out = append(out, map[string]any{"kind": "reasoning", "text": e.Text})
		case chat.EventCall:
			out = append(out, map[string]any{"kind": "call", "call": e.Call, "name": e.Name, "id": f.CallID(prefix, e.Call, e.ID)})
		case chat.EventArgs:
			out = append(out, map[string]any{"kind": "args", "call": e.Call, "text": e.Text})
		}
	}
	return out
}

// replyCalls are a whole reply's calls in OpenAI's shape, with the ids
// replyEvents gave them.
func replyCalls(calls []chat.ReplyCall, f *chat.ReplyFormat, prefix string) []any {
	out := make([]any, len(calls))
	for k, c := range calls {
		out[k] = map[string]any{"id": f.CallID(prefix, k, c.ID), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": c.Arguments}}
	}
	return out
}

// callPrefix is options.callPrefix, from which calls the model gave no id
// get theirs (index.js passes one made from the completion's id), or a
// random one.
func callPrefix(opts js.Value) string {
	if p := optionalString(opts, "callPrefix", ""); p != "" {
		return p
	}
	return "call-" + rand.Text()[:16]
}
