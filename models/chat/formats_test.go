package chat_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime/grammar"
	"github.com/tessera-llm/tessera/runtime/grammar/grammartest"
)

// The tool formats of today's models, each with its real chat template
// (testdata/templates, see its README) and scripted replies, fed whole,
// a byte at a time and in random pieces; every call's arguments are
// checked against the tool's schema by an independent validator.

const (
	weatherParams = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1},"units":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`
	fileParams    = `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"},"overwrite":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"}},"meta":{"type":"object","properties":{"mode":{"type":"integer"}},"additionalProperties":false}},"required":["path","content"]}`
)

var specs = []chat.ToolSpec{
	{Name: "get_weather", Parameters: json.RawMessage(weatherParams)},
	{Name: "write_file", Parameters: json.RawMessage(fileParams)},
}

// toolDefs are specs as a request's tools, for a template.
func toolDefs(specs []chat.ToolSpec) []any {
	var out []any
	for _, s := range specs {
		var params any
		json.Unmarshal(s.Parameters, &params)
		out = append(out, map[string]any{"type": "function", "function": map[string]any{
			"name": s.Name, "description": "Does " + s.Name + ".", "parameters": params}})
	}
	return out
}

func loadTemplate(t *testing.T, name string) *chat.Template {
	t.Helper()
	src, err := os.ReadFile("testdata/templates/" + name + ".jinja")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chat.New(string(src))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return tpl
}

func text(s string) []chat.ReplyEvent { return []chat.ReplyEvent{{Kind: chat.EventText, Text: s}} }
func reason(s string) []chat.ReplyEvent {
	return []chat.ReplyEvent{{Kind: chat.EventReasoning, Text: s}}
}

func callEv(k int, name, id, args string) []chat.ReplyEvent {
	return []chat.ReplyEvent{{Kind: chat.EventCall, Call: k, Name: name, ID: id}, {Kind: chat.EventArgs, Call: k, Text: args}}
}

func seq(parts ...[]chat.ReplyEvent) []chat.ReplyEvent {
	var out []chat.ReplyEvent
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// feed parses reply in the pieces cut makes of it, and returns the
// events, merged as a single feed reports them, and the reply.
func feed(f *chat.ReplyFormat, o chat.ParseOptions, reply string, cut func(string) []string) ([]chat.ReplyEvent, chat.Reply) {
	p := f.NewParser(o)
	var evs []chat.ReplyEvent
	for _, s := range cut(reply) {
		evs = append(evs, p.Feed(s)...)
	}
	last, r := p.Close()
	var out []chat.ReplyEvent
	for _, e := range append(evs, last...) {
		if n := len(out) - 1; n >= 0 && e.Kind != chat.EventCall && out[n].Kind == e.Kind && out[n].Call == e.Call {
			out[n].Text += e.Text
			continue
		}
		out = append(out, e)
	}
	return out, r
}

// cuts feed a reply whole, a byte at a time, and in random pieces.
var cuts = func() map[string]func(string) []string {
	m := map[string]func(string) []string{
		"whole": func(s string) []string { return []string{s} },
		"bytes": func(s string) []string {
			var out []string
			for i := range len(s) {
				out = append(out, s[i:i+1])
			}
			return out
		},
	}
	for seed := range uint64(3) {
		m[fmt.Sprintf("random%d", seed)] = func(s string) []string {
			rng := rand.New(rand.NewPCG(uint64(len(s)), 43+seed))
			var out []string
			for len(s) > 0 {
				n := min(1+rng.IntN(9), len(s))
				out = append(out, s[:n])
				s = s[n:]
			}
			return out
		}
	}
	return m
}()

// validateCalls checks every call's arguments against its tool's schema.
func validateCalls(t *testing.T, calls []chat.ReplyCall, specs []chat.ToolSpec) {
	t.Helper()
	for _, c := range calls {
		var params json.RawMessage
		for _, s := range specs {
			if s.Name == c.Name {
				params = s.Parameters
			}
		}
		if params == nil {
			t.Errorf("call of %q, which is no tool", c.Name)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(c.Arguments), &v); err != nil {
			t.Errorf("%s: arguments %s: %v", c.Name, c.Arguments, err)
			continue
		}
		if err := grammartest.Validator(t, string(params)).Validate(v); err != nil {
			t.Errorf("%s: arguments %s: %v", c.Name, c.Arguments, err)
		}
	}
}

func TestFormatReplies(t *testing.T) {
	xml := chat.ParseOptions{ToolSpecs: specs}
	xmlThink := chat.ParseOptions{ToolSpecs: specs, Reasoning: true, InReasoning: true}
	tools := chat.ParseOptions{Tools: true}
	both := chat.ParseOptions{Tools: true, Reasoning: true}
	opened := chat.ParseOptions{Tools: true, Reasoning: true, InReasoning: true}
	calls := func(cs ...chat.ReplyCall) []chat.ReplyCall { return cs }
	weather := func(args string) chat.ReplyCall { return chat.ReplyCall{Name: "get_weather", Arguments: args} }
	const (
		xmlParis   = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
		dsBegin    = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
		dsEnd      = "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
		harmonyFn  = "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
		fileArgs   = `{"path": "/tmp/a.go", "content": "package main\n\nfunc main() {\n\tprintln(\"<b>\")\n}", "overwrite": true, "tags": ["go", "demo"]}`
		fileScript = "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a.go\n</parameter>\n<parameter=content>\npackage main\n\nfunc main() {\n\tprintln(\"<b>\")\n}\n</parameter>\n<parameter=overwrite>\nTrue\n</parameter>\n<parameter=tags>\n[\"go\", \"demo\"]\n</parameter>\n</function>\n</tool_call>"
	)
	for _, tt := range []struct {
		name, tpl string
		o         chat.ParseOptions
		reply     string
		events    []chat.ReplyEvent
		want      chat.Reply
		cut       bool // cut short: the last call's arguments are unfinished
	}{
		// Qwen3-Coder's XML.
		{"text", "qwen3-coder", xml, "The weather is nice.", text("The weather is nice."), chat.Reply{Text: "The weather is nice."}, false},
		{"one call", "qwen3-coder", xml, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
			callEv(0, "get_weather", "", `{"city": "Paris", "days": 3}`), chat.Reply{Calls: calls(weather(`{"city": "Paris", "days": 3}`))}, false},
		{"text and two calls", "qwen3-coder", xml, "Let me check.\n" + xmlParis + "\n" + fileScript,
			seq(text("Let me check.\n"), callEv(0, "get_weather", "", `{"city": "Paris"}`), text("\n"), callEv(1, "write_file", "", fileArgs)),
			chat.Reply{Text: "Let me check.", Calls: calls(weather(`{"city": "Paris"}`), chat.ReplyCall{Name: "write_file", Arguments: fileArgs})}, false},
		{"a value holding </parameter>", "qwen3-coder", xml, "<tool_call>\n<function=write_file>\n<parameter=path>\nx.xml\n</parameter>\n<parameter=content>\n<a></parameter>\n</a>\n</parameter>\n</function>\n</tool_call>",
			callEv(0, "write_file", "", `{"path": "x.xml", "content": "<a></parameter>\n</a>"}`),
			chat.Reply{Calls: calls(chat.ReplyCall{Name: "write_file", Arguments: `{"path": "x.xml", "content": "<a></parameter>\n</a>"}`})}, false},
		{"values read as the schema says", "qwen3-coder", xml, "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n<parameter=days>\n2\n</parameter>\n<parameter=units>\ncelsius\n</parameter>\n</function>\n</tool_call>",
			callEv(0, "get_weather", "", `{"city": "42", "days": 2, "units": "celsius"}`), chat.Reply{Calls: calls(weather(`{"city": "42", "days": 2, "units": "celsius"}`))}, false},
		{"a bare function", "qwen3-coder", xml, "<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>",
			callEv(0, "get_weather", "", `{"city": "Rome"}`), chat.Reply{Calls: calls(weather(`{"city": "Rome"}`))}, false},
		{"cut short", "qwen3-coder", xml, "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a\n</parameter>\n<parameter=content>\nhello wor",
			callEv(0, "write_file", "", `{"path": "/tmp/a", "content": "hello wor`), chat.Reply{Calls: calls(chat.ReplyCall{Name: "write_file", Arguments: `{"path": "/tmp/a", "content": "hello wor`})}, true},
		{"text that looks like calls", "qwen3-coder", xml, "Wrap it in <tool_call> tags, or write <function=foo> and </function>.",
			text("Wrap it in <tool_call> tags, or write <function=foo> and </function>."), chat.Reply{Text: "Wrap it in <tool_call> tags, or write <function=foo> and </function>."}, false},
		{"a JSON call in the block", "qwen3-coder", xml, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			callEv(0, "get_weather", "", `{"city": "Paris"}`), chat.Reply{Calls: calls(weather(`{"city": "Paris"}`))}, false},
		{"two functions in one block", "qwen3-coder", xml, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>",
			seq(callEv(0, "get_weather", "", `{"city": "Paris"}`), callEv(1, "get_weather", "", `{"city": "Rome"}`)),
			chat.Reply{Calls: calls(weather(`{"city": "Paris"}`), weather(`{"city": "Rome"}`))}, false},
		{"reasoning and text", "qwen3.5", xmlThink, "Simple.\n</think>\n\nHello!", seq(reason("Simple.\n"), text("\n\nHello!")), chat.Reply{Reasoning: "Simple.", Text: "\n\nHello!"}, false},
		{"reasoning and a call", "qwen3.5", xmlThink, "The user wants Paris.\n</think>\n\n" + xmlParis,
			seq(reason("The user wants Paris.\n"), text("\n\n"), callEv(0, "get_weather", "", `{"city": "Paris"}`)),
			chat.Reply{Reasoning: "The user wants Paris.", Calls: calls(weather(`{"city": "Paris"}`))}, false},

		// Mistral v11.
		{"text", "mistral-small-3.2", tools, "Bonjour.", text("Bonjour."), chat.Reply{Text: "Bonjour."}, false},
		{"one call", "mistral-small-3.2", tools, `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}`,
			callEv(0, "get_weather", "", `{"city": "Paris"}`), chat.Reply{Calls: calls(weather(`{"city": "Paris"}`))}, false},
		{"two calls", "mistral-small-3.2", tools, `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]write_file[ARGS]{"path": "a.txt", "content": "}{\"]"}`,
			seq(callEv(0, "get_weather", "", `{"city": "Paris"}`), callEv(1, "write_file", "", `{"path": "a.txt", "content": "}{\"]"}`)),
			chat.Reply{Calls: calls(weather(`{"city": "Paris"}`), chat.ReplyCall{Name: "write_file", Arguments: `{"path": "a.txt", "content": "}{\"]"}`})}, false},
		{"a call with an id", "mistral-small-3.2", tools, `[TOOL_CALLS]get_weather[CALL_ID]abcDEF123[ARGS]{"city": "Paris"}`,
			callEv(0, "get_weather", "abcDEF123", `{"city": "Paris"}`), chat.Reply{Calls: calls(chat.ReplyCall{ID: "abcDEF123", Name: "get_weather", Arguments: `{"city": "Paris"}`})}, false},
		{"a v3 list", "mistral-small-3.2", tools, `[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]`,
			callEv(0, "get_weather", "", `{"city": "Paris"}`), chat.Reply{Calls: calls(weather(`{"city": "Paris"}`))}, false},
		{"cut short", "mistral-small-3.2", tools, `[TOOL_CALLS]get_weather[ARGS]{"city": "Pa`,
			callEv(0, "get_weather", "", `{"city": "Pa`), chat.Reply{Calls: calls(weather(`{"city": "Pa`))}, true},
		{"text that looks like calls", "mistral-small-3.2", tools, "Use [TOOL_CALLS] then a name, then [ARGS].",
			text("Use [TOOL_CALLS] then a name, then [ARGS]."), chat.Reply{Text: "Use [TOOL_CALLS] then a name, then [ARGS]."}, false},
		{"reasoning and text", "ministral-3-reasoning", both, "[THINK]The user greets me.[/THINK]Bonjour !",
			seq(reason("The user greets me."), text("Bonjour !")), chat.Reply{Reasoning: "The user greets me.", Text: "Bonjour !"}, false},
		{"reasoning and a call", "ministral-3-reasoning", both, `[THINK]Need the weather.[/THINK][TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 2}`,
			seq(reason("Need the weather."), callEv(0, "get_weather", "", `{"city": "Paris", "days": 2}`)),
			chat.Reply{Reasoning: "Need the weather.", Calls: calls(weather(`{"city": "Paris", "days": 2}`))}, false},

		// Harmony.
		{"text", "gpt-oss", both, "<|channel|>final<|message|>Hello!<|return|>", text("Hello!"), chat.Reply{Text: "Hello!"}, false},
		{"reasoning and text", "gpt-oss", both, "<|channel|>analysis<|message|>User says hi.<|end|><|start|>assistant<|channel|>final<|message|>Hello!<|return|>",
			seq(reason("User says hi."), text("Hello!")), chat.Reply{Reasoning: "User says hi.", Text: "Hello!"}, false},
		{"one call", "gpt-oss", both, harmonyFn + `{"city":"Paris"}<|call|>`,
			callEv(0, "get_weather", "", `{"city":"Paris"}`), chat.Reply{Calls: calls(weather(`{"city":"Paris"}`))}, false},
		{"reasoning and a call", "gpt-oss", both, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant" + harmonyFn + `{"city":"Paris"}<|call|>`,
			seq(reason("Need weather."), callEv(0, "get_weather", "", `{"city":"Paris"}`)), chat.Reply{Reasoning: "Need weather.", Calls: calls(weather(`{"city":"Paris"}`))}, false},
		{"a preamble and two calls", "gpt-oss", both, "<|channel|>commentary<|message|>Checking two cities.<|end|>" +
			`<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris"}<|call|>` +
			`<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Rome"}`,
			seq(text("Checking two cities."), callEv(0, "get_weather", "", `{"city":"Paris"}`), callEv(1, "get_weather", "", `{"city":"Rome"}`)),
			chat.Reply{Text: "Checking two cities.", Calls: calls(weather(`{"city":"Paris"}`), weather(`{"city":"Rome"}`))}, false},
		{"cut short", "gpt-oss", both, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant" + harmonyFn + `{"city":"Pa`,
			seq(reason("Need weather."), callEv(0, "get_weather", "", `{"city":"Pa`)), chat.Reply{Reasoning: "Need weather.", Calls: calls(weather(`{"city":"Pa`))}, true},
		{"cut in a header", "gpt-oss", both, "<|channel|>analysis<|message|>Hmm.<|end|><|start|>assistant<|channel|>comment",
			reason("Hmm."), chat.Reply{Reasoning: "Hmm."}, false},
		{"text that looks like calls", "gpt-oss", both, `<|channel|>final<|message|>Send it to=functions.get_weather as {"city": "Paris"}.<|return|>`,
			text(`Send it to=functions.get_weather as {"city": "Paris"}.`), chat.Reply{Text: `Send it to=functions.get_weather as {"city": "Paris"}.`}, false},
		{"a built-in tool it was not given", "gpt-oss", both, `<|channel|>analysis to=browser.search code<|message|>{"query":"weather"}<|call|>`,
			reason(`{"query":"weather"}`), chat.Reply{Reasoning: `{"query":"weather"}`}, false},

		// DeepSeek V3 and R1.
		{"text", "deepseek-r1-distill", both, "Hello.", text("Hello."), chat.Reply{Text: "Hello."}, false},
		{"reasoning and text", "deepseek-r1-distill", opened, "The user says hello.\n</think>\n\nHello!",
			seq(reason("The user says hello.\n"), text("\n\nHello!")), chat.Reply{Reasoning: "The user says hello.", Text: "\n\nHello!"}, false},
		{"reasoning and a call", "deepseek-r1-distill", opened, "Need weather.\n</think>\n\n" + dsBegin + "function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```" + dsEnd,
			seq(reason("Need weather.\n"), text("\n\n"), callEv(0, "get_weather", "", `{"city": "Paris"}`)),
			chat.Reply{Reasoning: "Need weather.", Calls: calls(weather(`{"city": "Paris"}`))}, false},
		{"two calls", "deepseek-r1-distill", both, dsBegin + "function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>write_file\n```json\n{\"path\": \"a.txt\", \"content\": \"hi\"}\n```" + dsEnd,
			seq(callEv(0, "get_weather", "", `{"city": "Paris"}`), callEv(1, "write_file", "", `{"path": "a.txt", "content": "hi"}`)),
			chat.Reply{Calls: calls(weather(`{"city": "Paris"}`), chat.ReplyCall{Name: "write_file", Arguments: `{"path": "a.txt", "content": "hi"}`})}, false},
		{"cut short", "deepseek-r1-distill", both, dsBegin + "function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Pa",
			callEv(0, "get_weather", "", `{"city": "Pa`), chat.Reply{Calls: calls(weather(`{"city": "Pa`))}, true},
		{"text that looks like calls", "deepseek-r1-distill", both, "Write ```json blocks of type function.<｜tool▁calls▁begin｜>nothing",
			text("Write ```json blocks of type function.<｜tool▁calls▁begin｜>nothing"), chat.Reply{Text: "Write ```json blocks of type function.<｜tool▁calls▁begin｜>nothing"}, false},
		{"one call", "deepseek-v3.1", both, dsBegin + `get_weather<｜tool▁sep｜>{"city": "Paris"}` + dsEnd,
			callEv(0, "get_weather", "", `{"city": "Paris"}`), chat.Reply{Calls: calls(weather(`{"city": "Paris"}`))}, false},
		{"two calls", "deepseek-v3.1", both, dsBegin + `get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Rome", "units": "celsius"}` + dsEnd,
			seq(callEv(0, "get_weather", "", `{"city": "Paris"}`), callEv(1, "get_weather", "", `{"city": "Rome", "units": "celsius"}`)),
			chat.Reply{Calls: calls(weather(`{"city": "Paris"}`), weather(`{"city": "Rome", "units": "celsius"}`))}, false},
		{"reasoning and a call", "deepseek-v3.1", opened, "Hmm.</think>Checking." + dsBegin + `get_weather<｜tool▁sep｜>{"city": "Paris"}` + dsEnd,
			seq(reason("Hmm."), text("Checking."), callEv(0, "get_weather", "", `{"city": "Paris"}`)),
			chat.Reply{Reasoning: "Hmm.", Text: "Checking.", Calls: calls(weather(`{"city": "Paris"}`))}, false},
	} {
		f := chat.ReplyFormatOf(loadTemplate(t, tt.tpl))
		for how, cut := range cuts {
			t.Run(tt.tpl+"/"+tt.name+"/"+how, func(t *testing.T) {
				evs, r := feed(f, tt.o, tt.reply, cut)
				if !reflect.DeepEqual(evs, tt.events) {
					t.Errorf("%s: events\n%s\nwant\n%s", f.Name(), showEvents(evs), showEvents(tt.events))
				}
				if !reflect.DeepEqual(r, tt.want) {
					t.Errorf("%s: reply\n%+v\nwant\n%+v", f.Name(), r, tt.want)
				}
				if !tt.cut {
					validateCalls(t, r.Calls, specs)
				}
			})
		}
	}
}

