package server

import (
	"encoding/json"
	"regexp"

	"github.com/tessera-llm/tessera/models/chat"
)

// Tool calling. Tools are rendered by the model's chat template (the
// plain format lists them itself), and a reply calls them in the format
// the model was trained on, which the reply's parser reads
// (chat.ReplyFormat: Qwen's <tool_call> blocks, Llama 3.1's JSON,
// Mistral's [TOOL_CALLS] list, ...). tool_choice "required" or a named
// function constrains the reply to such calls, with arguments that fit the
// function's parameters schema; "auto" lets the model choose and parses
// what it wrote; "none" renders no tools and parses nothing.

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

// toolPlan is what a chat request's tools make of it.
type toolPlan struct {
	defs  []any           // the tool definitions the template renders
	specs []chat.ToolSpec // the tools offered, for the reply's parser
	parse bool            // the reply is parsed for calls
	// required are the tools a call must use (all, or the named one):
	// nil when calls are not required. more is how many calls may follow
	// the first.
	required []chat.ToolSpec
	more     int
	choice   json.RawMessage
}

// toolSetup checks tools and tool_choice against the model's tool format
// and returns the plan.
//
// With parallel (OpenAI's parallel_tool_calls, true by default) a
// constrained reply may make up to 8 calls, where the format has room for
// more than one.
func toolSetup(tools []tool, choiceRaw json.RawMessage, parallel bool, f *chat.ReplyFormat) (toolPlan, error) {
	plan := toolPlan{choice: choiceRaw}
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
			return plan, badRequest("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`)
		}
	}
	switch choice {
	case "none", "auto", "required", "named":
	default:
		return plan, badRequest("tool_choice", `tool_choice %q is not one of "none", "auto" and "required"`, choice)
	}
	if choice != "none" && len(tools) == 0 {
		return plan, badRequest("tool_choice", "tool_choice %q needs tools", choice)
	}
	for i, t := range tools {
		if t.Type != "function" || !toolName.MatchString(t.Function.Name) {
			return plan, badRequest("tools", "tool %d must be {\"type\": \"function\", \"function\": {\"name\": ...}} with a name of letters, digits, _ and -", i)
		}
		params := t.Function.Parameters
		if len(params) == 0 || isNull(params) {
			params = json.RawMessage(`{"type":"object"}`)
		}
		var def any
		if err := json.Unmarshal(mustJSON(t), &def); err != nil {
			return plan, badRequest("tools", "tool %d: %v", i, err)
		}
		plan.defs = append(plan.defs, def)
		spec := chat.ToolSpec{Name: t.Function.Name, Parameters: params}
		plan.specs = append(plan.specs, spec)
		if choice == "required" || choice == "named" && t.Function.Name == named {
			plan.required = append(plan.required, spec)
		}
	}
	if choice == "named" && len(plan.required) == 0 {
		return plan, badRequest("tool_choice", "tool_choice names %q, which is not among the tools", named)
	}
	if choice == "none" {
		plan.defs, plan.specs = nil, nil
		return plan, nil
	}
	plan.parse = true
	if plan.required != nil && !f.CanRequire(len(plan.required)) {
		return plan, badRequest("tool_choice", "this model's tool-call format (%s) writes a control token between a call's name and its arguments, so a grammar can hold a reply to one tool only: name it in tool_choice", f.Name())
	}
	if parallel && !f.Single() {
		plan.more = 7
	}
	return plan, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
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
