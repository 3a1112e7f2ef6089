package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/grammar"
	"github.com/tessera-llm/tessera/runtime/grammar/grammartest"
	"github.com/tessera-llm/tessera/runtime/server"
)

// Reasoning and tool calls in the browser. A random model says nothing a
// test can expect, but held by a grammar of exactly one text it writes
// that text, token by token, through the real Qwen3 tokenizer, template
// and reply parser, as a trained model would (runtime/server's scripted
// tests do the same). The browser's chat.completions must answer what
// tessera serve's /v1/chat/completions answers, delta for delta, on the
// same model run natively.

// weatherTool is the one tool offered: a city of two, so that a reply
// held to calls of it by grammar stays short even on a random model.
const weatherTool = `{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
	"parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"], "additionalProperties": false}}}`

const weatherParams = `{"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]}}, "required": ["city"], "additionalProperties": false}`

// chatScript is the grammar of exactly text.
func chatScript(text string) string { return "root ::= " + grammar.Quote(text) + "\n" }

// chatResults is what the page reports (every completion as it came).
type chatResults struct {
	Whole     json.RawMessage   `json:"whole"`
	Chunks    []json.RawMessage `json:"chunks"`
	Text      json.RawMessage   `json:"text"`
	Required  json.RawMessage   `json:"required"`
	RoundTrip []int             `json:"roundTrip"`
	Logprobs  json.RawMessage   `json:"logprobs"`
	Samples   json.RawMessage   `json:"samples"`
	Params    []string          `json:"params"`
	Codes     []string          `json:"codes"`
	Err       string            `json:"err"`
}

