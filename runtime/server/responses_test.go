package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/grammar/grammartest"
	"github.com/tessera-llm/tessera/runtime/server"
)

// The Responses API, driven by the official client (openai-go's
// Responses service) against a real server. Replies are scripted as on
// Chat Completions (withScript: Tessera's grammar field, which the
// Responses API takes too) on a random model with Qwen3's real tokenizer
// and template; forced calls and structured output come from the
// server's own grammars, on stories260K.

func userInput(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

// rawField is a field of a JSON object, for those the SDK does not decode.
func rawField(raw, key string) any {
	var m map[string]any
	json.Unmarshal([]byte(raw), &m)
	return m[key]
}

// streamed is what a streamed response sent.
type streamed struct {
	types    []string // the events' types, in order
	terminal string   // the last event's type
	final    responses.Response
	// snapshot is the SDK's accumulator's output before the terminal
	// event: what the deltas added up to.
	snapshot responses.ResponseAccumulatorSnapshot
	events   []responses.ResponseStreamEventUnion
}

// readStream reads a stream to its end, checking what every event must
// be: numbered in order from 0, accepted by the SDK's accumulator, every
// delta within an item that was added and not yet done.
func readStream(t *testing.T, stream *ssestream.Stream[responses.ResponseStreamEventUnion]) streamed {
	t.Helper()
	var s streamed
	var acc responses.ResponseAccumulator
	open := map[string]bool{} // items added and not done
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != int64(len(s.events)) {
			t.Fatalf("event %d (%s) has sequence_number %d", len(s.events), ev.Type, ev.SequenceNumber)
		}
		s.events, s.types = append(s.events, ev), append(s.types, ev.Type)
		switch ev.Type {
		case "response.completed", "response.incomplete", "response.failed":
			s.snapshot, s.terminal, s.final = acc.Snapshot(), ev.Type, ev.Response
		case "response.output_item.added":
			open[ev.Item.ID] = true
		case "response.output_item.done":
			if !open[ev.Item.ID] {
				t.Errorf("item %s done without being added", ev.Item.ID)
			}
			delete(open, ev.Item.ID)
		case "response.output_text.delta", "response.reasoning_text.delta", "response.function_call_arguments.delta":
			if !open[ev.ItemID] || ev.Delta == "" {
				t.Errorf("%s %q for item %s, which is not being written", ev.Type, ev.Delta, ev.ItemID)
			}
		}
		var union responses.ResponsesServerEventUnion
		if err := json.Unmarshal([]byte(ev.RawJSON()), &union); err != nil {
			t.Fatalf("event %s: %v", ev.RawJSON(), err)
		}
		if err := acc.AddEvent(union); err != nil && ev.Type != "error" {
			t.Errorf("the SDK's accumulator refused %s: %v", ev.RawJSON(), err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if s.terminal == "" || s.types[len(s.types)-1] != s.terminal {
		t.Fatalf("the stream did not end with its response: %v", s.types)
	}
	return s
}

// kinds is the stream's event types, a run of one type as one.
func (s streamed) kinds() string {
	var out []string
	for _, k := range s.types {
		if len(out) == 0 || out[len(out)-1] != k {
			out = append(out, k)
		}
	}
	return strings.Join(out, " ")
}

// summary is a response's output in short: "reasoning: ...", "message:
// ...", "function_call NAME(ARGS)", each with its status.
func summary(r *responses.Response) []string {
	var out []string
	for _, it := range r.Output {
		switch it.Type {
		case "reasoning":
			var text string
			for _, c := range it.AsReasoning().Content {
				text += c.Text
			}
			out = append(out, fmt.Sprintf("reasoning (%s): %s", it.Status, text))
		case "message":
			var text string
			for _, c := range it.Content {
				text += c.Text
			}
			out = append(out, fmt.Sprintf("message (%s): %s", it.Status, text))
		case "function_call":
			fc := it.AsFunctionCall()
			out = append(out, fmt.Sprintf("function_call (%s) %s(%s)", fc.Status, fc.Name, fc.Arguments))
		default:
			out = append(out, it.Type)
		}
	}
	return out
}

// snapshotSummary is summary's form of what a stream's deltas added up to.
func snapshotSummary(s responses.ResponseAccumulatorSnapshot, final *responses.Response) []string {
	var out []string
	for i, it := range s.Output {
		status := final.Output[i].Status
		switch it.Type {
		case "message":
			out = append(out, fmt.Sprintf("message (%s): %s", status, it.Text[0]))
		case "function_call":
			out = append(out, fmt.Sprintf("function_call (%s) %s(%s)", status, it.Name, it.Arguments))
		default: // the accumulator leaves reasoning to the events
			out = append(out, summary(final)[i])
		}
	}
	return out
}

// TestResponsesText: a reply's reasoning and text come back as a
// reasoning item and a message (streamed: their events, in the
// Responses API's order, adding up to the same output), with the usage
// of the prompt Chat Completions makes of the same conversation.
func TestResponsesText(t *testing.T) {
	_, url := serve(t, qwen3Engine(t), server.Options{})
	c := client(url)
	ctx := context.Background()
	const reply = "<think>\nThe user asks about the sun.\n</think>\n\nYes, it is."
	want := []string{"reasoning (completed): The user asks about the sun.", "message (completed): Yes, it is."}
	params := responses.ResponseNewParams{Model: modelName, Input: userInput("Is it sunny?"), Instructions: openai.String("Be brief."), MaxOutputTokens: openai.Int(100)}
	res, err := c.Responses.New(ctx, params, withScript(reply))
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(res); !reflect.DeepEqual(got, want) || res.OutputText() != "Yes, it is." || res.Status != "completed" {
		t.Fatalf("output %q (%s), text %q", got, res.Status, res.OutputText())
	}
	if !strings.HasPrefix(res.ID, "resp_") || res.Object != "response" || res.Model != modelName || res.CreatedAt == 0 ||
		res.Instructions.OfString != "Be brief." || res.MaxOutputTokens != 100 || rawField(res.RawJSON(), "store") != true || res.IncompleteDetails.Reason != "" {
		t.Errorf("response fields: %s", res.RawJSON())
	}
	u := res.Usage
	if u.InputTokens <= 0 || u.OutputTokens <= 0 || u.TotalTokens != u.InputTokens+u.OutputTokens ||
		u.OutputTokensDetails.ReasoningTokens <= 0 || u.OutputTokensDetails.ReasoningTokens >= u.OutputTokens {
		t.Errorf("usage %+v", u)
	}
	// Chat Completions renders the same conversation into as many tokens.
	chatRes, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: modelName, MaxTokens: openai.Int(100),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Is it sunny?")}}, withScript(reply))
	if err != nil {
		t.Fatal(err)
	}
	if chatRes.Usage.PromptTokens != u.InputTokens {
		t.Errorf("%d input tokens; Chat Completions counts %d", u.InputTokens, chatRes.Usage.PromptTokens)
	}

	s := readStream(t, c.Responses.NewStreaming(ctx, params, withScript(reply)))
	wantKinds := "response.created response.in_progress " +
		"response.output_item.added response.content_part.added response.reasoning_text.delta response.reasoning_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.content_part.added response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " +
		"response.completed"
	if s.kinds() != wantKinds {
		t.Errorf("events\n%s\nwant\n%s", s.kinds(), wantKinds)
	}
	if got := summary(&s.final); !reflect.DeepEqual(got, want) || s.final.Usage.OutputTokens <= 0 {
		t.Errorf("streamed output %q, usage %+v", got, s.final.Usage)
	}
	if got := snapshotSummary(s.snapshot, &s.final); !reflect.DeepEqual(got, want) {
		t.Errorf("the deltas add up to %q", got)
	}
	// The reasoning's deltas add up to its text too.
	var reasoning string
	for _, ev := range s.events {
		if ev.Type == "response.reasoning_text.delta" {
			reasoning += ev.Delta
		}
	}
	if reasoning != "The user asks about the sun." {
		t.Errorf("reasoning deltas %q", reasoning)
	}
	if created := s.events[0].Response; created.Status != "in_progress" || created.ID != s.final.ID || len(created.Output) != 0 {
		t.Errorf("response.created: %s", created.RawJSON())
	}

	// Out of tokens: incomplete, the item being written too. Greedy: at
	// the default temperature the script's text is sampled among its
	// tokenizations ("<think>" whole or as "<th", "i", "n", "k", ">"), and
	// 6 tokens may end before the reasoning does.
	short := params
	short.MaxOutputTokens = openai.Int(6)
	short.Temperature = openai.Float(0)
	res, err = c.Responses.New(ctx, short, withScript(reply))
	if err != nil {
		t.Fatal(err)
	}
	got := summary(res)
	if res.Status != "incomplete" || res.IncompleteDetails.Reason != "max_output_tokens" || res.Usage.OutputTokens != 6 ||
		len(got) != 1 || !strings.HasPrefix(got[0], "reasoning (incomplete): ") || res.Usage.OutputTokensDetails.ReasoningTokens != 6 {
		t.Errorf("out of tokens: %s %+v, %q, %+v", res.Status, res.IncompleteDetails, got, res.Usage)
	}
	s = readStream(t, c.Responses.NewStreaming(ctx, short, withScript(reply)))
	if s.terminal != "response.incomplete" || s.final.Status != "incomplete" {
		t.Errorf("streamed out of tokens: %s, %s", s.terminal, s.final.Status)
	}
}

// TestResponsesToolLoop: a reply's call is a function_call item (streamed:
// added with its name before its arguments come, in pieces); its output
// goes back through previous_response_id, or with the whole conversation
// as input (the reasoning and the call given back), and both make the
// same prompt (the first's instructions not carried over) and get the
// reply in text.
func TestResponsesToolLoop(t *testing.T) {
	_, url := serve(t, qwen3Engine(t), server.Options{})
	c := client(url)
	ctx := context.Background()
	var wp map[string]any
	json.Unmarshal([]byte(weatherParams), &wp)
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", wp, true)}
	const call = "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"
	params := responses.ResponseNewParams{Model: modelName, Input: userInput("Weather in Paris?"), Tools: tools, MaxOutputTokens: openai.Int(200),
		Instructions: openai.String("Be brief.")}
	res, err := c.Responses.New(ctx, params, withScript(call))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"reasoning (completed): I need the weather.", `function_call (completed) get_weather({"city": "Paris", "unit": "celsius"})`}
	if got := summary(res); !reflect.DeepEqual(got, want) || res.OutputText() != "" {
		t.Fatalf("output %q", got)
	}
	fc := res.Output[1].AsFunctionCall()
	if !strings.HasPrefix(fc.ID, "fc_") || fc.CallID == "" || len(res.Tools) != 1 || res.Tools[0].Name != "get_weather" || res.ToolChoice.OfToolChoiceMode != "auto" {
		t.Errorf("call %s in %s", fc.RawJSON(), res.RawJSON())
	}

	s := readStream(t, c.Responses.NewStreaming(ctx, params, withScript(call)))
	if got := snapshotSummary(s.snapshot, &s.final); !reflect.DeepEqual(got, want) || !reflect.DeepEqual(summary(&s.final), want) {
		t.Fatalf("streamed %q, deltas %q", summary(&s.final), got)
	}
	named, pieces := false, 0
	for _, ev := range s.events {
		switch {
		case ev.Type == "response.output_item.added" && ev.Item.Type == "function_call":
			named = ev.Item.Name == "get_weather" && ev.Item.CallID != "" && pieces == 0
		case ev.Type == "response.function_call_arguments.delta":
			pieces++
		}
	}
	if !named || pieces < 2 {
		t.Errorf("the call was named first: %v; its arguments came in %d pieces", named, pieces)
	}

	// Its output, after the stored response.
	output := responses.ResponseInputItemParamOfFunctionCallOutput(`{"temperature": 21}`)
	output.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	const answer = "It is 21 degrees in Paris."
	next, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelName, PreviousResponseID: openai.String(res.ID), Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{output}}}, withScript(answer))
	if err != nil {
		t.Fatal(err)
	}
	if next.OutputText() != answer || next.PreviousResponseID != res.ID {
		t.Errorf("after the call: %q, previous %q", summary(next), next.PreviousResponseID)
	}
	// The same conversation as input: the user's message, the reasoning
	// and the call given back, and the output (and, as the instructions
	// of a previous response are not carried over, none).
	reasoning, funcCall := res.Output[0].AsReasoning().ToParam(), fc.ToParam()
	whole, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelName, Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
			{OfReasoning: &reasoning}, {OfFunctionCall: &funcCall}, output}}}, withScript(answer))
	if err != nil {
		t.Fatal(err)
	}
	if whole.OutputText() != answer || whole.Usage.InputTokens != next.Usage.InputTokens || next.Usage.InputTokens <= res.Usage.InputTokens {
		t.Errorf("the whole conversation: %q in %d tokens; continued: %d tokens, after %d", whole.OutputText(), whole.Usage.InputTokens, next.Usage.InputTokens, res.Usage.InputTokens)
	}
}

