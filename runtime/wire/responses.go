package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// OpenAI's Responses API (POST /v1/responses): its request, and its
// translation into Chat Completions' terms (the conversation's messages,
// the tools and tool_choice, text.format as response_format), which the
// server then runs as it runs a chat. What a request of Chat Completions
// names otherwise here (max_tokens, response_format, n) is refused with
// the name to use; Tessera's extensions of the other endpoints (seed,
// top_k, grammar, ...) are taken alike.

// ResponsesRequest is the body of POST /v1/responses. Its sampling
// fields (model, temperature, top_p, stream, user, and the extensions)
// are the other endpoints' (Generation).
type ResponsesRequest struct {
	Generation
	Input              ResponsesInput      `json:"input"`
	Instructions       *string             `json:"instructions"`
	Tools              []ResponsesTool     `json:"tools"`
	ToolChoice         json.RawMessage     `json:"tool_choice"`
	ParallelToolCalls  *bool               `json:"parallel_tool_calls"`
	Text               *ResponsesText      `json:"text"`
	MaxOutputTokens    *int                `json:"max_output_tokens"`
	Store              *bool               `json:"store"`
	PreviousResponseID string              `json:"previous_response_id"`
	Reasoning          *ResponsesReasoning `json:"reasoning"`
	Metadata           map[string]string   `json:"metadata"`
	Truncation         string              `json:"truncation"`
	Include            []string            `json:"include"`
	TopLogprobs        *int                `json:"top_logprobs"`
	// What Tessera does not do: run in the background, keep
	// conversations (beside responses), fill prompt templates.
	Background   bool            `json:"background"`
	Conversation json.RawMessage `json:"conversation"`
	Prompt       json.RawMessage `json:"prompt"`
	// ChatTemplateKwargs are further variables of the chat template, as
	// on Chat Completions.
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
}

// ResponsesTool is a tool in the Responses API's flat shape (its echo in
// the response, too).
type ResponsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
}

// ResponsesText is the request's "text": the format of the reply's text.
type ResponsesText struct {
	Format    *TextFormat `json:"format"`
	Verbosity string      `json:"verbosity,omitempty"`
}

// responseFormat is text.format: {"type": "text"}, {"type":
// "json_object"}, or {"type": "json_schema", "name", "schema", "strict"}.
type TextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ResponsesReasoning is the request's "reasoning". The effort reaches the
// template as reasoning_effort; summaries are not made (a reasoning item's
// summary is empty, its content the reasoning itself).
type ResponsesReasoning struct {
	Effort          *string `json:"effort"`
	Summary         *string `json:"summary"`
	GenerateSummary *string `json:"generate_summary"` // summary's older name
}

// ResponsesInput is "input": a string (one user message) or a list of
// items.
type ResponsesInput struct {
	Items []InputItem
}

// InputItem is an item of the input, the fields Tessera reads of every
// kind it takes: messages (type "message", or none), function_call,
// function_call_output and reasoning. A stored conversation is a list of
// them too, so that continuing a response and sending its items again
// make the same prompt.
type InputItem struct {
	Type      string          `json:"type,omitempty"`
	Role      string          `json:"role,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"` // a string or parts (messages), parts (reasoning)
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments *string         `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"` // a string or parts
}

func (in *ResponsesInput) UnmarshalJSON(b []byte) error {
	*in = ResponsesInput{}
	switch {
	case isNull(b):
		return nil
	case b[0] == '"':
		in.Items = []InputItem{{Type: "message", Role: "user", Content: bytes.Clone(b)}}
		return nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return paramError("input", "input must be a string or an array of input items")
	}
	in.Items = make([]InputItem, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &in.Items[i]); err != nil {
			var typeErr *json.UnmarshalTypeError
			if errors.As(err, &typeErr) && typeErr.Field != "" {
				return paramError("input", "input[%d].%s must be %s, not a JSON %s", i, typeErr.Field, typeName(typeErr.Type.String()), typeErr.Value)
			}
			return paramError("input", "input[%d] must be an input item (an object)", i)
		}
	}
	return nil
}