// testChatReplies drives engine.chat.completions in the page (ctx) on the
// Qwen3-shaped model at qwen (served as /models/qwen3-chat.gguf), and
// tessera serve on the same file, with the same requests.
func testChatReplies(t *testing.T, ctx context.Context, cons *console, qwen string) {
	eng, err := runtime.Load(qwen, runtime.Options{Device: "cpu", Quant: "f32", Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv := server.New(server.Options{})
	if err := srv.Add("qwen3-chat", eng); err != nil {
		t.Fatal(err)
	}
	srv.Ready()
	hs := httptest.NewServer(srv)
	defer hs.Close()

	var tool map[string]any
	if err := json.Unmarshal([]byte(weatherTool), &tool); err != nil {
		t.Fatal(err)
	}
	user := map[string]any{"role": "user", "content": "Weather in Paris?"}
	base := func(more map[string]any) map[string]any {
		b := map[string]any{"model": "qwen3-chat", "messages": []any{user}, "temperature": 0, "max_tokens": 60}
		for k, v := range more {
			b[k] = v
		}
		return b
	}
	const callReply = "<think>\nI need the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
	const textReply = "<think>\nSun.\n</think>\n\nYes."
	callReq := base(map[string]any{"tools": []any{tool}, "grammar": chatScript(callReply)})
	textReq := base(map[string]any{"grammar": chatScript(textReply)})
	requiredReq := base(map[string]any{"tools": []any{tool}, "tool_choice": "required", "parallel_tool_calls": false, "temperature": 1, "seed": 5})
	// A conversation that called and got the result back, without thinking.
	asked := map[string]any{"role": "assistant", "content": "", "reasoning_content": "I need the weather.",
		"tool_calls": []any{map[string]any{"id": "call-1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city": "Paris"}`}}}}
	answered := map[string]any{"role": "tool", "tool_call_id": "call-1", "content": `{"sky": "clear"}`}
	roundTrip := map[string]any{"messages": []any{user, asked, answered}, "tools": []any{tool}, "chat_template_kwargs": map[string]any{"enable_thinking": false}}
	// Requests both refuse.
	named := func(name string) map[string]any {
		return map[string]any{"type": "function", "function": map[string]any{"name": name}}
	}
	bad := []map[string]any{
		base(map[string]any{"tools": "get_weather"}),
		base(map[string]any{"tools": []any{named("bad name")}}),
		base(map[string]any{"tools": []any{map[string]any{"type": "retrieval"}}}),
		base(map[string]any{"tool_choice": "required"}),
		base(map[string]any{"tools": []any{tool}, "tool_choice": named("get_time")}),
		base(map[string]any{"tools": []any{tool}, "tool_choice": "sometimes"}),
		base(map[string]any{"tools": []any{tool}, "tool_choice": "required", "grammar": chatScript("Hi")}),
		base(map[string]any{"messages": []any{map[string]any{"role": "robot", "content": "Hi"}}}),
		base(map[string]any{"messages": "Hi"}),
		base(map[string]any{"messages": []any{}}),
		base(map[string]any{"messages": []any{user, map[string]any{"role": "assistant", "tool_calls": []any{
			map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": "Paris"}}}}}}),
		base(map[string]any{"chat_template_kwargs": map[string]any{"messages": []any{}}}),
		base(map[string]any{"reasoning_effort": "extreme"}),
	}
	for i, b := range bad {
		if code, body := postChat(t, hs.URL, b); code != http.StatusBadRequest {
			t.Errorf("bad request %d: the server answered %d %s", i, code, body)
		}
	}

	// Logprobs, n samples and penalties, as the server gives them; and
	// sampling fields both refuse, naming the same field.
	logprobsReq := base(map[string]any{"grammar": chatScript(textReply), "logprobs": true, "top_logprobs": 3})
	samplesReq := base(map[string]any{"grammar": chatScript(textReply), "n": 2, "temperature": 1, "seed": 7, "frequency_penalty": 0.5, "presence_penalty": 0.3})
	badSampling := []map[string]any{
		base(map[string]any{"temperature": 5}),
		base(map[string]any{"n": 0}),
		base(map[string]any{"top_logprobs": 3}),
		base(map[string]any{"logprobs": "yes"}),
		base(map[string]any{"stop": 5}),
		base(map[string]any{"seed": "x"}),
		base(map[string]any{"max_tokens": 0}),
		base(map[string]any{"top_p": "all"}),
		base(map[string]any{"frequency_penalty": 3}),
		base(map[string]any{"response_format": map[string]any{"type": "xml"}}),
	}
	var serverParams []string
	for i, b := range badSampling {
		code, body := postChat(t, hs.URL, b)
		var e struct {
			Error struct{ Param string } `json:"error"`
		}
		json.Unmarshal(body, &e)
		if code != http.StatusBadRequest || e.Error.Param == "" {
			t.Errorf("bad sampling request %d: the server answered %d %s", i, code, body)
		}
		serverParams = append(serverParams, "true:bad-request:"+e.Error.Param)
	}

	reqs, _ := json.Marshal(map[string]any{"call": callReq, "text": textReq, "required": requiredReq, "roundTrip": roundTrip, "bad": bad,
		"logprobs": logprobsReq, "samples": samplesReq, "badSampling": badSampling})
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		const req = `+string(reqs)+`;
		const out = {};
		try {
			const engine = await tessera.createEngine({model: "/models/qwen3-chat.gguf", quant: "f32", context: 256});
			const create = (p) => engine.chat.completions.create(p);
			out.whole = await create(req.call);
			out.chunks = [];
			for await (const c of await create({...req.call, stream: true})) out.chunks.push(c);
			out.text = await create(req.text);
			out.required = await create(req.required);
			out.roundTrip = await engine.tokenize(req.roundTrip);
			out.logprobs = await create(req.logprobs);
			out.samples = await create(req.samples);
			out.params = [];
			for (const p of req.badSampling) {
				try { await create(p); out.params.push("none"); }
				catch (e) { out.params.push((e instanceof tessera.TesseraError) + ":" + e.code + ":" + e.param); }
			}
			// And what cannot even be sent as JSON.
			const unsendable = [{...req.call, tools: [{type: "function", function: {name: "f", parameters: {x: () => 1}}}]}, null];
			out.codes = [];
			for (const p of [...req.bad, ...unsendable]) {
				try { await create(p); out.codes.push("none"); }
				catch (e) { out.codes.push((e instanceof tessera.TesseraError) + ":" + e.code); }
			}
			await engine.unload();
		} catch (e) { out.err = e.code + ": " + e.message; }
		return JSON.stringify(out);
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%v (console %q)", err, cons.all())
	}
	var got chatResults
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatal(err)
	}
	if got.Err != "" {
		t.Fatalf("in the page: %s", got.Err)
	}

	// The reply with reasoning and a call, whole: as the server has it.
	whole := message(t, got.Whole)
	if want := message(t, serverBody(t, hs.URL, callReq)); !reflect.DeepEqual(whole, want) {
		t.Errorf("the reply with a call:\n browser %v\n  server %v", whole, want)
	}
	calls, _ := whole["tool_calls"].([]any)
	if whole["reasoning_content"] != "I need the weather." || whole["content"] != "" || whole["finish_reason"] != "tool_calls" || len(calls) != 1 ||
		!reflect.DeepEqual(calls[0], map[string]any{"id": "ID", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city": "Paris"}`}}) {
		t.Errorf("the reply with a call: %v", whole)
	}

	// Streamed: the server's deltas (where the server sends several
	// tokens' text at once, one delta holds what the browser sends in
	// several); the call's name comes before its arguments are all
	// written, and they add up.
	deltas := streamDeltas(t, got.Chunks, true)
	if b, s := joinDeltas(deltas), joinDeltas(streamDeltas(t, serverChunks(t, hs.URL, callReq), false)); !reflect.DeepEqual(b, s) {
		t.Errorf("streamed deltas:\n browser %v\n  server %v", b, s)
	}
	var reasoning, args, order string
	named1, argsAfter := false, 0
	for _, d := range deltas {
		if r, ok := d["reasoning_content"].(string); ok {
			reasoning += r
			order = strings.TrimSuffix(order, "r") + "r"
		}
		tcs, _ := d["tool_calls"].([]any)
		for _, tc := range tcs {
			tc := tc.(map[string]any)
			f := tc["function"].(map[string]any)
			if name, ok := f["name"]; ok {
				want := map[string]any{"index": 0.0, "id": "ID", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": ""}}
				if named1 || !reflect.DeepEqual(tc, want) {
					t.Errorf("call delta %v (named before: %v), want %v", tc, named1, want)
				}
				named1 = name == "get_weather"
				order += "c"
				continue
			}
			if !named1 || len(tc) != 2 || tc["index"] != 0.0 || len(f) != 1 {
				t.Errorf("an arguments delta %v (after the name: %v), want only index and function.arguments", tc, named1)
			}
			args += f["arguments"].(string)
			argsAfter++
		}
	}
	if reasoning != "\nI need the weather.\n" || args != `{"city": "Paris"}` || argsAfter < 2 || order != "rc" {
		t.Errorf("streamed: reasoning %q, arguments %q in %d deltas after the name, order %q", reasoning, args, argsAfter, order)
	}
	if last := deltas[len(deltas)-1]; last["finish_reason"] != "tool_calls" {
		t.Errorf("the stream ends with %v", last)
	}

	// Reasoning and text.
	text := message(t, got.Text)
	if want := message(t, serverBody(t, hs.URL, textReq)); !reflect.DeepEqual(text, want) ||
		text["reasoning_content"] != "Sun." || text["content"] != "\n\nYes." || text["finish_reason"] != "stop" || text["tool_calls"] != nil {
		t.Errorf("reasoning and text:\n browser %v\n  server %v", text, want)
	}

	// tool_choice required: a call of the tool, its arguments valid.
	var req struct {
		Choices []struct {
			Message struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(got.Required, &req); err != nil || len(req.Choices) != 1 {
		t.Fatalf("tool_choice required: %s (%v)", got.Required, err)
	}
	rc := req.Choices[0]
	if rc.FinishReason != "tool_calls" || len(rc.Message.ToolCalls) != 1 || rc.Message.ToolCalls[0].Function.Name != "get_weather" ||
		!strings.HasPrefix(rc.Message.ToolCalls[0].ID, "call-chatcmpl-") {
		t.Fatalf("tool_choice required: %s", got.Required)
	}
	var v any
	if err := json.Unmarshal([]byte(rc.Message.ToolCalls[0].Function.Arguments), &v); err != nil {
		t.Errorf("required call's arguments %q: %v", rc.Message.ToolCalls[0].Function.Arguments, err)
	} else if err := grammartest.Validator(t, weatherParams).Validate(v); err != nil {
		t.Errorf("required call's arguments %q: %v", rc.Message.ToolCalls[0].Function.Arguments, err)
	}

	// A call and its result go back through the template as natively.
	want, err := eng.PromptTokens(runtime.Request{Messages: []chat.Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", Reasoning: "I need the weather.", ToolCalls: []chat.ToolCall{{ID: "call-1", Name: "get_weather", Arguments: map[string]any{"city": "Paris"}}}},
		{Role: "tool", ToolCallID: "call-1", Content: `{"sky": "clear"}`},
	}, Tools: []any{tool}, TemplateVars: map[string]any{"enable_thinking": false}})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, len(want))
	for i, id := range want {
		ids[i] = int(id)
	}
	if prompt := eng.Tokenizer().Decode(ids); !reflect.DeepEqual(got.RoundTrip, ids) || !strings.Contains(prompt, "<tool_response>") || !strings.Contains(prompt, "get_weather") {
		t.Errorf("the round trip's prompt:\n browser %v\n  native %v\n%s", got.RoundTrip, ids, prompt)
	}

	// Refusals: every one a TesseraError of code bad-request.
	if len(got.Codes) != len(bad)+2 {
		t.Fatalf("codes %v", got.Codes)
	}
	for i, c := range got.Codes {
		if c != "true:bad-request" {
			t.Errorf("bad request %d: %s", i, c)
		}
	}
	t.Logf("required call: %s(%s)", rc.Message.ToolCalls[0].Function.Name, rc.Message.ToolCalls[0].Function.Arguments)

	// Logprobs: the same tokens, their log-probabilities and the top
	// three alternatives as the server's (WebGPU's f32 sums against the
	// CPU's, so to 2e-3).
	compareLogprobs(t, got.Logprobs, serverBody(t, hs.URL, logprobsReq))
	// n samples with penalties: as many choices, each the scripted reply.
	bc, sc := choicesOf(t, got.Samples), choicesOf(t, serverBody(t, hs.URL, samplesReq))
	if len(bc.Choices) != 2 || !reflect.DeepEqual(bc, sc) {
		t.Errorf("n 2 with penalties:\n browser %+v\n  server %+v", bc, sc)
	}
	if !slices.Equal(got.Params, serverParams) {
		t.Errorf("refused sampling fields:\n browser %v\n  server %v", got.Params, serverParams)
	}
}

// choices is what a completion's choices and usage say, less ids.
type choices struct {
	Choices []struct {
		Index        int
		Message      struct{ Content, ReasoningContent string } `json:"message"`
		FinishReason string                                     `json:"finish_reason"`
	}
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	}
}

func choicesOf(t *testing.T, raw json.RawMessage) choices {
	t.Helper()
	var c choices
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return c
}

// compareLogprobs wants the browser's logprobs.content to be the
// server's: tokens equal, numbers within 2e-3, and each alternative's
// token the server's unless it ties with a neighbour.
func compareLogprobs(t *testing.T, browser, server json.RawMessage) {
	t.Helper()
	type entry struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
		Top     []struct {
			Token   string  `json:"token"`
			Logprob float64 `json:"logprob"`
		} `json:"top_logprobs"`
	}
	read := func(raw json.RawMessage) []entry {
		var c struct {
			Choices []struct {
				Logprobs struct{ Content []entry } `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(raw, &c); err != nil || len(c.Choices) != 1 {
			t.Fatalf("logprobs %s: %v", raw, err)
		}
		return c.Choices[0].Logprobs.Content
	}
	b, s := read(browser), read(server)
	if len(b) == 0 || len(b) != len(s) {
		t.Fatalf("logprobs of %d tokens; the server's %d", len(b), len(s))
	}
	const tol = 2e-3
	near := func(x, y float64) bool { return x-y < tol && y-x < tol }
	for i := range b {
		if b[i].Token != s[i].Token || !slices.Equal(b[i].Bytes, s[i].Bytes) || !near(b[i].Logprob, s[i].Logprob) || len(b[i].Top) != 3 || len(s[i].Top) != 3 {
			t.Fatalf("token %d: browser %+v, server %+v", i, b[i], s[i])
		}
		for k := range b[i].Top {
			bt, st := b[i].Top[k], s[i].Top[k]
			tie := (k > 0 && near(st.Logprob, s[i].Top[k-1].Logprob)) || (k < 2 && near(st.Logprob, s[i].Top[k+1].Logprob))
			if !near(bt.Logprob, st.Logprob) || (bt.Token != st.Token && !tie) {
				t.Errorf("token %d, alternative %d: browser %+v, server %+v", i, k, bt, st)
			}
		}
	}
	t.Logf("logprobs of %d tokens agree with the server's; the first: %q %.4f", len(b), b[0].Token, b[0].Logprob)
}

// postChat posts body to the server's /v1/chat/completions.
func postChat(t *testing.T, url string, body map[string]any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.ReadFrom(res.Body)
	res.Body.Close()
	return res.StatusCode, out.Bytes()
}

// serverBody is the server's completion of body.
func serverBody(t *testing.T, url string, body map[string]any) json.RawMessage {
	t.Helper()
	code, b := postChat(t, url, body)
	if code != http.StatusOK {
		t.Fatalf("the server: %d %s", code, b)
	}
	return b
}

// serverChunks are the server's stream of body, its events' data.
func serverChunks(t *testing.T, url string, body map[string]any) []json.RawMessage {
	t.Helper()
	streamed := map[string]any{"stream": true}
	for k, v := range body {
		streamed[k] = v
	}
	code, b := postChat(t, url, streamed)
	if code != http.StatusOK {
		t.Fatalf("the server: %d %s", code, b)
	}
	var chunks []json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "[DONE]" {
			chunks = append(chunks, json.RawMessage(data))
		}
	}
	return chunks
}

// message is a completion's first choice's message, with its
// finish_reason, and its calls' ids (checked and) written "ID": they are
// made from the completion's id, which differs from call to call.
func message(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var c struct {
		Choices []struct {
			Message      map[string]any `json:"message"`
			FinishReason string         `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("a completion %s: %v", raw, err)
	}
	m := c.Choices[0].Message
	m["finish_reason"] = c.Choices[0].FinishReason
	callIDs(t, m)
	return m
}

// streamDeltas are the chunks' deltas, each with its finish_reason when
// set, the calls' ids written "ID"; browser leaves out the chunks of
// empty content the browser gives a token that completes nothing.
func streamDeltas(t *testing.T, chunks []json.RawMessage, browser bool) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, raw := range chunks {
		var c struct {
			Choices []struct {
				Delta        map[string]any `json:"delta"`
				FinishReason *string        `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatalf("a chunk %s: %v", raw, err)
		}
		if len(c.Choices) == 0 { // the server's usage chunk
			continue
		}
		d := c.Choices[0].Delta
		if browser && len(d) == 1 && d["content"] == "" && c.Choices[0].FinishReason == nil {
			continue
		}
		if c.Choices[0].FinishReason != nil {
			d["finish_reason"] = *c.Choices[0].FinishReason
		}
		callIDs(t, d)
		out = append(out, d)
	}
	return out
}

// joinDeltas joins each run of deltas that only add to one thing (the
// reasoning, the content, or a call's arguments) into one.
func joinDeltas(deltas []map[string]any) []map[string]any {
	// adds is what d adds to, and the text, when it only adds.
	adds := func(d map[string]any) (string, string) {
		if len(d) != 1 {
			return "", ""
		}
		for _, k := range []string{"reasoning_content", "content"} {
			if s, ok := d[k].(string); ok {
				return k, s
			}
		}
		tcs, _ := d["tool_calls"].([]any)
		if len(tcs) != 1 {
			return "", ""
		}
		tc, _ := tcs[0].(map[string]any)
		f, _ := tc["function"].(map[string]any)
		if args, ok := f["arguments"].(string); ok && len(tc) == 2 && len(f) == 1 {
			return fmt.Sprintf("arguments %v", tc["index"]), args
		}
		return "", ""
	}
	var out []map[string]any
	kinds, texts := []string{}, []string{}
	for _, d := range deltas {
		k, s := adds(d)
		if n := len(out) - 1; k != "" && n >= 0 && kinds[n] == k {
			texts[n] += s
			continue
		}
		out, kinds, texts = append(out, d), append(kinds, k), append(texts, s)
	}
	for i, d := range out {
		if kinds[i] == "" {
			continue
		}
		j := map[string]any{}
		for k, v := range d {
			j[k] = v
		}
		if strings.HasPrefix(kinds[i], "arguments") {
			tc := d["tool_calls"].([]any)[0].(map[string]any)
			j["tool_calls"] = []any{map[string]any{"index": tc["index"], "function": map[string]any{"arguments": texts[i]}}}
		} else {
			j[kinds[i]] = texts[i]
		}
		out[i] = j
	}
	return out
}

// callIDs checks the ids of m's tool_calls (a call made from a completion
// id, unique in it) and writes them "ID".
func callIDs(t *testing.T, m map[string]any) {
	t.Helper()
	tcs, _ := m["tool_calls"].([]any)
	seen := map[string]bool{}
	for _, tc := range tcs {
		tc := tc.(map[string]any)
		id, ok := tc["id"].(string)
		if !ok {
			continue
		}
		if !strings.HasPrefix(id, "call-chatcmpl-") || seen[id] {
			t.Errorf("call id %q", id)
		}
		seen[id] = true
		tc["id"] = "ID"
	}
}