// TestResponsesForcedToolChoice: tool_choice required or naming a
// function gives calls only, whose arguments the independent validator
// accepts, the same streamed.
func TestResponsesForcedToolChoice(t *testing.T) {
	_, url := serve(t, cpuEngine(t), server.Options{})
	c := client(url)
	ctx := context.Background()
	var wp, tp map[string]any
	json.Unmarshal([]byte(weatherParams), &wp)
	json.Unmarshal([]byte(timeParams), &tp)
	tools := []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", wp, true), responses.ToolParamOfFunction("get_time", tp, true)}
	validators := map[string]interface{ Validate(any) error }{
		"get_weather": grammartest.Validator(t, weatherParams),
		"get_time":    grammartest.Validator(t, timeParams),
	}
	for k, tc := range []struct {
		name   string
		choice responses.ResponseNewParamsToolChoiceUnion
		only   string // the function every call must be
	}{
		{"required", responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)}, ""},
		{"named", responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: "get_weather"}}, "get_weather"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := responses.ResponseNewParams{Model: modelName, Input: userInput("What is the weather in Paris?"), Tools: tools, ToolChoice: tc.choice,
				ParallelToolCalls: openai.Bool(false), MaxOutputTokens: openai.Int(300), Temperature: openai.Float(1)}
			seed := option.WithJSONSet("seed", 11+k)
			res, err := c.Responses.New(ctx, params, seed)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Output) != 1 || res.Output[0].Type != "function_call" || res.Status != "completed" {
				t.Fatalf("output %q", summary(res))
			}
			fc := res.Output[0].AsFunctionCall()
			v, ok := validators[fc.Name]
			if !ok || tc.only != "" && fc.Name != tc.only {
				t.Fatalf("a call of %q", fc.Name)
			}
			var args any
			if err := json.Unmarshal([]byte(fc.Arguments), &args); err != nil {
				t.Fatalf("arguments %q: %v", fc.Arguments, err)
			}
			if err := v.Validate(args); err != nil {
				t.Errorf("arguments %s: %v", fc.Arguments, err)
			}
			t.Logf("%s %s(%s)", fc.CallID, fc.Name, fc.Arguments)
			s := readStream(t, c.Responses.NewStreaming(ctx, params, seed))
			if got, want := snapshotSummary(s.snapshot, &s.final), summary(res); !reflect.DeepEqual(got, want) {
				t.Errorf("streamed %q, not %q", got, want)
			}
		})
	}
}

