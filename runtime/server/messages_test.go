package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/grammar/grammartest"
	"github.com/tessera-llm/tessera/runtime/server"
)

// Anthropic's Messages API, driven by Anthropic's own Go SDK. Replies are
// scripted (server.Script: a grammar of exactly the reply's text) on a
// random model with Qwen3's real tokenizer and template, so that text,
// reasoning and calls go through the real tokens, template and parser.

// anthropicClient is Anthropic's SDK for the server at url, with no
// credential from the environment.
func anthropicClient(url string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(url + "/"),
		aoption.WithAPIKey("none"), aoption.WithMaxRetries(0)}, opts...)...)
}

// serveScripted is serve with a script of the server's replies.
func serveScripted(t *testing.T, eng *runtime.Engine, opts server.Options) (*server.Script, string) {
	t.Helper()
	s := server.New(opts)
	sc := server.NewScript(s)
	if err := s.Add(modelName, eng); err != nil {
		t.Fatal(err)
	}
	s.Ready()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return sc, ts.URL
}

// setScript sets the next replies, failing the test if one is no grammar.
func setScript(t *testing.T, sc *server.Script, replies ...string) {
	t.Helper()
	if err := sc.Set(replies...); err != nil {
		t.Fatal(err)
	}
}

func messagesContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func userText(text string) []anthropic.MessageParam {
	return []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}
}

// accumulateMessage reads a stream into a message with the SDK's accumulator.
func accumulateMessage(t *testing.T, stream interface {
	Next() bool
	Current() anthropic.MessageStreamEventUnion
	Err() error
}) anthropic.Message {
	t.Helper()
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	return acc
}

// messageBlocks is a message's content as comparable values: type, text or
// thinking, tool name and input (compacted: a streamed input comes as the
// model wrote it).
func messageBlocks(m anthropic.Message) [][4]string {
	var out [][4]string
	for _, b := range m.Content {
		var input bytes.Buffer
		json.Compact(&input, b.Input)
		out = append(out, [4]string{b.Type, b.Text + b.Thinking, b.Name, input.String()})
	}
	return out
}

// messagesEvent is an event of a stream as it travels: its SSE name and its
// data.
type messagesEvent struct {
	name string
	data map[string]any
}

// postMessagesEvents posts body to /v1/messages and reads its events.
func postMessagesEvents(t *testing.T, url, body string) []messagesEvent {
	t.Helper()
	resp, err := bounded.Post(url+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, %s", resp.StatusCode, ct)
	}
	var out []messagesEvent
	name := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		} else if d, ok := strings.CutPrefix(line, "data: "); ok {
			ev := messagesEvent{name: name}
			if err := json.Unmarshal([]byte(d), &ev.data); err != nil {
				t.Fatalf("event %s: %q is not JSON", name, d)
			}
			out = append(out, ev)
			name = ""
		}
	}
	return out
}