// ContentPart is a part of a message's content, a reasoning item's
// content, or a function call's output given as parts.
type ContentPart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	Refusal  *string `json:"refusal"`
	ImageURL *string `json:"image_url"` // input_image
}

// partsText is the text of content (a string, or parts of the types
// kinds), for the error messages of item i. With images not nil, an
// input_image part is runtime.ImageMarker in the text and its URL
// appended to images.
func partsText(content json.RawMessage, i int, images *[]string, kinds ...string) (string, error) {
	if isNull(content) {
		return "", nil
	}
	if content[0] == '"' {
		var s string
		err := json.Unmarshal(content, &s)
		return s, err
	}
	var parts []ContentPart
	if err := json.Unmarshal(content, &parts); err != nil {
		return "", paramError("input", "input[%d]'s content must be a string or an array of content parts", i)
	}
	var text strings.Builder
	for _, p := range parts {
		switch {
		case p.Type == "input_image" && images != nil:
			if p.ImageURL == nil {
				return "", paramError("input", "input[%d] has an input_image without its image_url (a data URL; file_id is not supported)", i)
			}
			text.WriteString(runtime.ImageMarker)
			*images = append(*images, *p.ImageURL)
		case p.Type == "input_image" || p.Type == "input_file" || p.Type == "input_audio":
			return "", paramError("input", "input[%d] has a content part of type %q: this server takes text and, in messages, images", i, p.Type)
		case p.Type == "refusal" && p.Refusal != nil && slices.Contains(kinds, "refusal"):
			text.WriteString(*p.Refusal)
		case !slices.Contains(kinds, p.Type):
			return "", paramError("input", "input[%d] has a content part of type %q; it takes parts of the types %s", i, p.Type, strings.Join(kinds, ", "))
		case p.Text == nil:
			return "", paramError("input", "input[%d] has a content part of type %q without its text", i, p.Type)
		default:
			text.WriteString(*p.Text)
		}
	}
	return text.String(), nil
}

// InputMessages turns input items into the chat template's messages. An
// assistant's turn is the run of its items as a reply makes them:
// reasoning, then a message, then function calls; the next reasoning or
// message, or a call's output, ends it. Reasoning items given back are
// the turn's reasoning (which templates such as Qwen3's render back for
// the latest turn); their summaries and encrypted content are not read.
// The messages' input_image parts' URLs come back in images, in order.
func InputMessages(items []InputItem) (out []chat.Message, images []string, err error) {
	turn := -1 // the assistant's message being gathered in out, -1 when none
	newTurn := func() { out, turn = append(out, chat.Message{Role: "assistant"}), len(out) }
	for i, it := range items {
		switch it.Type {
		case "message", "":
			text, err := partsText(it.Content, i, &images, "input_text", "output_text", "refusal")
			if err != nil {
				return nil, nil, err
			}
			switch it.Role {
			case "user", "system":
				out, turn = append(out, chat.Message{Role: it.Role, Content: text}), -1
			case "developer": // the newer name of system
				out, turn = append(out, chat.Message{Role: "system", Content: text}), -1
			case "assistant":
				if turn < 0 || out[turn].Content != "" || len(out[turn].ToolCalls) > 0 {
					newTurn()
				}
				out[turn].Content = text
			default:
				return nil, nil, paramError("input", "input[%d] is a message of role %q; roles are user, system, developer and assistant", i, it.Role)
			}
		case "reasoning":
			text, err := partsText(it.Content, i, nil, "reasoning_text")
			if err != nil {
				return nil, nil, err
			}
			if turn < 0 || out[turn].Reasoning != "" || out[turn].Content != "" || len(out[turn].ToolCalls) > 0 {
				newTurn()
			}
			out[turn].Reasoning = text
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, nil, paramError("input", "input[%d], a function_call, needs its call_id and name", i)
			}
			var args map[string]any
			if it.Arguments != nil && strings.TrimSpace(*it.Arguments) != "" {
				if err := json.Unmarshal([]byte(*it.Arguments), &args); err != nil || args == nil {
					return nil, nil, paramError("input", "input[%d], a function_call: arguments must be a JSON object, as text", i)
				}
			}
			if turn < 0 {
				newTurn()
			}
			out[turn].ToolCalls = append(out[turn].ToolCalls, chat.ToolCall{ID: it.CallID, Name: it.Name, Arguments: args})
		case "function_call_output":
			if it.CallID == "" {
				return nil, nil, paramError("input", "input[%d], a function_call_output, needs the call_id of its call", i)
			}
			text, err := partsText(it.Output, i, nil, "input_text", "output_text")
			if err != nil {
				return nil, nil, err
			}
			out, turn = append(out, chat.Message{Role: "tool", ToolCallID: it.CallID, Content: text}), -1
		case "item_reference":
			return nil, nil, paramError("input", "input[%d] is an item_reference: this server keeps responses, not items; send the item itself, or continue with previous_response_id", i)
		default:
			return nil, nil, paramError("input", "input[%d] has type %q; this server takes message, function_call, function_call_output and reasoning items", i, it.Type)
		}
	}
	return out, images, nil
}

