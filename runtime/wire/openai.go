package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// The request bodies of OpenAI's Chat Completions and Completions, as
// far as Tessera implements them. Unknown fields are ignored, as OpenAI
// ignores them; a known field of the wrong type is a ParamError
// (JSONError). Optional numbers are pointers so that an absent field
// takes OpenAI's default rather than 0.

// Generation holds the fields chat and completions requests share (the
// Responses API's too): the model, streaming, the per-request adapters,
// and (Sampling) how to sample.
type Generation struct {
	Model string `json:"model"`
	Sampling
	Stream        bool          `json:"stream"`
	StreamOptions StreamOptions `json:"stream_options"`
	User          string        `json:"user"`
	LoRA          []LoRARef     `json:"lora"` // llama-server's per-request adapters
}

// StreamOptions is stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// LoRARef is an entry of a request's "lora" list, llama-server's
// per-request adapters: a loaded adapter of the model by name, or by id
// (llama-server's: its place among the model's adapters as /v1/models
// lists them), and its scale (default 1; 0 leaves it out, as llama-server
// does), which multiplies the scale the adapter was loaded with. Which
// adapters a name or id means is the server's to say (it knows what it
// loaded).
type LoRARef struct {
	ID    *int     `json:"id"`
	Name  string   `json:"name"`
	Scale *float64 `json:"scale"`
}

// Chat are a chat's conversation fields: the messages (with tool calls,
// tool results and reasoning), the tools and tool_choice, and the
// template's variables. The server's chat body embeds them, and the
// browser's API reads a {messages} input into them, so both take the same
// fields and refuse the same things.
type Chat struct {
	Messages   []Message       `json:"messages"`
	Tools      []Tool          `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
	// ParallelToolCalls lets a reply make several calls (default true).
	ParallelToolCalls *bool `json:"parallel_tool_calls"`
	// ChatTemplateKwargs are further variables of the chat template
	// (vLLM's and llama-server's: {"enable_thinking": false} for Qwen3).
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
	// ReasoningEffort is OpenAI's minimal to high, which reaches the
	// template as reasoning_effort (gpt-oss's).
	ReasoningEffort string `json:"reasoning_effort"`
}

// Read sets req's messages, images (read by imgs) and template
// variables from the chat.
func (c *Chat) Read(ctx context.Context, req *runtime.Request, imgs ImageReader) error {
	var err error
	if req.Messages, err = ChatMessages(c.Messages); err != nil {
		return err
	}
	if req.Images, err = Images(ctx, c.Messages, imgs); err != nil {
		return err
	}
	req.TemplateVars, err = TemplateVars(c.ChatTemplateKwargs, c.ReasoningEffort)
	return err
}

// Parallel is parallel_tool_calls, true by default.
func (c *Chat) Parallel() bool { return c.ParallelToolCalls == nil || *c.ParallelToolCalls }

// ChatTools reads the tools and tool_choice for a reply in format f
// (Tools).
func (c *Chat) ChatTools(f *chat.ReplyFormat) ([]any, runtime.ChatTools, error) {
	return Tools(c.Tools, c.ToolChoice, c.Parallel(), f)
}

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	Generation
	Chat
	Logprobs    bool `json:"logprobs"`
	TopLogprobs *int `json:"top_logprobs"`
	// Transcript asks for each choice's transcript (Tessera's).
	Transcript bool `json:"transcript"`
}

// Request reads all of the chat request but its tools (which need the
// model's reply format: ChatTools) and its adapters into an engine
// request and the number of samples: the sampling fields (defMax tokens
// when it gives none), the conversation (images read by imgs) and
// logprobs.
func (c *ChatRequest) Request(ctx context.Context, defMax int, imgs ImageReader) (runtime.Request, int, error) {
	req, n, err := c.Sampling.Request(defMax, 1)
	if err != nil {
		return req, n, err
	}
	if err := c.Chat.Read(ctx, &req, imgs); err != nil {
		return req, n, err
	}
	req.Logprobs = c.Logprobs
	req.TopLogprobs, err = ChatLogprobs(c.Logprobs, c.TopLogprobs)
	return req, n, err
}

// CompletionRequest is the body of POST /v1/completions.
type CompletionRequest struct {
	Generation
	Prompt   Prompts `json:"prompt"`
	Echo     bool    `json:"echo"`
	Logprobs *int    `json:"logprobs"`
	Suffix   *string `json:"suffix"`
	// Transcript asks for each choice's transcript (Tessera's).
	Transcript bool `json:"transcript"`
}

// Requests reads the completion request into one engine request a prompt
// (each to be sampled n times), checking every field: defMax tokens when
// it gives none (OpenAI's 16), and at most runtime.MaxSamples sequences in
// all.
func (c *CompletionRequest) Requests(defMax int) ([]runtime.Request, int, error) {
	base, n, err := c.Sampling.Request(defMax, 0)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case c.Prompt.Len() == 0:
		return nil, 0, paramError("prompt", "prompt is required")
	case c.Prompt.Len()*n > runtime.MaxSamples:
		return nil, 0, paramError("prompt", "%d prompts with n=%d make %d sequences; at most %d", c.Prompt.Len(), n, c.Prompt.Len()*n, runtime.MaxSamples)
	case c.Suffix != nil && *c.Suffix != "":
		return nil, 0, paramError("suffix", "suffix (fill in the middle) is not supported")
	}
	if base.Logprobs, base.TopLogprobs, err = CompletionLogprobs(c.Logprobs); err != nil {
		return nil, 0, err
	}
	var reqs []runtime.Request
	for _, t := range c.Prompt.Texts {
		req := base
		req.Prompt = t
		reqs = append(reqs, req)
	}
	for _, ids := range c.Prompt.IDs {
		req := base
		req.Tokens = ids
		reqs = append(reqs, req)
	}
	return reqs, n, nil
}

// Prompts is a completion's "prompt": a string, an array of strings, an
// array of token ids, or an array of arrays of token ids.
type Prompts struct {
	Texts []string
	IDs   [][]int32
}

func (p *Prompts) UnmarshalJSON(b []byte) error {
	*p = Prompts{}
	if isNull(b) {
		return nil
	}
	var one string
	if json.Unmarshal(b, &one) == nil {
		p.Texts = []string{one}
		return nil
	}
	var texts []string
	if json.Unmarshal(b, &texts) == nil && len(texts) > 0 {
		p.Texts = texts
		return nil
	}
	var ids []int32
	if json.Unmarshal(b, &ids) == nil && len(ids) > 0 {
		p.IDs = [][]int32{ids}
		return nil
	}
	var batch [][]int32
	if json.Unmarshal(b, &batch) == nil && len(batch) > 0 {
		p.IDs = batch
		return nil
	}
	return errors.New("prompt must be a string, an array of strings, an array of token ids or an array of arrays of token ids, and not empty")
}

// Len is the number of prompts.
func (p Prompts) Len() int { return len(p.Texts) + len(p.IDs) }

// isNull reports whether a JSON value is absent or null.
func isNull(b []byte) bool { return len(b) == 0 || string(bytes.TrimSpace(b)) == "null" }