// TestResponsesStructuredOutput: text.format json_schema gives JSON that
// the independent validator accepts; json_object, a JSON object.
func TestResponsesStructuredOutput(t *testing.T) {
	_, url := serve(t, cpuEngine(t), server.Options{})
	c := client(url)
	ctx := context.Background()
	var schema map[string]any
	json.Unmarshal([]byte(personSchema), &schema)
	v := grammartest.Validator(t, personSchema)
	for seed := range 3 {
		res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelName, Input: userInput("Describe a person as JSON."),
			MaxOutputTokens: openai.Int(300), Temperature: openai.Float(1),
			Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
				Name: "person", Schema: schema, Strict: openai.Bool(true)}}}}, option.WithJSONSet("seed", seed))
		if err != nil {
			t.Fatal(err)
		}
		var got any
		if err := json.Unmarshal([]byte(res.OutputText()), &got); err != nil {
			t.Fatalf("not JSON: %q", res.OutputText())
		}
		if err := v.Validate(got); err != nil || res.Status != "completed" {
			t.Errorf("%q (%s): %v", res.OutputText(), res.Status, err)
		}
		if res.Text.Format.Type != "json_schema" || res.Text.Format.Name != "person" {
			t.Errorf("text.format echoed as %s", res.Text.RawJSON())
		}
	}
	res, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelName, Input: userInput("JSON, please."), MaxOutputTokens: openai.Int(200),
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONObject: &openai.ResponseFormatJSONObjectParam{}}}})
	if err != nil {
		t.Fatal(err)
	}
	// An object, or (out of tokens) the start of one.
	var obj map[string]any
	if text := res.OutputText(); res.Status == "completed" && json.Unmarshal([]byte(text), &obj) != nil || !strings.HasPrefix(text, "{") {
		t.Errorf("json_object: %q (%s)", text, res.Status)
	}
}

