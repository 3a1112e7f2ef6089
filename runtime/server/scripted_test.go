package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/grammar"
	"github.com/tessera-llm/tessera/runtime/server"
)

// Scripted replies. A random model says nothing a test can expect, but
// constrained by a grammar of exactly one text it writes that text, token
// by token, through the real tokenizer, template and reply parser, as a
// trained model would: script(text) is that grammar, for a request's
// "grammar" field (Tessera's, beside tool_choice "auto").

// script is the GBNF of exactly text.
func script(text string) string { return "root ::= " + grammar.Quote(text) + "\n" }

// withScript sends a request's reply script as its grammar.
func withScript(text string) option.RequestOption { return option.WithJSONSet("grammar", script(text)) }

// qwen3Engine is a random model at a tiny Qwen3 shape with the real Qwen3
// tokenizer and chat template (Hermes tool calls, <think> reasoning).
func qwen3Engine(t *testing.T) *runtime.Engine { return qwen3EngineContext(t, 256) }

// qwen3EngineContext is qwen3Engine with a context of n tokens, for
// conversations of tools, calls and results.
func qwen3EngineContext(t *testing.T, n int) *runtime.Engine {
	t.Helper()
	return qwen3EngineWrapped(t, n, nil)
}

// qwen3EngineWrapped is qwen3EngineContext on a backend that wrap
// decorates (nil: none).
func qwen3EngineWrapped(t *testing.T, n int, wrap func(backend.Backend) backend.Backend) *runtime.Engine {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "tokenizers", "qwen3")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("shared tokenizers not found: %v", err)
	}
	shape, err := synth.Lookup("tiny-qwen3")
	if err != nil {
		t.Fatal(err)
	}
	shape.Config.Vocab, shape.Config.Context = 151936, max(n, shape.Config.Context)
	tok, err := synth.HFTokenizer(dir, "qwen2", shape.Config.Vocab)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := synth.WriteWith(&buf, shape, dtype.F16, 1, tok); err != nil {
		t.Fatal(err)
	}
	m, err := models.OpenReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "qwen3-chat.gguf")
	if err != nil {
		t.Fatal(err)
	}
	eng, err := runtime.LoadModel(m, runtime.Options{Device: "cpu", Context: n, Wrap: wrap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// reasoningOf is a message's (or delta's) reasoning_content, a field the
// SDK keeps among the extra ones.
func reasoningOf(raw string) string {
	var m struct {
		ReasoningContent string `json:"reasoning_content"`
	}
	json.Unmarshal([]byte(raw), &m)
	return m.ReasoningContent
}

// TestChatReasoning: a Qwen3 reply's <think> block comes back as
// reasoning_content, apart from the content, whole and streamed (the
// reasoning's deltas before the content's); chat_template_kwargs'
// enable_thinking false reaches the template, and the reply is content.
func TestChatReasoning(t *testing.T) {
	_, url := serve(t, qwen3Engine(t), server.Options{})
	c := client(url)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{Model: modelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Is it sunny?")}, MaxTokens: openai.Int(100)}
	const reply = "<think>\nThe user asks about the sun.\n</think>\n\nYes, it is."
	res, err := c.Chat.Completions.New(ctx, params, withScript(reply))
	if err != nil {
		t.Fatal(err)
	}
	msg := res.Choices[0].Message
	if got := reasoningOf(msg.RawJSON()); got != "The user asks about the sun." || msg.Content != "\n\nYes, it is." {
		t.Fatalf("reasoning %q, content %q", got, msg.Content)
	}
	stream := c.Chat.Completions.NewStreaming(ctx, params, withScript(reply))
	var reasoning, content strings.Builder
	order := ""
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			if r := reasoningOf(ch.Delta.RawJSON()); r != "" {
				reasoning.WriteString(r)
				if !strings.HasSuffix(order, "r") {
					order += "r"
				}
			}
			if ch.Delta.Content != "" {
				content.WriteString(ch.Delta.Content)
				if !strings.HasSuffix(order, "c") {
					order += "c"
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if reasoning.String() != "\nThe user asks about the sun.\n" || content.String() != "\n\nYes, it is." || order != "rc" {
		t.Errorf("streamed reasoning %q, content %q, in the order %q", reasoning.String(), content.String(), order)
	}
	// Thinking off: the template closes the reasoning in the prompt.
	res, err = c.Chat.Completions.New(ctx, params, withScript("Yes."), option.WithJSONSet("chat_template_kwargs", map[string]any{"enable_thinking": false}))
	if err != nil {
		t.Fatal(err)
	}
	if msg := res.Choices[0].Message; msg.Content != "Yes." || reasoningOf(msg.RawJSON()) != "" || res.Usage.PromptTokens <= 0 {
		t.Errorf("without thinking: content %q, reasoning %q", msg.Content, reasoningOf(msg.RawJSON()))
	}
	_, err = c.Chat.Completions.New(ctx, params, option.WithJSONSet("chat_template_kwargs", map[string]any{"messages": []any{}}))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "chat_template_kwargs" {
		t.Errorf("chat_template_kwargs replacing messages: %v", err)
	}
}

// TestChatStreamsToolCalls: a streamed call arrives as OpenAI's deltas as
// it is generated: its id and name first, then its arguments in several
// pieces, which add up to the arguments of the reply not streamed.
func TestChatStreamsToolCalls(t *testing.T) {
	_, url := serve(t, qwen3Engine(t), server.Options{})
	c := client(url)
	ctx := context.Background()
	var wp shared.FunctionParameters
	json.Unmarshal([]byte(weatherParams), &wp)
	params := openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(200),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools:    []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Parameters: wp})}}
	const reply = "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"
	res, err := c.Chat.Completions.New(ctx, params, withScript(reply))
	if err != nil {
		t.Fatal(err)
	}
	whole := res.Choices[0]
	if whole.FinishReason != "tool_calls" || len(whole.Message.ToolCalls) != 1 || whole.Message.ToolCalls[0].Function.Arguments != `{"city": "Paris", "unit": "celsius"}` ||
		whole.Message.Content != "" || reasoningOf(whole.Message.RawJSON()) != "I need the weather." {
		t.Fatalf("not streamed: %+v", whole)
	}
	stream := c.Chat.Completions.NewStreaming(ctx, params, withScript(reply))
	var acc openai.ChatCompletionAccumulator
	named, argChunks := false, 0
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		for _, ch := range chunk.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				switch {
				case tc.Function.Name != "":
					if named || argChunks > 0 || tc.ID == "" {
						t.Errorf("a call named twice, after its arguments or without an id: %+v", tc)
					}
					named = true
				case tc.Function.Arguments != "":
					argChunks++
				}
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	got := acc.Choices[0]
	if !named || argChunks < 2 || got.FinishReason != "tool_calls" || len(got.Message.ToolCalls) != 1 ||
		got.Message.ToolCalls[0].Function.Arguments != whole.Message.ToolCalls[0].Function.Arguments {
		t.Errorf("streamed: named %v, %d argument chunks, %+v", named, argChunks, got)
	}
}

// slowSteps is a backend whose every step takes at least d more: a
// generation that outlasts a timeout on any machine, however fast.
type slowSteps struct {
	backend.Backend
	d time.Duration
}

func (b slowSteps) Begin(batch backend.Batch) error {
	time.Sleep(b.d)
	return b.Backend.Begin(batch)
}

func (b slowSteps) Unwrap() backend.Backend { return b.Backend }
