//go:build js

package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"syscall/js"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// A chat in the browser is the request of OpenAI's Chat Completions, as
// the HTTP server reads it (runtime/server): messages with tool calls,
// tool results and reasoning, tools and tool_choice, the template's
// variables. The page's input object is read through JSON, so that a
// field of the wrong shape is a bad request with a message naming it,
// never a crash; the reply is read as it is generated (runtime's
// ReplyReader) into reasoning, text and tool calls.

// chatInput is a {messages} input of generate and tokenize.
type chatInput struct {
	Messages           []chatMessage   `json:"messages"`
	Tools              []chatTool      `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	ChatTemplateKwargs map[string]any  `json:"chat_template_kwargs"`
	ReasoningEffort    string          `json:"reasoning_effort"`
}

type chatMessage struct {
	Role             string         `json:"role"`
	Content          messageContent `json:"content"`
	ToolCalls        []chatToolCall `json:"tool_calls"`
	ToolCallID       string         `json:"tool_call_id"`
	ReasoningContent string         `json:"reasoning_content"`
}

// chatTool is OpenAI's {"type": "function", "function": {...}}.
type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// chatToolCall is a call of an assistant message, its arguments a JSON
// object as text.
type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// messageContent is a message's content: a string, null, or a list of
// content parts, all of type "text" (this engine reads text only).
type messageContent string

func (c *messageContent) UnmarshalJSON(b []byte) error {
	var s *string
	if json.Unmarshal(b, &s) == nil {
		if s != nil {
			*c = messageContent(*s)
		}
		return nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("content must be a string or an array of content parts")
	}
	var text string
	for _, p := range parts {
		switch {
		case p.Type != "text":
			return fmt.Errorf("content part of type %q: this model takes text only", p.Type)
		case p.Text == nil:
			return errors.New(`a content part of type "text" needs a "text"`)
		}
		text += *p.Text
	}
	*c = messageContent(text)
	return nil
}

func badRequest(param, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", runtime.ErrBadRequest, param, fmt.Sprintf(format, args...))
}

// readChat reads a {messages} input as JSON, and the messages and
// template variables of the request it makes.
func readChat(v js.Value) (runtime.Request, *chatInput, error) {
	var req runtime.Request
	s, err := jsCall(js.Global().Get("JSON"), "stringify", v)
	if err != nil {
		return req, nil, badRequest("messages", "the request is not JSON: %v", err)
	}
	in := &chatInput{}
	if err := json.Unmarshal([]byte(s.String()), in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return req, nil, badRequest(te.Field, "%s cannot be a JSON %s", te.Field, te.Value)
		}
		return req, nil, badRequest("messages", "%v", err)
	}
	if len(in.Messages) == 0 {
		return req, nil, badRequest("messages", "messages must hold at least one message")
	}
	for i, m := range in.Messages {
		role := m.Role
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer": // OpenAI's newer name for system
			role = "system"
		default:
			return req, nil, badRequest("messages", "message %d has role %q; roles are system, developer, user, assistant and tool", i, m.Role)
		}
		var calls []chat.ToolCall
		for _, c := range m.ToolCalls {
			var args map[string]any
			if c.Function.Arguments != "" {
				if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
					return req, nil, badRequest("messages", "tool call %q: arguments must be a JSON object", c.ID)
				}
			}
			calls = append(calls, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
		}
		req.Messages = append(req.Messages, chat.Message{Role: role, Content: string(m.Content), ToolCalls: calls,
			ToolCallID: m.ToolCallID, Reasoning: m.ReasoningContent})
	}
	if req.TemplateVars, err = templateVars(in.ChatTemplateKwargs, in.ReasoningEffort); err != nil {
		return req, nil, err
	}
	return req, in, nil
}

// reservedVars are the chat template's own variables, which
// chat_template_kwargs may not replace.
var reservedVars = []string{"messages", "tools", "bos_token", "eos_token", "add_generation_prompt", "strftime_now"}

// templateVars are a chat's further template variables: its
// chat_template_kwargs, and reasoning_effort.
func templateVars(kwargs map[string]any, effort string) (map[string]any, error) {
	for _, k := range reservedVars {
		if _, ok := kwargs[k]; ok {
			return nil, badRequest("chat_template_kwargs", "chat_template_kwargs may not set %q, which the engine sets", k)
		}
	}
	switch effort {
	case "":
		return kwargs, nil
	case "minimal", "low", "medium", "high":
	default:
		return nil, badRequest("reasoning_effort", "reasoning_effort %q is not one of minimal, low, medium and high", effort)
	}
	vars := map[string]any{"reasoning_effort": effort}
	for k, v := range kwargs {
		vars[k] = v
	}
	return vars, nil
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// chatTools reads tools, tool_choice and parallel_tool_calls for a reply
// in format f: the definitions the template renders, and the calls the
// reply is read for or held to. It refuses what the HTTP server's
// toolSetup refuses; the two readings are to become one (issue 45).
func chatTools(tools []chatTool, choiceRaw json.RawMessage, parallel bool, f *chat.ReplyFormat) ([]any, runtime.ChatTools, error) {
	var ct runtime.ChatTools
	choice, named := "auto", ""
	if len(tools) == 0 {
		choice = "none"
	}
	if len(choiceRaw) > 0 && string(choiceRaw) != "null" {
		var obj struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(choiceRaw, &choice) == nil:
		case json.Unmarshal(choiceRaw, &obj) == nil && obj.Function.Name != "":
			choice, named = "named", obj.Function.Name
		default:
			return nil, ct, badRequest("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`)
		}
		switch choice {
		case "none", "auto", "required", "named":
		default:
			return nil, ct, badRequest("tool_choice", `tool_choice %q is not one of "none", "auto" and "required"`, choice)
		}
	}
	if choice != "none" && len(tools) == 0 {
		return nil, ct, badRequest("tool_choice", "tool_choice %q needs tools", choice)
	}
	var defs []any
	for i, t := range tools {
		if t.Type != "function" || !toolName.MatchString(t.Function.Name) {
			return nil, ct, badRequest("tools", `tool %d must be {"type": "function", "function": {"name": ...}} with a name of letters, digits, _ and -`, i)
		}
		var def any
		b, _ := json.Marshal(t)
		if err := json.Unmarshal(b, &def); err != nil {
			return nil, ct, badRequest("tools", "tool %d: %v", i, err)
		}
		defs = append(defs, def)
		spec := chat.ToolSpec{Name: t.Function.Name, Parameters: t.Function.Parameters}
		ct.Specs = append(ct.Specs, spec)
		if choice == "required" || choice == "named" && t.Function.Name == named {
			ct.Required = append(ct.Required, spec)
		}
	}
	if choice == "named" && len(ct.Required) == 0 {
		return nil, ct, badRequest("tool_choice", "tool_choice names %q, which is not among the tools", named)
	}
	if choice == "none" {
		return nil, runtime.ChatTools{}, nil
	}
	ct.Parse = true
	if ct.Required != nil && !f.CanRequire(len(ct.Required)) {
		return nil, ct, badRequest("tool_choice", "this model's tool-call format (%s) writes a control token between a call's name and its arguments, so a grammar can hold a reply to one tool only: name it in tool_choice", f.Name())
	}
	if parallel && !f.Single() {
		ct.More = 7 // up to 8 calls, as the server allows
	}
	return defs, ct, nil
}

// prepareChat readies req, read from in, to run on eng: its tools, and
// (runtime.Engine.PrepareChat) the prompt's tokens, a required call's
// grammar and prefill, and how its reply is read.
func prepareChat(ctx context.Context, eng *runtime.Engine, req runtime.Request, in *chatInput) (runtime.Request, chat.ParseOptions, error) {
	defs, tools, err := chatTools(in.Tools, in.ToolChoice, in.ParallelToolCalls == nil || *in.ParallelToolCalls, eng.ReplyFormat())
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