// TestMessagesText: a reply in text, whole and streamed (the SDK's stream
// through its accumulator), is one text block with Anthropic's fields,
// the same both ways; the stream's events are Anthropic's sequence, each
// named as its type; count_tokens counts the prompt the reply ran.
func TestMessagesText(t *testing.T) {
	sc, url := serveScripted(t, qwen3EngineContext(t, 1024), server.Options{})
	c, ctx := anthropicClient(url), messagesContext(t)
	setScript(t, sc, "Hello there, how are you?")
	params := anthropic.MessageNewParams{Model: modelName, MaxTokens: 100, Messages: userText("Hi!"),
		System: []anthropic.TextBlockParam{{Text: "Be brief."}}, Metadata: anthropic.MetadataParam{UserID: anthropic.String("u1")}}
	res, err := c.Messages.New(ctx, params, aoption.WithHeader("anthropic-version", "2023-06-01"))
	if err != nil {
		t.Fatal(err)
	}
	want := [][4]string{{"text", "Hello there, how are you?", "", ""}}
	if got := messageBlocks(*res); !reflect.DeepEqual(got, want) || res.StopReason != "end_turn" || res.Type != "message" || res.Role != "assistant" ||
		res.Model != modelName || !strings.HasPrefix(res.ID, "msg_") || res.Usage.InputTokens <= 0 || res.Usage.OutputTokens <= 0 {
		t.Fatalf("answer %s", res.RawJSON())
	}
	if !res.JSON.StopSequence.Valid() && !strings.Contains(res.RawJSON(), `"stop_sequence":null`) {
		t.Errorf("no stop_sequence in %s", res.RawJSON())
	}
	streamed := accumulateMessage(t, c.Messages.NewStreaming(ctx, params))
	// (A scripted text's tokens are the model's choice: their number
	// differs from one reply to the next.)
	if got := messageBlocks(streamed); !reflect.DeepEqual(got, want) || streamed.StopReason != "end_turn" ||
		streamed.Usage.InputTokens != res.Usage.InputTokens || streamed.Usage.OutputTokens <= 0 {
		t.Errorf("streamed %s, usage %+v; not streamed %+v", streamed.RawJSON(), streamed.Usage, res.Usage)
	}
	count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: modelName, Messages: params.Messages,
		System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: params.System}})
	if err != nil || count.InputTokens != res.Usage.InputTokens {
		t.Errorf("count_tokens %v (%v), the reply's input tokens %d", count, err, res.Usage.InputTokens)
	}
	// The events as they travel.
	events := postMessagesEvents(t, url, `{"model":"stories260K","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Hi!"}]}`)
	var names []string
	for i, ev := range events {
		names = append(names, ev.name)
		if ev.data["type"] != ev.name {
			t.Errorf("event %d named %q has type %v", i, ev.name, ev.data["type"])
		}
	}
	seq := strings.Join(names, " ")
	if !strings.HasPrefix(seq, "message_start content_block_start content_block_delta") || !strings.HasSuffix(seq, "content_block_delta content_block_stop message_delta message_stop") ||
		strings.Count(seq, "content_block_start") != 1 {
		t.Errorf("events %s", seq)
	}
	start, _ := events[0].data["message"].(map[string]any)
	if content, _ := start["content"].([]any); start["stop_reason"] != nil || content == nil || len(content) != 0 || start["usage"] == nil {
		t.Errorf("message_start %v", start)
	}
	if block := events[1].data["content_block"]; !reflect.DeepEqual(block, map[string]any{"type": "text", "text": ""}) || events[1].data["index"] != 0.0 {
		t.Errorf("content_block_start %v", events[1].data)
	}
	delta, _ := events[len(events)-2].data["delta"].(map[string]any)
	if delta["stop_reason"] != "end_turn" || delta["stop_sequence"] != nil {
		t.Errorf("message_delta %v", events[len(events)-2].data)
	}
}