// TestResponsesStore: a stored response is found by GET and continued
// until DELETE; one not stored, or deleted, is not found, and continuing
// it is refused as OpenAI refuses an unknown previous_response_id.
func TestResponsesStore(t *testing.T) {
	_, url := serve(t, cpuEngine(t), server.Options{})
	c := client(url)
	ctx := context.Background()
	params := responses.ResponseNewParams{Model: modelName, Input: userInput("Once upon a time"), MaxOutputTokens: openai.Int(8),
		Metadata: map[string]string{"k": "v"}}
	res, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Responses.Get(ctx, res.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.RawJSON() != strings.TrimSpace(res.RawJSON()) || got.Metadata["k"] != "v" {
		t.Errorf("GET answered\n%s\nnot\n%s", got.RawJSON(), res.RawJSON())
	}
	if _, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelName, PreviousResponseID: openai.String(res.ID), Input: userInput("and then"), MaxOutputTokens: openai.Int(4)}); err != nil {
		t.Errorf("continuing it: %v", err)
	}
	if err := c.Responses.Delete(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
	notStored := params
	notStored.Store = openai.Bool(false)
	other, err := c.Responses.New(ctx, notStored)
	if err != nil {
		t.Fatal(err)
	}
	if rawField(other.RawJSON(), "store") != false {
		t.Error("store false not echoed")
	}
	for _, id := range []string{res.ID, other.ID, "resp_none"} {
		var apiErr *openai.Error
		if _, err := c.Responses.Get(ctx, id, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %v", id, err)
		}
		if err := c.Responses.Delete(ctx, id); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Errorf("DELETE %s: %v", id, err)
		}
		_, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: modelName, PreviousResponseID: openai.String(id), Input: userInput("more")})
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "previous_response_not_found" || apiErr.Param != "previous_response_id" {
			t.Errorf("continuing %s: %v", id, err)
		}
	}
}