// includable are the values of "include" the API has. Tessera makes none
// of the items they concern, and keeps reasoning unencrypted in the
// output, so each asks for nothing more, but logprobs, which it does not
// give.
var includable = []string{"file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
	"message.input_image.image_url", "computer_call_output.output.image_url", "code_interpreter_call.outputs",
	"reasoning.encrypted_content"}

var reasoningEfforts = []string{"minimal", "low", "medium", "high"}

// Check refuses what the request asks that Tessera does not do, and
// Chat Completions' names for fields the Responses API names otherwise.
func (b *ResponsesRequest) Check() error {
	switch {
	case b.MaxTokens != nil || b.MaxCompletionTokens != nil:
		p := "max_tokens"
		if b.MaxTokens == nil {
			p = "max_completion_tokens"
		}
		return paramError(p, "%s is Chat Completions'; the Responses API takes max_output_tokens", p)
	case b.ResponseFormat != nil:
		return paramError("response_format", "response_format is Chat Completions'; the Responses API takes text.format")
	case b.N != nil && *b.N != 1:
		return paramError("n", "the Responses API makes one response per request, not %d", *b.N)
	case b.MaxOutputTokens != nil && *b.MaxOutputTokens < 1:
		return paramError("max_output_tokens", "max_output_tokens must be at least 1, not %d", *b.MaxOutputTokens)
	case b.Background:
		return paramError("background", "this server does not run responses in the background: send the request with background false, streamed if it is long")
	case !isNull(b.Conversation):
		return paramError("conversation", "this server keeps no conversations: continue one with previous_response_id, or send it as input")
	case !isNull(b.Prompt):
		return paramError("prompt", "this server has no prompt templates: send the prompt as instructions and input")
	case b.TopLogprobs != nil && *b.TopLogprobs != 0:
		return paramError("top_logprobs", "this server gives no logprobs on the Responses API (Chat Completions has them)")
	case b.Truncation == "auto":
		return paramError("truncation", `truncation "auto" is not supported: a conversation that does not fit the model's context is refused; drop its oldest items yourself`)
	case b.Truncation != "" && b.Truncation != "disabled":
		return paramError("truncation", `truncation must be "disabled" (or "auto", which this server does not do), not %q`, b.Truncation)
	case len(b.Metadata) > 16:
		return paramError("metadata", "metadata holds at most 16 keys, not %d", len(b.Metadata))
	}
	for k, v := range b.Metadata {
		if len(k) > 64 || len(v) > 512 {
			return paramError("metadata", "metadata's keys are at most 64 characters long and its values 512")
		}
	}
	for _, inc := range b.Include {
		if inc == "message.output_text.logprobs" {
			return paramError("include", "this server gives no logprobs on the Responses API (Chat Completions has them)")
		}
		if !slices.Contains(includable, inc) {
			return paramError("include", "include %q is not one of %s", inc, strings.Join(includable, ", "))
		}
	}
	if r := b.Reasoning; r != nil {
		if r.Effort != nil && !slices.Contains(reasoningEfforts, *r.Effort) {
			return paramError("reasoning.effort", "reasoning.effort %q is not one of %s", *r.Effort, strings.Join(reasoningEfforts, ", "))
		}
		for _, s := range []*string{r.Summary, r.GenerateSummary} {
			if s != nil && *s != "auto" && *s != "concise" && *s != "detailed" {
				return paramError("reasoning.summary", "reasoning.summary %q is not one of auto, concise and detailed", *s)
			}
		}
	}
	if t := b.Text; t != nil {
		if v := t.Verbosity; v != "" && v != "low" && v != "medium" && v != "high" {
			return paramError("text.verbosity", "text.verbosity %q is not one of low, medium and high", v)
		}
		if f := t.Format; f != nil {
			switch f.Type {
			case "text", "json_object":
			case "json_schema":
				if isNull(f.Schema) {
					return paramError("text.format", `text.format of type "json_schema" needs a schema`)
				}
			default:
				return paramError("text.format", "text.format's type %q is not one of text, json_object and json_schema", f.Type)
			}
		}
	}
	return nil
}

