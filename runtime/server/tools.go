package server

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime/grammar"
)

// Tool calling. Tools are rendered by the model's chat template (the
// plain format lists them itself); a reply calls them in Qwen's format,
// <tool_call>{"name": ..., "arguments": {...}}</tool_call>, which the
// server parses into OpenAI's tool_calls. tool_choice "required" or a
// named function constrains the reply to such calls, with arguments that
// fit the function's parameters schema; "auto" lets the model choose and
// parses what it wrote; "none" renders no tools and parses nothing.

type tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
	} `json:"function"`
}

type toolCall struct {
	Index    *int   `json:"index,omitempty"` // in stream deltas
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"` // a JSON object, as text
	} `json:"function"`
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolSetup checks tools and tool_choice and returns the tool definitions
// to render, the grammar the reply must follow (nil: free), and whether
// the reply is parsed for calls.
//
// With parallel (OpenAI's parallel_tool_calls, true by default) a
// constrained reply may make up to 8 calls, one block after another.
func toolSetup(tools []tool, choiceRaw json.RawMessage, parallel bool) (defs []any, g *grammar.Grammar, parse bool, err error) {
	choice, named := "auto", ""
	if len(tools) == 0 {
		choice = "none"
	}
	if len(choiceRaw) > 0 && !isNull(choiceRaw) {
		var s string
		var obj struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(choiceRaw, &s) == nil:
			choice = s
		case json.Unmarshal(choiceRaw, &obj) == nil && obj.Function.Name != "":
			choice, named = "named", obj.Function.Name
		default:
			return nil, nil, false, badRequest("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`)
		}
	}
	switch choice {
	case "none", "auto", "required", "named":
	default:
		return nil, nil, false, badRequest("tool_choice", `tool_choice %q is not one of "none", "auto" and "required"`, choice)
	}
	if choice != "none" && len(tools) == 0 {
		return nil, nil, false, badRequest("tool_choice", "tool_choice %q needs tools", choice)
	}
	var alts []string
	found := false
	for i, t := range tools {
		if t.Type != "function" || !toolName.MatchString(t.Function.Name) {
			return nil, nil, false, badRequest("tools", "tool %d must be {\"type\": \"function\", \"function\": {\"name\": ...}} with a name of letters, digits, _ and -", i)
		}
		params := t.Function.Parameters
		if len(params) == 0 || isNull(params) {
			params = json.RawMessage(`{"type":"object"}`)
		}
		var def any
		if err := json.Unmarshal(mustJSON(t), &def); err != nil {
			return nil, nil, false, badRequest("tools", "tool %d: %v", i, err)
		}
		defs = append(defs, def)
		if choice == "named" && t.Function.Name != named {
			continue
		}
		found = found || t.Function.Name == named
		name, _ := json.Marshal(t.Function.Name)
		alts = append(alts, fmt.Sprintf(`{"type":"object","properties":{"name":{"const":%s},"arguments":%s},"required":["name","arguments"],"additionalProperties":false}`, name, params))
	}
	if choice == "named" && !found {
		return nil, nil, false, badRequest("tool_choice", "tool_choice names %q, which is not among the tools", named)
	}
	if choice == "none" {
		return nil, nil, false, nil
	}
	if choice == "auto" {
		return defs, nil, true, nil
	}
	src, err := grammar.JSONSchemaGBNF([]byte(`{"anyOf":[`+strings.Join(alts, ",")+`]}`), grammar.SchemaOptions{})
	if err != nil {
		return nil, nil, false, badRequest("tools", "a tool's parameters: %v", err)
	}
	more := 7
	if !parallel {
		more = 0
	}
	src = strings.Replace(src, "root ::= ", "tool-call ::= ", 1) +
		fmt.Sprintf(`root ::= "<tool_call>\n" tool-call "\n</tool_call>" ( "\n<tool_call>\n" tool-call "\n</tool_call>" ){0,%d}`, more) + "\n"
	if g, err = grammar.Parse(src); err != nil {
		return nil, nil, false, badRequest("tools", "%v", err)
	}
	return defs, g, true, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

var toolCallRE = regexp.MustCompile(`(?s)<tool_call>\s*(.*?)\s*</tool_call>`)

// parseToolCalls takes the calls out of a reply: the text left around
// them, and the calls in order. Blocks that are not a JSON call with a
// name stay in the text.
func parseToolCalls(text, idPrefix string) (string, []toolCall) {
	var calls []toolCall
	rest := toolCallRE.ReplaceAllStringFunc(text, func(block string) string {
		inner := toolCallRE.FindStringSubmatch(block)[1]
		var c struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal([]byte(inner), &c) != nil || c.Name == "" {
			return block
		}
		var tc toolCall
		tc.ID, tc.Type = fmt.Sprintf("%s-%d", idPrefix, len(calls)), "function"
		tc.Function.Name = c.Name
		tc.Function.Arguments = "{}"
		if len(c.Arguments) > 0 && !isNull(c.Arguments) {
			tc.Function.Arguments = string(c.Arguments)
		}
		calls = append(calls, tc)
		return ""
	})
	return strings.TrimSpace(rest), calls
}

// chatToolCalls turns a request message's tool calls into the template's.
func chatToolCalls(calls []toolCall) ([]chat.ToolCall, error) {
	var out []chat.ToolCall
	for _, c := range calls {
		var args map[string]any
		if c.Function.Arguments != "" {
			if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil {
				return nil, badRequest("messages", "tool call %q: arguments must be a JSON object", c.ID)
			}
		}
		out = append(out, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return out, nil
}
