package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// ParamError is a request field that cannot be used: Param names it as
// the request spells it.
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string { return e.Msg }

// Unwrap makes every refusal a bad request.
func (e *ParamError) Unwrap() error { return runtime.ErrBadRequest }

func paramError(param, format string, args ...any) error {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// Message is a message of the conversation, in a request (and, as the
// reply, in an answer).
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// ReasoningContent is the reasoning a reply's parser split off
	// (llama-server's and vLLM's field); in a request, it is rendered back.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// Content is a message's content: a string, null, or a list of content
// parts of type "text" or "image_url" (an image, for a model loaded with a
// vision projector). Set tells "" from null. Each image part is
// runtime.ImageMarker in Text, where it stands, and its URL in Images.
type Content struct {
	Text   string
	Set    bool
	Images []string
}

func (c *Content) UnmarshalJSON(b []byte) error {
	switch t := bytes.TrimSpace(b); {
	case len(t) == 0 || string(t) == "null":
		*c = Content{}
		return nil
	case t[0] == '"':
		c.Set = true
		return json.Unmarshal(t, &c.Text)
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     *string         `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return paramError("messages", "content must be a string or an array of content parts")
	}
	var text bytes.Buffer
	var images []string
	for _, p := range parts {
		switch {
		case p.Type == "image_url":
			url, err := imageURL(p.ImageURL)
			if err != nil {
				return err
			}
			text.WriteString(runtime.ImageMarker)
			images = append(images, url)
			continue
		case p.Type != "text":
			return paramError("messages", "content part of type %q: parts are of the types text and image_url", p.Type)
		case p.Text == nil:
			return paramError("messages", `a content part of type "text" needs a "text"`)
		}
		text.WriteString(*p.Text)
	}
	c.Text, c.Set, c.Images = text.String(), true, images
	return nil
}

// imageURL reads an image_url part's {"url": ...} (or the bare string
// some clients send).
func imageURL(raw json.RawMessage) (string, error) {
	var u struct {
		URL *string `json:"url"`
	}
	var s string
	switch {
	case json.Unmarshal(raw, &s) == nil:
		return s, nil
	case json.Unmarshal(raw, &u) == nil && u.URL != nil:
		return *u.URL, nil
	}
	return "", paramError("messages", `a content part of type "image_url" needs "image_url": {"url": "data:image/png;base64,..."}`)
}

func (c Content) MarshalJSON() ([]byte, error) { return json.Marshal(c.Text) }

// Tool is OpenAI's {"type": "function", "function": {...}}.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

// ToolCall is a call of an assistant message, its arguments a JSON
// object as text.
type ToolCall struct {
	Index    *int   `json:"index,omitempty"` // in stream deltas
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"` // a JSON object, as text
	} `json:"function"`
}

// ChatMessages are messages as the chat template takes them. Roles are
// system, developer (OpenAI's newer name for system), user, assistant and
// tool.
func ChatMessages(ms []Message) ([]chat.Message, error) {
	if len(ms) == 0 {
		return nil, paramError("messages", "messages must hold at least one message")
	}
	out := make([]chat.Message, 0, len(ms))
	for i, m := range ms {
		role := m.Role
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer":
			role = "system"
		default:
			return nil, paramError("messages", "message %d has role %q; roles are system, developer, user, assistant and tool", i, m.Role)
		}
		calls, err := chatToolCalls(m.ToolCalls)
		if err != nil {
			return nil, err
		}
		out = append(out, chat.Message{Role: role, Content: m.Content.Text, ToolCalls: calls, ToolCallID: m.ToolCallID, Reasoning: m.ReasoningContent})
	}
	return out, nil
}