// TestMessagesThinking: Qwen3's <think> block is a thinking block before
// the text block, whole and streamed (each block's events in turn);
// thinking disabled reaches the template (enable_thinking: it closes the
// reasoning in the prompt) and enabled is its default; budget_tokens is
// checked as Anthropic checks it.
func TestMessagesThinking(t *testing.T) {
	sc, url := serveScripted(t, qwen3EngineContext(t, 1024), server.Options{})
	c, ctx := anthropicClient(url), messagesContext(t)
	setScript(t, sc, "<think>\nThe user asks about the sun.\n</think>\n\nYes, it is.")
	params := anthropic.MessageNewParams{Model: modelName, MaxTokens: 2000, Messages: userText("Is it sunny?"),
		Thinking: anthropic.ThinkingConfigParamOfEnabled(1024)}
	res, err := c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	want := [][4]string{{"thinking", "The user asks about the sun.", "", ""}, {"text", "Yes, it is.", "", ""}}
	if got := messageBlocks(*res); !reflect.DeepEqual(got, want) || res.StopReason != "end_turn" {
		t.Fatalf("answer %s", res.RawJSON())
	}
	if res.Content[0].JSON.Signature.Valid() != true {
		t.Errorf("a thinking block without its signature: %s", res.RawJSON())
	}
	if got := messageBlocks(accumulateMessage(t, c.Messages.NewStreaming(ctx, params))); !reflect.DeepEqual(got, want) {
		t.Errorf("streamed %v", got)
	}
	events := postMessagesEvents(t, url, `{"max_tokens":2000,"stream":true,"messages":[{"role":"user","content":"Is it sunny?"}]}`)
	var seq []string
	for _, ev := range events {
		switch ev.name {
		case "content_block_start":
			seq = append(seq, ev.data["content_block"].(map[string]any)["type"].(string))
		case "content_block_delta":
			if d := ev.data["delta"].(map[string]any)["type"].(string); seq[len(seq)-1] != d {
				seq = append(seq, d)
			}
		case "content_block_stop":
			seq = append(seq, "stop")
		}
	}
	if got := strings.Join(seq, " "); got != "thinking thinking_delta stop text text_delta stop" {
		t.Errorf("blocks streamed as %s", got)
	}
	// The switch: disabled closes the reasoning in the prompt
	// ("<think>\n\n</think>\n\n"), enabled is the template's default.
	counts := map[string]int64{}
	for name, th := range map[string]anthropic.ThinkingConfigParamUnion{
		"default":  {},
		"enabled":  anthropic.ThinkingConfigParamOfEnabled(1024),
		"disabled": {OfDisabled: &anthropic.ThinkingConfigDisabledParam{}},
	} {
		n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: modelName, Messages: params.Messages, Thinking: th})
		if err != nil {
			t.Fatal(err)
		}
		counts[name] = n.InputTokens
	}
	if counts["enabled"] != counts["default"] || counts["disabled"] <= counts["default"] {
		t.Errorf("prompt tokens by thinking: %v", counts)
	}
	setScript(t, sc, "Yes.")
	params.Thinking = anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}
	if res, err := c.Messages.New(ctx, params); err != nil || !reflect.DeepEqual(messageBlocks(*res), [][4]string{{"text", "Yes.", "", ""}}) ||
		res.Usage.InputTokens != counts["disabled"] {
		t.Errorf("thinking disabled: %v %v", res, err)
	}
	for _, bad := range []anthropic.MessageNewParams{
		{Model: modelName, MaxTokens: 2000, Messages: params.Messages, Thinking: anthropic.ThinkingConfigParamOfEnabled(100)},
		{Model: modelName, MaxTokens: 1024, Messages: params.Messages, Thinking: anthropic.ThinkingConfigParamOfEnabled(1024)},
	} {
		_, err := c.Messages.New(ctx, bad)
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Type() != anthropic.ErrorTypeInvalidRequestError || !strings.Contains(apiErr.Message, "budget_tokens") {
			t.Errorf("budget %d with max_tokens %d: %v", bad.Thinking.OfEnabled.BudgetTokens, bad.MaxTokens, err)
		}
	}
}

// toolParam is a tool as Anthropic's tools take it: name and input_schema.
func toolParam(t *testing.T, name, schema string) anthropic.ToolUnionParam {
	t.Helper()
	var s anthropic.ToolInputSchemaParam
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name, Description: anthropic.String("a tool"), InputSchema: s}}
}

