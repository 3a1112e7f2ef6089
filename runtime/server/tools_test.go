package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tessera-llm/tessera/runtime/server"
)

// TestToolCallRoundTrip: with tool_choice required (and a named
// function) the reply is a call whose arguments fit the function's
// parameters, parsed into tool_calls; the call and its result go back in
// the next request, and tool_choice none gives plain text.
func TestToolCallRoundTrip(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{})
	c := client(url)
	ctx := context.Background()
	tools := []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Description: openai.String("Weather in a city"),
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{
				"city": map[string]any{"type": "string", "maxLength": 12},
				"unit": map[string]any{"enum": []string{"celsius", "fahrenheit"}}}, "required": []string{"city", "unit"}}}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time",
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string", "maxLength": 8}}, "required": []string{"zone"}}}),
	}
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the weather in Paris?")}
	for _, choice := range []openai.ChatCompletionToolChoiceOptionUnionParam{
		{OfAuto: openai.String("required")},
		openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}),
	} {
		res, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: modelName, Messages: msgs, Tools: tools, ToolChoice: choice,
			MaxTokens: openai.Int(200), Temperature: openai.Float(1), Seed: openai.Int(3), N: openai.Int(3),
			ParallelToolCalls: openai.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range res.Choices {
			calls := ch.Message.ToolCalls
			if ch.FinishReason != "tool_calls" || len(calls) == 0 {
				t.Fatalf("choice %d: finish %q, calls %+v, content %q", ch.Index, ch.FinishReason, calls, ch.Message.Content)
			}
			for _, call := range calls {
				var args map[string]any
				if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
					t.Fatalf("arguments %q: %v", call.Function.Arguments, err)
				}
				switch call.Function.Name {
				case "get_weather":
					if _, ok := args["city"].(string); !ok || (args["unit"] != "celsius" && args["unit"] != "fahrenheit") {
						t.Errorf("get_weather arguments %v", args)
					}
				case "get_time":
					if choice.OfFunctionToolChoice != nil {
						t.Errorf("named choice called %s", call.Function.Name)
					}
				default:
					t.Errorf("unknown function %q", call.Function.Name)
				}
				if call.ID == "" {
					t.Error("a call without an id")
				}
			}
		}
		// Streamed, the same calls arrive in deltas.
		stream := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: modelName, Messages: msgs, Tools: tools, ToolChoice: choice,
			MaxTokens: openai.Int(200), Temperature: openai.Float(1), Seed: openai.Int(3), ParallelToolCalls: openai.Bool(false)})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" || len(acc.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("streamed %+v", acc.Choices)
		}
		got, want := acc.Choices[0].Message.ToolCalls[0].Function, res.Choices[0].Message.ToolCalls[0].Function
		if got.Name != want.Name || got.Arguments != want.Arguments {
			t.Errorf("streamed call %s(%s), not %s(%s)", got.Name, got.Arguments, want.Name, want.Arguments)
		}
		// The round trip: the call, its result, then a reply in text.
		call := res.Choices[0].Message.ToolCalls[0]
		next := append(msgs, res.Choices[0].Message.ToParam(), openai.ToolMessage(`{"temperature": 21}`, call.ID))
		res2, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: modelName, Messages: next, Tools: tools,
			ToolChoice: openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}, MaxTokens: openai.Int(20), Temperature: openai.Float(0)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res2.Choices[0].Message.ToolCalls) != 0 || res2.Choices[0].Message.Content == "" {
			t.Errorf("tool_choice none: %+v", res2.Choices[0].Message)
		}
	}
	// Errors: a choice naming no tool, required without tools.
	for _, body := range []map[string]any{
		{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}}, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "g"}}},
		{"tool_choice": "required"},
		{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "bad name"}}}},
	} {
		body["model"], body["messages"] = modelName, []map[string]string{{"role": "user", "content": "hi"}}
		if code, resp, _ := post(t, url+"/v1/chat/completions", body); code != 400 {
			t.Errorf("%v: %d %v, want 400", body, code, resp)
		}
	}
}