// TestResponsesErrors: what the endpoint refuses, with OpenAI's error
// shape and the field at fault.
func TestResponsesErrors(t *testing.T) {
	_, url := serve(t, cpuEngine(t), server.Options{})
	for _, tc := range []struct {
		body, param, about string
	}{
		{`{"input":"hi","tools":[{"type":"web_search"}]}`, "tools", "function tools only"},
		{`{"input":"hi","tools":[{"type":"function","name":"bad name"}]}`, "tools", "letters, digits"},
		{`{"input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"web_search_preview"}}`, "tool_choice", "hosted"},
		{`{"input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, "tool_choice", "not among the tools"},
		{`{"input":"hi","tool_choice":"sometimes"}`, "tool_choice", "sometimes"},
		{`{"input":[{"type":"computer_call","call_id":"c"}]}`, "input", "computer_call"},
		{`{"input":[{"type":"message","role":"user","content":[{"type":"input_image","image_url":"https://x"}]}]}`, "input", "data URLs"},
		{`{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{"}]}`, "input", "JSON object"},
		{`{"input":[{"type":"function_call_output","output":"x"}]}`, "input", "call_id"},
		{`{"input":[{"role":"user","content":1}]}`, "input", "content parts"},
		{`{"input":[{"role":7}]}`, "input", "input[0].role must be a string"},
		{`{"input":[1]}`, "input", "input[0]"},
		{`{"input":{"role":"user"}}`, "input", "a string or an array"},
		{`{"input":[]}`, "input", "input is required"},
		{`{}`, "input", "input is required"},
		{`{"input":"hi","previous_response_id":"resp_x"}`, "previous_response_id", "not found"},
		{`{"input":"hi","max_output_tokens":0}`, "max_output_tokens", "at least 1"},
		{`{"input":"hi","max_tokens":5}`, "max_tokens", "max_output_tokens"},
		{`{"input":"hi","response_format":{"type":"json_object"}}`, "response_format", "text.format"},
		{`{"input":"hi","n":2}`, "n", "one response"},
		{`{"input":"hi","text":{"format":{"type":"xml"}}}`, "text.format", "xml"},
		{`{"input":"hi","text":{"format":{"type":"json_schema","name":"x"}}}`, "text.format", "schema"},
		{`{"input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"bogus"}}}}`, "text.format", ""},
		{`{"input":"hi","text":{"format":{"type":"json_object"}},"tools":[{"type":"function","name":"f"}],"tool_choice":"required"}`, "tool_choice", "text.format"},
		{`{"input":"hi","truncation":"auto"}`, "truncation", "auto"},
		{`{"input":"hi","background":true}`, "background", "background"},
		{`{"input":"hi","conversation":"conv_1"}`, "conversation", "conversations"},
		{`{"input":"hi","prompt":{"id":"pmpt_1"}}`, "prompt", "prompt templates"},
		{`{"input":"hi","include":["message.output_text.logprobs"]}`, "include", "logprobs"},
		{`{"input":"hi","include":["everything"]}`, "include", "everything"},
		{`{"input":"hi","reasoning":{"effort":"extreme"}}`, "reasoning.effort", "extreme"},
		{`{"input":"hi","reasoning":{"summary":"long"}}`, "reasoning.summary", "long"},
		{`{"input":"hi","metadata":{"k":1}}`, "metadata", "a string"},
		{`{"input":"hi","temperature":3}`, "temperature", "between 0 and 2"},
		{`{"input":"hi","chat_template_kwargs":{"messages":[]}}`, "chat_template_kwargs", "messages"},
		{`{"input":"hi","model":"nope"}`, "", "does not exist"},
	} {
		code, res, _ := post(t, url+"/v1/responses", tc.body)
		msg := errorMessage(t, res)
		e := res["error"].(map[string]any)
		param, _ := e["param"].(string)
		want := http.StatusBadRequest
		if tc.param == "" {
			want = http.StatusNotFound
		}
		if code != want || param != tc.param || !strings.Contains(msg, tc.about) {
			t.Errorf("%s: %d, param %q: %s", tc.body, code, param, msg)
		}
	}
	// The official client reads them as errors.
	c := client(url)
	_, err := c.Responses.New(context.Background(), responses.ResponseNewParams{Model: modelName, Input: userInput("hi"),
		Tools: []responses.ToolUnionParam{{OfWebSearch: &responses.WebSearchToolParam{Type: responses.WebSearchToolTypeWebSearch}}}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "tools" {
		t.Errorf("a web_search tool: %v", err)
	}
	// Unknown fields are ignored, as on the other endpoints.
	if code, res, _ := post(t, url+"/v1/responses", `{"input":"hi","max_output_tokens":2,"service_tier":"auto","prompt_cache_key":"k","store":false}`); code != http.StatusOK || res["status"] == nil {
		t.Errorf("unknown fields: %d %v", code, res)
	}
}

// TestResponsesStreamFailure: a stream that fails once begun (here past
// the server's request timeout) ends with an error event and
// response.failed, and the response is not stored.
func TestResponsesStreamFailure(t *testing.T) {
	// Steps of 10 ms at least: the context's 512 tokens outlast the
	// timeout on any machine, and the first comes well before it.
	eng, err := runtime.Load(modelPath(t), runtime.Options{Device: "cpu",
		Wrap: func(be backend.Backend) backend.Backend { return slowSteps{be, 10 * time.Millisecond} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	_, url := serve(t, eng, server.Options{RequestTimeout: 3 * time.Second})
	c := client(url)
	s := readStream(t, c.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{Model: modelName, Input: userInput("Once upon a time"),
		MaxOutputTokens: openai.Int(100000)}, option.WithJSONSet("ignore_eos", true)))
	n := len(s.events)
	if n < 4 || s.terminal != "response.failed" || s.types[n-2] != "error" {
		t.Fatalf("events %v", s.kinds())
	}
	if e := s.events[n-2]; e.Code != "server_error" || !strings.Contains(e.Message, "timeout") {
		t.Errorf("error event %s", e.RawJSON())
	}
	if f := s.final; f.Status != "failed" || f.Error.Code != "server_error" || !strings.Contains(f.Error.Message, "timeout") {
		t.Errorf("response.failed %s", f.RawJSON())
	}
	var apiErr *openai.Error
	if _, err := c.Responses.Get(context.Background(), s.final.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("GET the failed response: %v", err)
	}
	eventually(t, "after the failure", func() string { return busy(eng) })
}