// TestMessagesToolLoop: a reply that reasons and calls a tool is a
// thinking block and a tool_use block (stop_reason tool_use), whole and
// streamed, the call's block starting with its name and an empty input
// whose JSON then comes in pieces; the call goes back (with its
// reasoning, which the template renders back) and its tool_result turn
// gets a reply in text.
func TestMessagesToolLoop(t *testing.T) {
	sc, url := serveScripted(t, qwen3EngineContext(t, 1024), server.Options{})
	c, ctx := anthropicClient(url), messagesContext(t)
	tools := []anthropic.ToolUnionParam{toolParam(t, "get_weather", weatherParams)}
	const call = "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"
	setScript(t, sc, call)
	params := anthropic.MessageNewParams{Model: modelName, MaxTokens: 300, Messages: userText("Weather in Paris?"), Tools: tools}
	res, err := c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	want := [][4]string{{"thinking", "I need the weather.", "", ""}, {"tool_use", "", "get_weather", `{"city":"Paris","unit":"celsius"}`}}
	if got := messageBlocks(*res); !reflect.DeepEqual(got, want) || res.StopReason != "tool_use" || !strings.HasPrefix(res.Content[1].ID, "toolu_") {
		t.Fatalf("answer %s", res.RawJSON())
	}
	stream := c.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	pieces := 0
	for stream.Next() {
		ev := stream.Current()
		switch {
		case ev.Type == "content_block_start" && ev.ContentBlock.Type == "tool_use":
			if input, _ := json.Marshal(ev.ContentBlock.Input); ev.ContentBlock.Name != "get_weather" || string(input) != "{}" || ev.ContentBlock.ID == "" {
				t.Errorf("the call's block starts as %s", ev.ContentBlock.RawJSON())
			}
		case ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta":
			pieces++
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := messageBlocks(acc); !reflect.DeepEqual(got, want) || acc.StopReason != "tool_use" || pieces < 2 {
		t.Errorf("streamed %v in %d pieces, %s", got, pieces, acc.StopReason)
	}
	// The second turn: the call, its result, and a reply in text.
	setScript(t, sc, "It is 21 degrees in Paris.")
	next := params
	next.Messages = append(append([]anthropic.MessageParam{}, params.Messages...), res.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(res.Content[1].ID, `{"temperature": 21}`, false)))
	res2, err := c.Messages.New(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if got := messageBlocks(*res2); !reflect.DeepEqual(got, [][4]string{{"text", "It is 21 degrees in Paris.", "", ""}}) || res2.StopReason != "end_turn" {
		t.Errorf("after the result: %s", res2.RawJSON())
	}
	// The count is of the prompt the turn ran, the call's reasoning
	// rendered back in it.
	count := func(msgs []anthropic.MessageParam) int64 {
		n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: modelName, Messages: msgs,
			Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: tools[0].OfTool}}})
		if err != nil {
			t.Fatal(err)
		}
		return n.InputTokens
	}
	without := append([]anthropic.MessageParam{}, next.Messages...)
	without[1] = anthropic.NewAssistantMessage(anthropic.NewToolUseBlock(res.Content[1].ID, map[string]any{"city": "Paris", "unit": "celsius"}, "get_weather"))
	if n, m := count(next.Messages), count(without); n != res2.Usage.InputTokens || m >= n {
		t.Errorf("count_tokens %d, without the reasoning %d; the reply's input tokens %d", n, m, res2.Usage.InputTokens)
	}
}

