package server

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// The request and response bodies of OpenAI's API, as far as Tessera
// implements it. Unknown fields are ignored, as OpenAI ignores them;
// a known field of the wrong type is an error. Optional numbers are
// pointers so that an absent field takes OpenAI's default rather than 0.

// sampling holds the fields chat and completions requests share: the
// model, streaming, and (wire.Sampling, which the browser's
// JavaScript API reads too) how to sample.
type sampling struct {
	Model string `json:"model"`
	wire.Sampling
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	User          string        `json:"user"`
	LoRA          []loraRef     `json:"lora"` // llama-server's per-request adapters
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	sampling
	Messages    []chatMessage   `json:"messages"`
	Logprobs    bool            `json:"logprobs"`
	TopLogprobs *int            `json:"top_logprobs"`
	Tools       []tool          `json:"tools"`
	ToolChoice  json.RawMessage `json:"tool_choice"`
	// ParallelToolCalls lets a reply make several calls (default true).
	ParallelToolCalls *bool `json:"parallel_tool_calls"`
	// ChatTemplateKwargs are further variables of the chat template
	// (vLLM's and llama-server's: {"enable_thinking": false} for Qwen3).
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs"`
	// ReasoningEffort is OpenAI's low, medium or high, which reaches the
	// template as reasoning_effort (gpt-oss's).
	ReasoningEffort string `json:"reasoning_effort"`
	// Transcript asks for each choice's transcript (Tessera's).
	Transcript bool `json:"transcript"`
}

// The Chat Completions request's messages and tools are wire's, which
// the browser's JavaScript API reads too.
type (
	chatMessage = wire.Message
	textContent = wire.Content
	tool        = wire.Tool
	toolCall    = wire.ToolCall
)

// completionRequest is POST /v1/completions.
type completionRequest struct {
	sampling
	Prompt   prompts `json:"prompt"`
	Echo     bool    `json:"echo"`
	Logprobs *int    `json:"logprobs"`
	Suffix   *string `json:"suffix"`
	// Transcript asks for each choice's transcript (Tessera's).
	Transcript bool `json:"transcript"`
}

// textContent is a message's "content": a string, or an array of content
// parts of which Tessera takes the text ones.
// prompts is a completion's "prompt": a string, an array of strings, an
// array of token ids, or an array of arrays of token ids.
type prompts struct {
	Texts []string
	IDs   [][]int32
}

func (p *prompts) UnmarshalJSON(b []byte) error {
	*p = prompts{}
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

func (p prompts) len() int { return len(p.Texts) + len(p.IDs) }

func isNull(b []byte) bool { return len(b) == 0 || string(bytes.TrimSpace(b)) == "null" }

// usage counts a response's tokens.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Chat responses.

type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usage       `json:"usage"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatMessage  `json:"message,omitempty"`
	Delta        *chatDelta    `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
	// Transcript is Tessera's, with "transcript": true: the choice's
	// generation written down for `tessera replay`.
	Transcript *runtime.Transcript `json:"transcript,omitempty"`
}

type chatDelta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallDelta `json:"tool_calls,omitempty"`
}

// toolCallDelta is a piece of a streamed call: its first names it (id,
// type, name), the rest add to its arguments.
type toolCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
}

type tokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float32      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// Completion responses.

type completion struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint,omitempty"`
	Choices           []completionChoice `json:"choices"`
	Usage             *usage             `json:"usage"`
}

type completionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	Transcript   *runtime.Transcript `json:"transcript,omitempty"`
}

// completionLogprobs is the legacy completions format: parallel arrays.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float32           `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// Errors, in OpenAI's shape.

type errorBody struct {
	Error apiError `json:"error"`
}

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}