func showEvents(evs []chat.ReplyEvent) string {
	b, _ := json.MarshalIndent(evs, "", " ")
	return string(b)
}

// TestFormatOfTemplates: each real template picks its family, and the
// family's markers are the control tokens its replies need.
func TestFormatOfTemplates(t *testing.T) {
	for _, tt := range []struct {
		tpl, name string
		markers   []string // among Markers
	}{
		{"qwen3-coder", "qwen3-coder", []string{"<tool_call>", "<function="}},
		{"qwen3.5", "qwen3-coder+think", []string{"<think>", "</think>", "<tool_call>"}},
		{"gpt-oss", "harmony", []string{"<|start|>", "<|channel|>", "<|constrain|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>"}},
		{"mistral-small-3.2", "mistral-v11", []string{"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"}},
		{"ministral-3-reasoning", "mistral-v11+think", []string{"[TOOL_CALLS]", "[ARGS]", "[THINK]", "[/THINK]"}},
		{"deepseek-r1-distill", "deepseek+think", []string{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"}},
		{"deepseek-v3.1", "deepseek-v3.1+think", []string{"<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>", "<think>"}},
	} {
		f := chat.ReplyFormatOf(loadTemplate(t, tt.tpl))
		if f.Name() != tt.name {
			t.Errorf("%s: format %s, want %s", tt.tpl, f.Name(), tt.name)
		}
		for _, m := range tt.markers {
			if !contains(f.Markers(), m) || !contains(f.MarkersFor(chat.ParseOptions{Tools: true, Reasoning: true}), m) {
				t.Errorf("%s: %q is not among the markers %q", tt.tpl, m, f.Markers())
			}
		}
		if !f.Reasons() && tt.tpl != "qwen3-coder" && tt.tpl != "mistral-small-3.2" {
			t.Errorf("%s: does not reason", tt.tpl)
		}
	}
	// Without tools, a parser needs no call markers.
	f := chat.ReplyFormatOf(loadTemplate(t, "deepseek-v3.1"))
	if got := f.MarkersFor(chat.ParseOptions{Reasoning: true}); contains(got, "<｜tool▁sep｜>") {
		t.Errorf("markers without tools: %q", got)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestOpensReasoning: the templates that open the reasoning in their
// generation prompt are read from inside it.
func TestOpensReasoning(t *testing.T) {
	msgs := []chat.Message{{Role: "user", Content: "Hi"}}
	for _, tt := range []struct {
		tpl  string
		vars map[string]any
		want bool
	}{
		{"qwen3.5", nil, true},
		{"qwen3.5", map[string]any{"enable_thinking": false}, false},
		{"deepseek-r1-distill", nil, true},
		{"deepseek-v3.1", map[string]any{"thinking": true}, true},
		{"deepseek-v3.1", nil, false},
		{"gpt-oss", nil, false},
		{"ministral-3-reasoning", nil, false},
	} {
		tpl := loadTemplate(t, tt.tpl)
		prompt, err := tpl.Render(msgs, chat.Options{AddGenerationPrompt: true, Vars: tt.vars})
		if err != nil {
			t.Fatalf("%s: %v", tt.tpl, err)
		}
		if got := chat.ReplyFormatOf(tpl).OpensReasoning(prompt); got != tt.want {
			t.Errorf("%s %v: OpensReasoning %v, want %v (prompt ends %q)", tt.tpl, tt.vars, got, tt.want, prompt[max(len(prompt)-40, 0):])
		}
	}
}

// TestTemplateRoundTrip: a reply's call, as a server sends it back (its
// arguments decoded from the JSON the parser gave, its id the format's),
// renders through the real template as the model writes calls, and
// reads back as the same call.
func TestTemplateRoundTrip(t *testing.T) {
	for _, tt := range []struct {
		tpl, reply string
		o          chat.ParseOptions
		want       string // the call as the template renders it ({id}: the call's id)
		result     string // the tool's result as the template renders it
	}{
		{"qwen3-coder", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>", chat.ParseOptions{ToolSpecs: specs},
			"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>", "<tool_response>\nsunny\n</tool_response>"},
		{"qwen3.5", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>", chat.ParseOptions{ToolSpecs: specs},
			"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>", "<tool_response>\nsunny\n</tool_response>"},
		{"gpt-oss", `<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", "days": 3}<|call|>`, chat.ParseOptions{Tools: true},
			`<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris","days":3}<|call|>`,
			`<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"sunny"<|end|>`},
		{"mistral-small-3.2", `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}`, chat.ParseOptions{Tools: true},
			`[TOOL_CALLS]get_weather[CALL_ID]{id}[ARGS]{"city":"Paris","days":3}`, "[TOOL_RESULTS]{id}[TOOL_CONTENT]sunny[/TOOL_RESULTS]"},
		{"ministral-3-reasoning", `[TOOL_CALLS]get_weather[ARGS]{"city": "Paris", "days": 3}`, chat.ParseOptions{Tools: true},
			`[TOOL_CALLS]get_weather[ARGS]{"city":"Paris","days":3}`, "[TOOL_RESULTS]sunny[/TOOL_RESULTS]"},
		{"deepseek-r1-distill", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\", \"days\": 3}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", chat.ParseOptions{Tools: true},
			// R1's published template closes a reply's calls only after a
			// second one.
			"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\":\"Paris\",\"days\":3}\n```<｜tool▁call▁end｜>",
			"<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>sunny<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"},
		{"deepseek-v3.1", `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris", "days": 3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`, chat.ParseOptions{Tools: true},
			`<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city":"Paris","days":3}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`,
			"<｜tool▁output▁begin｜>sunny<｜tool▁output▁end｜>"},
	} {
		t.Run(tt.tpl, func(t *testing.T) {
			tpl := loadTemplate(t, tt.tpl)
			f := chat.ReplyFormatOf(tpl)
			_, r := feed(f, tt.o, tt.reply, cuts["whole"])
			if len(r.Calls) != 1 {
				t.Fatalf("%d calls in %+v", len(r.Calls), r)
			}
			c := r.Calls[0]
			var args map[string]any
			if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
				t.Fatal(err)
			}
			id := f.CallID("call-7f3a", 0, c.ID)
			msgs := []chat.Message{
				{Role: "system", Content: "Be brief."},
				{Role: "user", Content: "Weather in Paris for 3 days?"},
				{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: id, Name: c.Name, Arguments: args}}},
				{Role: "tool", ToolCallID: id, Content: "sunny"},
			}
			out, err := tpl.Render(msgs, chat.Options{Tools: toolDefs(specs), AddGenerationPrompt: true, BOS: "<s>", EOS: "</s>"})
			if err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tt.want, "{id}", id)
			if !strings.Contains(out, want) {
				t.Errorf("the call renders as\n%s\nwant it to hold\n%s", out, want)
			}
			if !strings.Contains(out, strings.ReplaceAll(tt.result, "{id}", id)) {
				t.Errorf("the result renders as\n%s\nwant it to hold\n%s", out, tt.result)
			}
			// The call as rendered reads back as the same call.
			_, back := feed(f, chat.ParseOptions{ToolSpecs: specs}, strings.TrimPrefix(want, "<|start|>assistant"), cuts["whole"])
			if len(back.Calls) != 1 || back.Calls[0].Name != c.Name {
				t.Fatalf("read back as %+v", back)
			}
			var again map[string]any
			if err := json.Unmarshal([]byte(back.Calls[0].Arguments), &again); err != nil || !reflect.DeepEqual(again, args) {
				t.Errorf("read back arguments %s, want %v (%v)", back.Calls[0].Arguments, args, err)
			}
		})
	}
}