// TestMessagesForcedTools: tool_choice any and tool (one call, with
// disable_parallel_tool_use) make the reply calls whose inputs the
// independent validator accepts, whole and streamed alike, in Qwen3's
// format and in Mistral's (whose forced call starts after [TOOL_CALLS],
// prefilled in the prompt that count_tokens counts).
func TestMessagesForcedTools(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine func(*testing.T) *runtime.Engine
	}{
		{"qwen3", func(t *testing.T) *runtime.Engine { return qwen3EngineContext(t, 1024) }},
		{"mistral", mistralEngine},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, url := serve(t, tc.engine(t), server.Options{})
			c, ctx := anthropicClient(url), messagesContext(t)
			tools := []anthropic.ToolUnionParam{toolParam(t, "get_weather", weatherParams), toolParam(t, "get_time", timeParams)}
			validators := map[string]interface{ Validate(any) error }{
				"get_weather": grammartest.Validator(t, weatherParams),
				"get_time":    grammartest.Validator(t, timeParams),
			}
			for _, choice := range []anthropic.ToolChoiceUnionParam{
				{OfAny: &anthropic.ToolChoiceAnyParam{}},
				{OfTool: &anthropic.ToolChoiceToolParam{Name: "get_time", DisableParallelToolUse: anthropic.Bool(true)}},
			} {
				params := anthropic.MessageNewParams{Model: modelName, MaxTokens: 1500, Messages: userText("What is the weather in Paris?"),
					Tools: tools, ToolChoice: choice}
				// Greedy, so that whole and streamed agree. The SDK has
				// dropped temperature, which the API still takes.
				greedy := aoption.WithJSONSet("temperature", 0)
				res, err := c.Messages.New(ctx, params, greedy)
				if err != nil {
					t.Fatal(err)
				}
				if res.StopReason != "tool_use" || len(res.Content) == 0 || choice.OfTool != nil && len(res.Content) != 1 {
					t.Fatalf("tool_choice %s: %s", *choice.GetType(), res.RawJSON())
				}
				for _, b := range res.Content {
					v, ok := validators[b.Name]
					if b.Type != "tool_use" || !ok || choice.OfTool != nil && b.Name != "get_time" {
						t.Fatalf("block %s", b.RawJSON())
					}
					var input any
					if err := json.Unmarshal(b.Input, &input); err != nil {
						t.Fatal(err)
					}
					if err := v.Validate(input); err != nil {
						t.Errorf("%s input %s: %v", b.Name, b.Input, err)
					}
				}
				if got, want := messageBlocks(accumulateMessage(t, c.Messages.NewStreaming(ctx, params, greedy))), messageBlocks(*res); !reflect.DeepEqual(got, want) {
					t.Errorf("streamed %v, not streamed %v", got, want)
				}
				count, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: modelName, Messages: params.Messages,
					Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: tools[0].OfTool}, {OfTool: tools[1].OfTool}}, ToolChoice: choice})
				if err != nil || count.InputTokens != res.Usage.InputTokens {
					t.Errorf("count_tokens %v (%v), the reply's input tokens %d", count, err, res.Usage.InputTokens)
				}
			}
		})
	}
}

// TestMessagesStops: a stop sequence ends the reply before it, with
// stop_reason stop_sequence and the sequence; max_tokens ends it with
// max_tokens, whole and streamed.
func TestMessagesStops(t *testing.T) {
	sc, url := serveScripted(t, qwen3EngineContext(t, 1024), server.Options{})
	c, ctx := anthropicClient(url), messagesContext(t)
	setScript(t, sc, "The answer is 42, as everyone knows.")
	for _, tc := range []struct {
		params       anthropic.MessageNewParams
		text, reason string
		sequence     string
	}{
		{anthropic.MessageNewParams{Model: modelName, MaxTokens: 100, Messages: userText("Answer?"), StopSequences: []string{"everyone", "42"}},
			"The answer is", "stop_sequence", "42"},
		{anthropic.MessageNewParams{Model: modelName, MaxTokens: 3, Messages: userText("Answer?")}, "", "max_tokens", ""},
	} {
		res, err := c.Messages.New(ctx, tc.params)
		if err != nil {
			t.Fatal(err)
		}
		streamed := accumulateMessage(t, c.Messages.NewStreaming(ctx, tc.params))
		for _, m := range []anthropic.Message{*res, streamed} {
			if string(m.StopReason) != tc.reason || m.StopSequence != tc.sequence || len(m.Content) != 1 || tc.text != "" && m.Content[0].Text != tc.text {
				t.Errorf("%s", m.RawJSON())
			}
		}
		if tc.reason == "max_tokens" && (res.Usage.OutputTokens != 3 || !strings.HasPrefix("The answer is 42", res.Content[0].Text)) {
			t.Errorf("max_tokens 3: %s", res.RawJSON())
		}
	}
}

// anthropicErr decodes an error body in Anthropic's shape.
func anthropicErr(t *testing.T, raw string) (kind, msg string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(raw), &e); err != nil || e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" {
		t.Fatalf("not an Anthropic error: %q", raw)
	}
	return e.Error.Type, e.Error.Message
}