// chatToolCalls turns a message's tool calls into the template's.
func chatToolCalls(calls []ToolCall) ([]chat.ToolCall, error) {
	var out []chat.ToolCall
	for _, c := range calls {
		var args map[string]any
		if c.Function.Arguments != "" {
			if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
				return nil, paramError("messages", "tool call %q: arguments must be a JSON object", c.ID)
			}
		}
		out = append(out, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return out, nil
}

// reservedVars are the chat template's own variables, which
// chat_template_kwargs may not replace.
var reservedVars = []string{"messages", "tools", "bos_token", "eos_token", "add_generation_prompt", "strftime_now"}

// TemplateVars are a request's further template variables: its
// chat_template_kwargs (vLLM's and llama-server's: {"enable_thinking":
// false} for Qwen3), and reasoning_effort (OpenAI's minimal to high, which
// gpt-oss's template reads).
func TemplateVars(kwargs map[string]any, effort string) (map[string]any, error) {
	for _, k := range reservedVars {
		if _, ok := kwargs[k]; ok {
			return nil, paramError("chat_template_kwargs", "chat_template_kwargs may not set %q, which the engine sets", k)
		}
	}
	switch effort {
	case "":
		return kwargs, nil
	case "minimal", "low", "medium", "high":
	default:
		return nil, paramError("reasoning_effort", "reasoning_effort %q is not one of minimal, low, medium and high", effort)
	}
	vars := map[string]any{"reasoning_effort": effort}
	for k, v := range kwargs {
		vars[k] = v
	}
	return vars, nil
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Tools reads tools, tool_choice and parallel_tool_calls for a reply in
// format f: the definitions the template renders, and the calls the reply
// is read for or held to (runtime.Engine.PrepareChat takes them).
//
// tool_choice "auto" lets the model choose and reads what it wrote,
// "required" or a named function holds the reply to calls by grammar,
// "none" renders no tools and reads nothing. With parallel (true by
// default in OpenAI's API) a held reply may make up to 8 calls, where the
// format has room for more than one.
func Tools(tools []Tool, choiceRaw json.RawMessage, parallel bool, f *chat.ReplyFormat) ([]any, runtime.ChatTools, error) {
	var ct runtime.ChatTools
	choice, named := "auto", ""
	if len(tools) == 0 {
		choice = "none"
	}
	if t := bytes.TrimSpace(choiceRaw); len(t) > 0 && string(t) != "null" {
		var obj struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(t, &choice) == nil:
		case json.Unmarshal(t, &obj) == nil && obj.Function.Name != "":
			choice, named = "named", obj.Function.Name
		default:
			return nil, ct, paramError("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`)
		}
		switch choice {
		case "none", "auto", "required", "named":
		default:
			return nil, ct, paramError("tool_choice", `tool_choice %q is not one of "none", "auto" and "required"`, choice)
		}
	}
	if choice != "none" && len(tools) == 0 {
		return nil, ct, paramError("tool_choice", "tool_choice %q needs tools", choice)
	}
	var defs []any
	for i, t := range tools {
		if t.Type != "function" || !toolName.MatchString(t.Function.Name) {
			return nil, ct, paramError("tools", `tool %d must be {"type": "function", "function": {"name": ...}} with a name of letters, digits, _ and -`, i)
		}
		params := t.Function.Parameters
		if p := bytes.TrimSpace(params); len(p) == 0 || string(p) == "null" {
			params = json.RawMessage(`{"type":"object"}`)
		}
		var def any
		b, _ := json.Marshal(t)
		if err := json.Unmarshal(b, &def); err != nil {
			return nil, ct, paramError("tools", "tool %d: %v", i, err)
		}
		defs = append(defs, def)
		spec := chat.ToolSpec{Name: t.Function.Name, Parameters: params}
		ct.Specs = append(ct.Specs, spec)
		if choice == "required" || choice == "named" && t.Function.Name == named {
			ct.Required = append(ct.Required, spec)
		}
	}
	if choice == "named" && len(ct.Required) == 0 {
		return nil, ct, paramError("tool_choice", "tool_choice names %q, which is not among the tools", named)
	}
	if choice == "none" {
		return nil, runtime.ChatTools{}, nil
	}
	ct.Parse = true
	if ct.Required != nil && !f.CanRequire(len(ct.Required)) {
		return nil, ct, paramError("tool_choice", "this model's tool-call format (%s) writes a control token between a call's name and its arguments, so a grammar can hold a reply to one tool only: name it in tool_choice", f.Name())
	}
	if parallel && !f.Single() {
		ct.More = 7
	}
	return defs, ct, nil
}

// AsParam reports err's ParamError, if it is one.
func AsParam(err error) (*ParamError, bool) {
	var pe *ParamError
	ok := errors.As(err, &pe)
	return pe, ok
}
