package wire

import (
	"encoding/json"
	"regexp"
	"strings"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/grammar"
)

// Anthropic's Messages API (POST /v1/messages and
// /v1/messages/count_tokens): its request, and its translation into the
// engine's and the chat template's terms. A request becomes the same
// conversation a Chat Completions request does: its turns go through the
// model's own chat template, tool_use and tool_result blocks as the
// template's tool calls and tool messages. What Tessera cannot do
// (documents, Anthropic's server tools, a prefilled assistant turn) is
// refused with a ParamError that says so, never ignored.

// maxStopSequences bounds stop_sequences: each is matched against every
// token's text.
const maxStopSequences = 16

// AnthropicRequest is the body of POST /v1/messages (and of count_tokens,
// which has no max_tokens nor sampling). Unknown fields are ignored.
type AnthropicRequest struct {
	Model         string               `json:"model"`
	MaxTokens     *int                 `json:"max_tokens"`
	System        AnthropicBlocks      `json:"system"`
	Messages      []AnthropicTurn      `json:"messages"`
	Tools         []AnthropicTool      `json:"tools"`
	ToolChoice    *AnthropicToolChoice `json:"tool_choice"`
	StopSequences []string             `json:"stop_sequences"`
	Temperature   *float64             `json:"temperature"`
	TopP          *float64             `json:"top_p"`
	TopK          *int                 `json:"top_k"`
	Stream        bool                 `json:"stream"`
	Metadata      struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	Thinking     *AnthropicThinking `json:"thinking"`
	OutputConfig struct {
		Effort string `json:"effort"`
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"output_config"`
}

// AnthropicTurn is one of messages: a user's or the assistant's turn.
type AnthropicTurn struct {
	Role    string          `json:"role"`
	Content AnthropicBlocks `json:"content"`
}

// AnthropicBlocks is a content field: a string (one text block) or an
// array of content blocks.
type AnthropicBlocks []AnthropicBlock

func (bs *AnthropicBlocks) UnmarshalJSON(b []byte) error {
	switch {
	case isNull(b):
		*bs = nil
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*bs = AnthropicBlocks{{Type: "text", Text: &s}}
		return nil
	case b[0] != '[':
		return paramError("messages", "content must be a string or an array of content blocks")
	}
	var many []AnthropicBlock
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*bs = many
	return nil
}

// AnthropicBlock is a content block of a request, of any type; which
// fields count depends on the type.
type AnthropicBlock struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`     // text
	Thinking *string `json:"thinking"` // thinking
	// tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
	// tool_result
	ToolUseID string          `json:"tool_use_id"`
	Content   AnthropicBlocks `json:"content"`
	IsError   bool            `json:"is_error"`
	// image
	Source *struct {
		Type      string `json:"type"` // base64 or url
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
}

// imageURL is an image block's source as a URL: a data URL for a base64
// source, the URL of a url source (for ImageReader to fetch or refuse).
func (b AnthropicBlock) imageURL(i int) (string, error) {
	switch {
	case b.Source == nil:
		return "", paramError("messages", `messages[%d]: an "image" block needs its source`, i)
	case b.Source.Type == "base64":
		return "data:" + b.Source.MediaType + ";base64," + b.Source.Data, nil
	case b.Source.Type == "url":
		return b.Source.URL, nil
	}
	return "", paramError("messages", "messages[%d]: an image source of type %q; sources are base64 or url", i, b.Source.Type)
}

// AnthropicTool is a tool of the request: a custom tool's name,
// description and input_schema.
type AnthropicTool struct {
	Type        string          `json:"type"` // "custom" or none; others are Anthropic's server tools
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// AnthropicToolChoice is tool_choice: auto, any (a call is required),
// tool (this one) or none.
type AnthropicToolChoice struct {
	Type                   string `json:"type"` // auto, any, tool or none
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// AnthropicThinking is the request's thinking: whether the model reasons
// before it answers.
type AnthropicThinking struct {
	Type         string `json:"type"` // enabled, disabled or adaptive
	BudgetTokens *int   `json:"budget_tokens"`
}

// Request is the engine request of max_tokens, the sampling fields and
// stop_sequences, checked as Anthropic checks them (temperature is
// between 0 and 1; a stop sequence is not empty) and then as every
// dialect's are (Params.Request). ctxLen is the model's context, which
// bounds max_tokens.
func (body *AnthropicRequest) Request(ctxLen int) (runtime.Request, error) {
	if body.MaxTokens == nil {
		return runtime.Request{}, paramError("max_tokens", "max_tokens is required")
	}
	if t := body.Temperature; t != nil && !(*t >= 0 && *t <= 1) {
		return runtime.Request{}, paramError("temperature", "temperature must be between 0 and 1, not %g", *t)
	}
	for i, stop := range body.StopSequences {
		if stop == "" {
			return runtime.Request{}, paramError("stop_sequences", "stop_sequences[%d] is empty", i)
		}
	}
	sp := Sampling{MaxTokens: body.MaxTokens, Temperature: body.Temperature, TopP: body.TopP, TopK: body.TopK}
	p := sp.Params()
	p.Stop = body.StopSequences
	req, _, err := p.Request(Limits{DefaultMax: ctxLen, LeastMax: 1, MaxStop: maxStopSequences, Names: map[string]string{"stop": "stop_sequences"}})
	return req, err
}

// ChatMessages are the system prompt and the turns as the chat template
// takes them. Consecutive turns of one role are one turn, as Anthropic
// combines them. A user turn's tool_result blocks become tool messages
// (before its text, which must follow them, as Anthropic requires); an
// assistant turn's thinking becomes its reasoning and its tool_use blocks
// its tool calls. The last turn must be the user's: a prefilled
// assistant turn would need the template to leave it open. A user turn's
// image blocks are runtime.ImageMarker in its text, their sources (as data
// URLs) in images, in order.
func (body *AnthropicRequest) ChatMessages() (out []chat.Message, images []string, err error) {
	sys, err := textOf(body.System, "system")
	if err != nil {
		return nil, nil, err
	}
	if sys != "" {
		out = append(out, chat.Message{Role: "system", Content: sys})
	}
	turns := body.Messages
	if len(turns) == 0 {
		return nil, nil, paramError("messages", "messages must hold at least one message")
	}
	for i := 0; i < len(turns); {
		role := turns[i].Role
		var blocks AnthropicBlocks
		j := i
		for ; j < len(turns) && turns[j].Role == role; j++ {
			blocks = append(blocks, turns[j].Content...)
		}
		if len(blocks) == 0 {
			return nil, nil, paramError("messages", "messages[%d] has no content", i)
		}
		var msgs []chat.Message
		var err error
		switch role {
		case "user":
			msgs, err = userTurn(i, blocks, &images)
		case "assistant":
			if j == len(turns) {
				return nil, nil, paramError("messages", "the last message is the assistant's: continuing a prefilled reply is not supported; end with a user message")
			}
			msgs, err = assistantTurn(i, blocks)
		default:
			return nil, nil, paramError("messages", "messages[%d] has role %q; roles are user and assistant (the system prompt is the system field)", i, role)
		}
		if err != nil {
			return nil, nil, err
		}
		out = append(out, msgs...)
		i = j
	}
	return out, images, nil
}

// userTurn is the messages of a user's turn, which starts at messages[i]:
// its tool results, then its text. A result marked is_error says so, as
// a template has no other way to. Image blocks join the text as
// runtime.ImageMarker, their sources appended to images.
func userTurn(i int, blocks AnthropicBlocks, images *[]string) ([]chat.Message, error) {
	var out []chat.Message
	var text []string
	for _, b := range blocks {
		switch b.Type {
		case "image":
			u, err := b.imageURL(i)
			if err != nil {
				return nil, err
			}
			text = append(text, runtime.ImageMarker)
			*images = append(*images, u)
		case "text":
			if b.Text == nil {
				return nil, paramError("messages", `messages[%d]: a "text" block needs its text`, i)
			}
			text = append(text, *b.Text)
		case "tool_result":
			if len(text) > 0 {
				return nil, paramError("messages", "messages[%d]: tool_result blocks must come before any text in a user turn", i)
			}
			if b.ToolUseID == "" {
				return nil, paramError("messages", "messages[%d]: a tool_result block needs the tool_use_id of the call it answers", i)
			}
			result, err := textOf(b.Content, "messages")
			if err != nil {
				return nil, err
			}
			if b.IsError {
				result = "Error: " + result
			}
			out = append(out, chat.Message{Role: "tool", Content: result, ToolCallID: b.ToolUseID})
		case "thinking", "redacted_thinking", "tool_use":
			return nil, paramError("messages", "messages[%d]: %s blocks belong in assistant turns", i, b.Type)
		default:
			return nil, unsupportedBlock("messages", b.Type)
		}
	}
	if len(text) > 0 {
		out = append(out, chat.Message{Role: "user", Content: strings.Join(text, "\n")})
	}
	return out, nil
}

// assistantTurn is the message of an assistant's turn, which starts at
// messages[i]. Redacted thinking is Anthropic's models' own encrypted
// reasoning, which no other model can read: it is left out.
func assistantTurn(i int, blocks AnthropicBlocks) ([]chat.Message, error) {
	msg := chat.Message{Role: "assistant"}
	var text, thinking []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, paramError("messages", `messages[%d]: a "text" block needs its text`, i)
			}
			text = append(text, *b.Text)
		case "thinking":
			if b.Thinking == nil {
				return nil, paramError("messages", `messages[%d]: a "thinking" block needs its thinking`, i)
			}
			thinking = append(thinking, *b.Thinking)
		case "redacted_thinking":
		case "tool_use":
			if b.ID == "" || !toolName.MatchString(b.Name) {
				return nil, paramError("messages", "messages[%d]: a tool_use block needs an id and the name of a tool", i)
			}
			var args map[string]any
			if len(b.Input) > 0 && !isNull(b.Input) {
				if err := json.Unmarshal(b.Input, &args); err != nil {
					return nil, paramError("messages", "messages[%d]: the input of tool_use %q must be a JSON object", i, b.ID)
				}
			}
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "tool_result":
			return nil, paramError("messages", "messages[%d]: tool_result blocks belong in user turns", i)
		default:
			return nil, unsupportedBlock("messages", b.Type)
		}
	}
	msg.Content, msg.Reasoning = strings.Join(text, "\n"), strings.Join(thinking, "\n")
	return []chat.Message{msg}, nil
}

// textOf is the text of content that may hold text blocks only (the
// system prompt, a tool's result), one block a line.
func textOf(blocks AnthropicBlocks, param string) (string, error) {
	var text []string
	for _, b := range blocks {
		if b.Type != "text" {
			return "", unsupportedBlock(param, b.Type)
		}
		if b.Text == nil {
			return "", paramError(param, `a "text" block needs its text`)
		}
		text = append(text, *b.Text)
	}
	return strings.Join(text, "\n"), nil
}

func unsupportedBlock(param, kind string) error {
	switch kind {
	case "image":
		return paramError(param, "image blocks go in user turns' content")
	case "document", "search_result":
		return paramError(param, "content blocks of type %q are not supported: this server's models take text and images", kind)
	case "":
		return paramError(param, "a content block needs a type")
	}
	return paramError(param, "content blocks of type %q are not supported here", kind)
}

// ChatTools are the request's tools and tool_choice in Chat Completions'
// terms, for toolSetup: any is required, tool names a function, and
// disable_parallel_tool_use turns parallel calls off.
func (body *AnthropicRequest) ChatTools() (tools []Tool, choice json.RawMessage, parallel bool, err error) {
	for i, t := range body.Tools {
		if t.Type != "" && t.Type != "custom" {
			return nil, nil, false, paramError("tools", "tools[%d] is of type %q, one of Anthropic's server tools, which this server does not run; give custom tools: {name, description, input_schema}", i, t.Type)
		}
		if !toolName.MatchString(t.Name) {
			return nil, nil, false, paramError("tools", "tools[%d]: a tool's name must be 1 to 64 letters, digits, _ and -", i)
		}
		var schema struct {
			Type string `json:"type"`
		}
		if len(t.InputSchema) == 0 || json.Unmarshal(t.InputSchema, &schema) != nil || schema.Type != "object" {
			return nil, nil, false, paramError("tools", `tools[%d]: input_schema must be a JSON Schema of {"type": "object"}`, i)
		}
		var f Tool
		f.Type, f.Function.Name, f.Function.Description, f.Function.Parameters = "function", t.Name, t.Description, t.InputSchema
		tools = append(tools, f)
	}
	parallel = true
	tc := body.ToolChoice
	if tc == nil {
		return tools, nil, parallel, nil
	}
	parallel = !tc.DisableParallelToolUse
	switch tc.Type {
	case "auto":
		choice = json.RawMessage(`"auto"`)
	case "any":
		choice = json.RawMessage(`"required"`)
	case "none":
		choice = json.RawMessage(`"none"`)
	case "tool":
		if tc.Name == "" {
			return nil, nil, false, paramError("tool_choice", `tool_choice of type "tool" needs the tool's name`)
		}
		choice, _ = json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
	default:
		return nil, nil, false, paramError("tool_choice", `tool_choice type %q is not one of "auto", "any", "tool" and "none"`, tc.Type)
	}
	if tc.Type != "none" && len(tools) == 0 {
		return nil, nil, false, paramError("tool_choice", "tool_choice %q needs tools", tc.Type)
	}
	if (tc.Type == "any" || tc.Type == "tool") && body.Thinking != nil && body.Thinking.Type != "disabled" {
		// As Anthropic: a reply that must start with a call has no room
		// for reasoning.
		return nil, nil, false, paramError("tool_choice", "thinking cannot be combined with tool_choice %q, which makes the reply a call from its first token", tc.Type)
	}
	return tools, choice, parallel, nil
}

// thinkingVars are the template variables that turn a model's reasoning
// on and off: Qwen3's (and GLM's) enable_thinking, DeepSeek V3.1's
// thinking. A template gets those it names.
var thinkingVars = []struct {
	name string
	re   *regexp.Regexp
}{
	{"enable_thinking", regexp.MustCompile(`\benable_thinking\b`)},
	{"thinking", regexp.MustCompile(`(^|[^.\w'"])thinking\s+is\s+defined`)},
}

// TemplateVars maps thinking and output_config.effort onto the template:
// thinking enabled (or adaptive) turns reasoning on where the template
// has a switch, disabled turns it off, absent leaves the template's
// default. budget_tokens is checked as Anthropic checks it but is not a
// cut-off: stopping a model's reasoning at a count would take writing the
// template's closing marker for it; max_tokens bounds reasoning and text
// together, as it does Anthropic's. effort reaches the template as
// reasoning_effort (gpt-oss's), xhigh and max as high.
func (body *AnthropicRequest) TemplateVars(r chat.Renderer) (map[string]any, error) {
	vars := map[string]any{}
	if th := body.Thinking; th != nil {
		on := true
		switch th.Type {
		case "enabled":
			b := th.BudgetTokens
			switch {
			case b == nil:
				return nil, paramError("thinking", "thinking of type enabled needs budget_tokens")
			case *b < 1024:
				return nil, paramError("thinking", "thinking.budget_tokens must be at least 1024, not %d", *b)
			case body.MaxTokens != nil && *b >= *body.MaxTokens:
				return nil, paramError("thinking", "thinking.budget_tokens (%d) must be less than max_tokens (%d)", *b, *body.MaxTokens)
			}
		case "adaptive":
		case "disabled":
			on = false
		default:
			return nil, paramError("thinking", `thinking type %q is not one of "enabled", "adaptive" and "disabled"`, th.Type)
		}
		if t, ok := r.(*chat.Template); ok {
			for _, v := range thinkingVars {
				if v.re.MatchString(t.Source()) {
					vars[v.name] = on
				}
			}
		}
	}
	effort := body.OutputConfig.Effort
	switch effort {
	case "", "low", "medium", "high":
	case "xhigh", "max":
		effort = "high"
	default:
		return nil, paramError("output_config", "output_config.effort %q is not one of low, medium, high, xhigh and max", effort)
	}
	return TemplateVars(vars, effort)
}

// Format is the grammar of output_config.format, Anthropic's structured
// output: a reply that is JSON of the schema.
func (body *AnthropicRequest) Format() (*grammar.Grammar, error) {
	f := body.OutputConfig.Format
	if f == nil {
		return nil, nil
	}
	if f.Type != "json_schema" || len(f.Schema) == 0 || isNull(f.Schema) {
		return nil, paramError("output_config", `output_config.format must be {"type": "json_schema", "schema": {...}}`)
	}
	g, err := grammar.Spec{Schema: f.Schema}.Compile()
	if err != nil {
		return nil, paramError("output_config", "output_config.format.schema: %v", err)
	}
	return g, nil
}