// Format is text.format as Chat Completions' response_format.
func (b *ResponsesRequest) Format() *ResponseFormat {
	if b.Text == nil || b.Text.Format == nil || b.Text.Format.Type == "text" {
		return nil
	}
	f := b.Text.Format
	rf := &ResponseFormat{Type: f.Type}
	if f.Type == "json_schema" {
		rf.JSONSchema = &JSONSchema{Name: f.Name, Schema: f.Schema, Strict: f.Strict}
	}
	return rf
}

// ChatTools turns the tools and tool_choice into Chat Completions' shapes,
// which toolSetup reads. Only function tools are run: the hosted ones
// (web search, file search, computer use, ...) are OpenAI's.
func (b *ResponsesRequest) ChatTools() ([]Tool, json.RawMessage, error) {
	var tools []Tool
	for i, t := range b.Tools {
		if t.Type != "function" {
			return nil, nil, paramError("tools", "tools[%d] has type %q: this server calls function tools only, and runs no hosted tools", i, t.Type)
		}
		if !toolName.MatchString(t.Name) {
			return nil, nil, paramError("tools", `tools[%d] must be {"type": "function", "name": ...} with a name of 1 to 64 letters, digits, _ and -`, i)
		}
		var c Tool
		c.Type = "function"
		c.Function.Name, c.Function.Description, c.Function.Parameters = t.Name, t.Description, t.Parameters
		tools = append(tools, c)
	}
	raw := b.ToolChoice
	if isNull(raw) || raw[0] == '"' {
		return tools, raw, nil // "none", "auto" and "required" read alike
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Type != "function" || named.Name == "" {
		return nil, nil, paramError("tool_choice", `tool_choice must be "none", "auto", "required" or {"type": "function", "name": ...}; this server runs no hosted tools and no allowed_tools lists`)
	}
	choice, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": named.Name}})
	return tools, choice, nil
}

// ForcesTools reports whether tool_choice requires a call.
func (b *ResponsesRequest) ForcesTools() bool {
	var s string
	return !isNull(b.ToolChoice) && (json.Unmarshal(b.ToolChoice, &s) != nil || s == "required")
}

// Parallel is parallel_tool_calls, true by default.
func (b *ResponsesRequest) Parallel() bool { return b.ParallelToolCalls == nil || *b.ParallelToolCalls }