// TestMessagesErrors: what the server refuses, it refuses in Anthropic's
// shape with the matching status and type, saying why; the SDK reads it
// as its error type; a stream that fails once begun ends with an error
// event.
func TestMessagesErrors(t *testing.T) {
	eng := qwen3EngineContext(t, 1024)
	_, url := serveScripted(t, eng, server.Options{MaxBodyBytes: 4096})
	const hi = `"messages":[{"role":"user","content":"Hi"}]`
	for _, tc := range []struct {
		path, body string
		status     int
		kind, says string
	}{
		{"/v1/messages", `{` + hi + `}`, 400, "invalid_request_error", "max_tokens is required"},
		{"/v1/messages", `{"max_tokens":5,`, 400, "invalid_request_error", "not valid JSON"},
		{"/v1/messages", `{"model":"claude-x","max_tokens":5,` + hi + `}`, 404, "not_found_error", "does not exist"},
		{"/v1/messages", `{"max_tokens":5,"messages":[]}`, 400, "invalid_request_error", "at least one message"},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":5}]}`, 400, "invalid_request_error", "content must be"},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]}`, 400, "invalid_request_error", "bad image"},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}`, 400, "invalid_request_error", "not supported"},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"system","content":"x"}]}`, 400, "invalid_request_error", "roles are user and assistant"},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"The answer is ("}]}`, 400, "invalid_request_error", "prefilled"},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"t1","content":"1"}]}]}`, 400, "invalid_request_error", "before any text"},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","content":"1"}]}]}`, 400, "invalid_request_error", "tool_use_id"},
		{"/v1/messages", `{"max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":[1]}]},{"role":"user","content":"b"}]}`, 400, "invalid_request_error", "JSON object"},
		{"/v1/messages", `{"max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],` + hi + `}`, 400, "invalid_request_error", "server tools"},
		{"/v1/messages", `{"max_tokens":5,"tools":[{"name":"f"}],` + hi + `}`, 400, "invalid_request_error", "input_schema"},
		{"/v1/messages", `{"max_tokens":5,"tool_choice":{"type":"any"},` + hi + `}`, 400, "invalid_request_error", "needs tools"},
		{"/v1/messages", `{"max_tokens":5,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"g"},` + hi + `}`, 400, "invalid_request_error", "not among the tools"},
		{"/v1/messages", `{"max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":2000},"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},` + hi + `}`, 400, "invalid_request_error", "thinking cannot"},
		{"/v1/messages", `{"max_tokens":5,"temperature":1.5,` + hi + `}`, 400, "invalid_request_error", "between 0 and 1"},
		{"/v1/messages", `{"max_tokens":5,"stop_sequences":[""],` + hi + `}`, 400, "invalid_request_error", "empty"},
		{"/v1/messages", `{"max_tokens":5,"output_config":{"format":{"type":"json_schema","schema":{"$ref":"#/nowhere"}}},` + hi + `}`, 400, "invalid_request_error", "output_config"},
		{"/v1/messages", `{"max_tokens":5,` + hi + `,"system":"` + strings.Repeat("x", 5000) + `"}`, 413, "request_too_large", "larger than"},
		{"/v1/messages/count_tokens", `{"model":"claude-x",` + hi + `}`, 404, "not_found_error", "does not exist"},
		{"/v1/messages/count_tokens", `{"messages":[{"role":"user","content":[{"type":"image"}]}]}`, 400, "invalid_request_error", "needs its source"},
		{"/v1/messages/batches", `{}`, 404, "not_found_error", "no endpoint"},
	} {
		status, raw := postBounded(t, url+tc.path, tc.body)
		kind, msg := anthropicErr(t, raw)
		if status != tc.status || kind != tc.kind || !strings.Contains(msg, tc.says) {
			t.Errorf("POST %s %.80s: %d %s %q; want %d %s saying %q", tc.path, tc.body, status, kind, msg, tc.status, tc.kind, tc.says)
		}
	}
	// The SDK reads them as its errors.
	c, ctx := anthropicClient(url), messagesContext(t)
	_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 5, Messages: userText("Hi")})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type() != anthropic.ErrorTypeNotFoundError || !strings.Contains(apiErr.Message, "claude-x") {
		t.Errorf("unknown model: %v", err)
	}
	// A stream that outlives the request timeout ends with an error event
	// (its 900 steps take 9 s at least; its first token comes in far less
	// than the timeout, even on a loaded machine).
	slow := qwen3EngineWrapped(t, 1024, func(be backend.Backend) backend.Backend { return slowSteps{be, 10 * time.Millisecond} })
	sc, short := serveScripted(t, slow, server.Options{RequestTimeout: 3 * time.Second})
	setScript(t, sc, strings.Repeat("and on ", 400))
	cs := anthropicClient(short)
	stream := cs.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: modelName, MaxTokens: 900, Messages: userText("Go on.")})
	started := false
	for stream.Next() {
		started = started || stream.Current().Type == "message_start"
	}
	if err := stream.Err(); !started || !errors.As(err, &apiErr) || apiErr.Type() != anthropic.ErrorTypeTimeoutError {
		t.Errorf("a stream past the request timeout: started %v, %v", started, err)
	}
	// Loading: 503, overloaded_error, with Retry-After.
	loading := server.New(server.Options{})
	lurl := newHTTPServer(t, loading)
	resp, err := bounded.Post(lurl+"/v1/messages", "application/json", strings.NewReader(`{"max_tokens":5,`+hi+`}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if kind, _ := anthropicErr(t, string(raw)); resp.StatusCode != 503 || kind != "overloaded_error" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("while loading: %d %s", resp.StatusCode, raw)
	}
}

// TestMessagesAuth: with a key, the Messages API takes it as x-api-key
// (Anthropic's clients) or as a bearer token, and refuses a wrong one in
// Anthropic's shape; every endpoint takes x-api-key, and the others keep
// OpenAI's shape.
func TestMessagesAuth(t *testing.T) {
	sc, url := serveScripted(t, qwen3EngineContext(t, 1024), server.Options{APIKey: "sesame"})
	setScript(t, sc, "Yes.")
	ctx := messagesContext(t)
	params := anthropic.MessageNewParams{Model: modelName, MaxTokens: 10, Messages: userText("Hi")}
	noKey := []aoption.RequestOption{aoption.WithoutEnvironmentDefaults(), aoption.WithBaseURL(url + "/"), aoption.WithMaxRetries(0)}
	for name, opts := range map[string][]aoption.RequestOption{
		"x-api-key": append(noKey, aoption.WithHeader("x-api-key", "sesame")),
		"bearer":    append(noKey, aoption.WithAPIKey("sesame")),
	} {
		c := anthropic.NewClient(opts...)
		if res, err := c.Messages.New(ctx, params); err != nil || res.Content[0].Text != "Yes." {
			t.Errorf("%s: %v", name, err)
		}
	}
	wrong := anthropic.NewClient(append(noKey, aoption.WithHeader("x-api-key", "wrong"))...)
	_, err := wrong.Messages.New(ctx, params)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type() != anthropic.ErrorTypeAuthenticationError {
		t.Errorf("a wrong key: %v", err)
	}
	if code, _, _ := post(t, url+"/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "Hi"}}, "max_tokens": 2},
		"x-api-key", "sesame"); code != 200 {
		t.Errorf("chat with x-api-key: %d", code)
	}
	code, res, _ := post(t, url+"/v1/chat/completions", map[string]any{}, "x-api-key", "wrong")
	if e, _ := res["error"].(map[string]any); code != 401 || e["code"] != "invalid_api_key" || res["type"] != nil {
		t.Errorf("chat with a wrong key: %d %v", code, res)
	}
	if status, raw := postBounded(t, url+"/v1/messages/count_tokens", `{}`); status != 401 {
		t.Errorf("count_tokens without a key: %d %s", status, raw)
	} else if kind, _ := anthropicErr(t, raw); kind != "authentication_error" {
		t.Errorf("count_tokens without a key: %s", raw)
	}
}