func compileSchema(s []byte) (string, error) {
	return grammar.JSONSchemaGBNF(s, grammar.SchemaOptions{})
}

// TestRequire: the grammar that holds a reply to calls accepts the calls
// a model writes and refuses others; the prefill and what the grammar
// lets the model write read back, through the parser, as calls that fit
// their schemas and nothing else.
func TestRequire(t *testing.T) {
	weather := specs[:1]
	const (
		dsHead   = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
		xmlParis = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
		xmlFile  = "<tool_call>\n<function=write_file>\n<parameter=path>\n/tmp/a.go\n</parameter>\n<parameter=content>\nif a < b && c </param {\n\treturn \"x\"\n}\n</parameter>\n<parameter=overwrite>\ntrue\n</parameter>\n<parameter=tags>\n[\"go\", \"x\"]\n</parameter>\n<parameter=meta>\n{\"mode\": 420}\n</parameter>\n</function>\n</tool_call>"
	)
	for _, tt := range []struct {
		name        string
		f           *chat.ReplyFormat
		tpl         string // or the template's format
		tools       []chat.ToolSpec
		more        int
		inReasoning bool
		prefill     string
		match       []string
		reject      []string
	}{
		{name: "hermes", f: chat.Hermes, tools: specs, more: 1,
			match:  []string{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"},
			reject: []string{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>", "Sure."}},
		{name: "mistral v3", f: chat.MistralV3, tools: specs, prefill: "[TOOL_CALLS]",
			match: []string{`[{"name": "get_weather", "arguments": {"city": "Paris"}}]`}},
		{name: "qwen3-coder", tpl: "qwen3-coder", tools: specs, more: 1,
			match: []string{xmlParis, xmlParis + "\n" + xmlFile,
				"<tool_call>\n<function=get_weather>\n<parameter=city>\nSão Paulo\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=units>\ncelsius\n</parameter>\n</function>\n</tool_call>"},
			reject: []string{
				"<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",                                              // no city
				"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>",   // days no integer
				"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=units>\nkelvin\n</parameter>\n</function>\n</tool_call>", // not in the enum
				"<tool_call>\n<function=get_weather>\n<parameter=city>\nPa</parameter>ris\n</parameter>\n</function>\n</tool_call>",                              // the closing tag in a value
				"<tool_call>\n<function=read_file>\n</function>\n</tool_call>",
				xmlParis + "\n" + xmlParis + "\n" + xmlParis, // more than 1 more
				"I will call it.\n" + xmlParis,
			}},
		{name: "qwen3.5 thinking", tpl: "qwen3.5", tools: specs, inReasoning: true,
			match:  []string{"I need the weather.\n</think>\n\n" + xmlParis, "</think>\n\n" + xmlParis},
			reject: []string{xmlParis, "a</think>b\n</think>\n\n" + xmlParis}},
		{name: "harmony", tpl: "gpt-oss", tools: weather, prefill: "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
			match: []string{`{"city": "Paris", "days": 2}`}, reject: []string{`{"days": 2}`}},
		{name: "mistral v11", tpl: "mistral-small-3.2", tools: weather, prefill: "[TOOL_CALLS]get_weather[ARGS]",
			match: []string{`{"city": "Paris"}`}, reject: []string{`{"city": 1}`}},
		{name: "magistral", tpl: "ministral-3-reasoning", tools: specs[1:], prefill: "[TOOL_CALLS]write_file[ARGS]",
			match: []string{`{"path": "a", "content": "b", "meta": {"mode": 1}}`}, reject: []string{`{"path": "a"}`}},
		{name: "deepseek r1 thinking", tpl: "deepseek-r1-distill", tools: specs, inReasoning: true,
			prefill: "</think>\n\n" + dsHead + "function<｜tool▁sep｜>",
			match:   []string{"write_file\n```json\n{\"path\": \"a\", \"content\": \"b\"}\n```", "get_weather\n```json\n{\"city\": \"Paris\"}\n```"},
			reject:  []string{"read_file\n```json\n{}\n```", "get_weather\n```json\n{}\n```"}},
		{name: "deepseek v3.1", tpl: "deepseek-v3.1", tools: weather, prefill: dsHead + "get_weather<｜tool▁sep｜>",
			match: []string{`{"city": "Paris"}`}, reject: []string{`{}`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f
			if f == nil {
				f = chat.ReplyFormatOf(loadTemplate(t, tt.tpl))
			}
			r, err := f.Require(chat.RequireOptions{Tools: tt.tools, More: tt.more, InReasoning: tt.inReasoning, Compile: compileSchema})
			if err != nil {
				t.Fatal(err)
			}
			if r.Prefill != tt.prefill {
				t.Errorf("prefill %q, want %q", r.Prefill, tt.prefill)
			}
			g, err := grammar.Parse(r.Grammar)
			if err != nil {
				t.Fatalf("%v\n%s", err, r.Grammar)
			}
			for _, m := range tt.match {
				if !g.Match(m) {
					t.Errorf("the grammar refuses\n%s\n%s", m, r.Grammar)
					continue
				}
				o := chat.ParseOptions{ToolSpecs: tt.tools, Reasoning: f.Reasons(), InReasoning: tt.inReasoning, Prefix: r.Prefill}
				_, reply := feed(f, o, m, cuts["bytes"])
				if len(reply.Calls) == 0 || reply.Text != "" {
					t.Errorf("%q reads as %+v", m, reply)
				}
				validateCalls(t, reply.Calls, tt.tools)
			}
			for _, m := range tt.reject {
				if g.Match(m) {
					t.Errorf("the grammar accepts\n%s", m)
				}
			}
			if strings.Count(r.Grammar, "\nws ::=") > 1 || strings.Count(r.Grammar, "\nvalue ::=") > 1 {
				t.Errorf("JSON's building blocks are repeated:\n%s", r.Grammar)
			}
		})
	}
}

// TestRequireRefused: a family with a control token between a call's
// name and its arguments requires a single tool only.
func TestRequireRefused(t *testing.T) {
	for _, tpl := range []string{"gpt-oss", "mistral-small-3.2", "deepseek-v3.1"} {
		f := chat.ReplyFormatOf(loadTemplate(t, tpl))
		if f.CanRequire(2) || !f.CanRequire(1) {
			t.Errorf("%s: CanRequire(2) %v, CanRequire(1) %v", tpl, f.CanRequire(2), f.CanRequire(1))
		}
		_, err := f.Require(chat.RequireOptions{Tools: specs, Compile: compileSchema})
		if !errors.Is(err, chat.ErrCannotRequire) {
			t.Errorf("%s: %v", tpl, err)
		}
	}
	for _, tpl := range []string{"qwen3-coder", "deepseek-r1-distill"} {
		if f := chat.ReplyFormatOf(loadTemplate(t, tpl)); !f.CanRequire(2) {
			t.Errorf("%s cannot require one of two tools", tpl)
		}
	}
}

// TestXMLValueGrammar: an XML text value is any text without
// </parameter>, however much of the tag it holds.
func TestXMLValueGrammar(t *testing.T) {
	tool := []chat.ToolSpec{{Name: "echo", Parameters: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"}},"required":["s"]}`)}}
	r, err := chat.QwenXML.Require(chat.RequireOptions{Tools: tool, Compile: compileSchema})
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(r.Grammar)
	if err != nil {
		t.Fatal(err)
	}
	pieces := []string{"</parameter>", "</param", "<", "/", "parameter", ">", "a", "\n", "<</parameter", "</parameter<", "é"}
	rng := rand.New(rand.NewPCG(4, 3))
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		v := b.String()
		reply := "<tool_call>\n<function=echo>\n<parameter=s>\n" + v + "\n</parameter>\n</function>\n</tool_call>"
		if got, want := g.Match(reply), !strings.Contains(v, "</parameter>"); got != want {
			t.Fatalf("value %q: match %v, want %v", v, got, want)
		}
		if !g.Match(reply) {
			continue
		}
		_, parsed := feed(chat.QwenXML, chat.ParseOptions{ToolSpecs: tool}, reply, cuts["random1"])
		var args struct{ S string }
		if len(parsed.Calls) != 1 || json.Unmarshal([]byte(parsed.Calls[0].Arguments), &args) != nil || args.S != v {
			t.Fatalf("value %q reads as %+v", v, parsed)
		}
	}
}

// TestRenderCallsAlone: an assistant message of calls alone has null
// content, as OpenAI's clients send it (DeepSeek R1's template renders
// calls only then), or "" for a template that takes only strings.
func TestRenderCallsAlone(t *testing.T) {
	msgs := []chat.Message{{Role: "user", Content: "Hi"}, {Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "f", Arguments: map[string]any{"n": 2.0}}}}}
	for _, tt := range []struct{ src, want string }{
		{`{% for m in messages %}{% if m.content is none %}null {% endif %}{% endfor %}`, "null "},
		{`{% for m in messages %}[{{ m.content | trim }}]{% endfor %}`, "[Hi][]"},
		// Arguments are a mapping, or their JSON where a template adds
		// them to a string; whole numbers stay whole.
		{`{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.name + ' ' + c.function.arguments }}{% for k, v in c.function.arguments|items %} {{ k }}={{ v }}{% endfor %}{% endfor %}{% endfor %}`, `f {"n":2} n=2`},
	} {
		tpl, err := chat.New(tt.src)
		if err != nil {
			t.Fatal(err)
		}
		out, err := tpl.Render(msgs, chat.Options{})
		if err != nil || out != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.src, out, err, tt.want)
		}
	}
}

// TestRenderDeterministic: a template that iterates mappings with |items
// (Qwen3-Coder's tools and calls) renders the same prompt every time.
func TestRenderDeterministic(t *testing.T) {
	tpl := loadTemplate(t, "qwen3-coder")
	args := map[string]any{"a": 1.0, "b": "x", "c": true, "d": []any{1.0}, "e": map[string]any{"f": "g"}, "h": "i"}
	msgs := []chat.Message{{Role: "user", Content: "Go"}, {Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "write_file", Arguments: args}}}}
	var first string
	for i := range 20 {
		out, err := tpl.Render(msgs, chat.Options{Tools: toolDefs(specs)})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = out
		} else if out != first {
			t.Fatalf("render %d differs:\n%s\nfrom\n%s", i, out, first)
		}
	}
}
