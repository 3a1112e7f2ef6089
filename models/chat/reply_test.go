package chat

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// parseAll feeds reply to a parser of f in pieces cut by cuts (nil: whole)
// and returns the events, merged as one feed would have them, and the
// reply.
func parseAll(f *ReplyFormat, o ParseOptions, reply string, cut func(string) []string) ([]ReplyEvent, Reply) {
	p := f.NewParser(o)
	var evs []ReplyEvent
	pieces := []string{reply}
	if cut != nil {
		pieces = cut(reply)
	}
	for _, s := range pieces {
		evs = append(evs, p.Feed(s)...)
	}
	last, r := p.Close()
	return merge(append(evs, last...)), r
}

// merge joins adjacent events of one kind (and call), as a single feed
// reports them.
func merge(evs []ReplyEvent) []ReplyEvent {
	var out []ReplyEvent
	for _, e := range evs {
		if n := len(out) - 1; n >= 0 && e.Kind != EventCall && out[n].Kind == e.Kind && out[n].Call == e.Call {
			out[n].Text += e.Text
			continue
		}
		out = append(out, e)
	}
	return out
}

func bytesCut(s string) []string {
	var out []string
	for i := range len(s) {
		out = append(out, s[i:i+1])
	}
	return out
}

func randomCut(seed uint64) func(string) []string {
	return func(s string) []string {
		rng := rand.New(rand.NewPCG(seed, 9))
		var out []string
		for len(s) > 0 {
			n := min(1+rng.IntN(7), len(s))
			out = append(out, s[:n])
			s = s[n:]
		}
		return out
	}
}

func call(k int, name, args string) []ReplyEvent {
	return []ReplyEvent{{Kind: EventCall, Call: k, Name: name}, {Kind: EventArgs, Call: k, Text: args}}
}

func TestReplyParser(t *testing.T) {
	think := *Hermes
	think.think = [2]string{"<think>", "</think>"}
	tools := ParseOptions{Tools: true}
	both := ParseOptions{Tools: true, Reasoning: true}
	for _, tt := range []struct {
		name   string
		f      *ReplyFormat
		o      ParseOptions
		reply  string
		events []ReplyEvent
		want   Reply
	}{
		{"text", Hermes, tools, "Hello there.", []ReplyEvent{{Kind: EventText, Text: "Hello there."}}, Reply{Text: "Hello there."}},
		{"hermes call", Hermes, tools, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, {\"a\": \"}\"}]}}\n</tool_call>",
			call(0, "get_weather", `{"city": "Paris", "n": [1, {"a": "}"}]}`),
			Reply{Calls: []ReplyCall{{Name: "get_weather", Arguments: `{"city": "Paris", "n": [1, {"a": "}"}]}`}}}},
		{"hermes text and two calls", Hermes, tools, "Let me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"x\": 1}, \"name\": \"b\"}\n</tool_call>",
			append(append([]ReplyEvent{{Kind: EventText, Text: "Let me look.\n"}}, call(0, "a", "{}")...), append([]ReplyEvent{{Kind: EventText, Text: "\n"}}, call(1, "b", `{"x": 1}`)...)...),
			Reply{Text: "Let me look.", Calls: []ReplyCall{{Name: "a", Arguments: "{}"}, {Name: "b", Arguments: `{"x": 1}`}}}},
		{"hermes block that is no call", Hermes, tools, "See <tool_call>{\"foo\": 1}</tool_call> here",
			[]ReplyEvent{{Kind: EventText, Text: "See <tool_call>{\"foo\": 1}</tool_call> here"}}, Reply{Text: "See <tool_call>{\"foo\": 1}</tool_call> here"}},
		{"hermes without tools", Hermes, ParseOptions{}, "<tool_call>{\"name\": \"a\"}</tool_call>",
			[]ReplyEvent{{Kind: EventText, Text: "<tool_call>{\"name\": \"a\"}</tool_call>"}}, Reply{Text: "<tool_call>{\"name\": \"a\"}</tool_call>"}},
		{"hermes cut short", Hermes, tools, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": \"hal",
			call(0, "a", `{"q": "hal`), Reply{Calls: []ReplyCall{{Name: "a", Arguments: `{"q": "hal`}}}},
		{"think then text", &think, both, "<think>\nHmm, Paris.\n</think>\n\nIt is sunny.",
			[]ReplyEvent{{Kind: EventReasoning, Text: "\nHmm, Paris.\n"}, {Kind: EventText, Text: "\n\nIt is sunny."}},
			Reply{Reasoning: "Hmm, Paris.", Text: "\n\nIt is sunny."}},
		{"think then call", &think, both, "<think>need weather</think><tool_call>{\"name\":\"w\",\"arguments\":{\"c\":\"<think>\"}}</tool_call>",
			append([]ReplyEvent{{Kind: EventReasoning, Text: "need weather"}}, call(0, "w", `{"c":"<think>"}`)...),
			Reply{Reasoning: "need weather", Calls: []ReplyCall{{Name: "w", Arguments: `{"c":"<think>"}`}}}},
		{"in reasoning from the prompt", &think, ParseOptions{Reasoning: true, InReasoning: true}, "ok so\n</think>\nDone.",
			[]ReplyEvent{{Kind: EventReasoning, Text: "ok so\n"}, {Kind: EventText, Text: "\nDone."}}, Reply{Reasoning: "ok so", Text: "\nDone."}},
		{"think markers without reasoning", &think, tools, "<think>x</think>y",
			[]ReplyEvent{{Kind: EventText, Text: "<think>x</think>y"}}, Reply{Text: "<think>x</think>y"}},
		{"llama3 call", Llama3, tools, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
			call(0, "get_weather", `{"city": "Rome"}`), Reply{Calls: []ReplyCall{{Name: "get_weather", Arguments: `{"city": "Rome"}`}}}},
		{"llama3 python tag, two calls", Llama3, tools, "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": {\"k\": 2}}",
			append(call(0, "a", "{}"), call(1, "b", `{"k": 2}`)...), Reply{Calls: []ReplyCall{{Name: "a", Arguments: "{}"}, {Name: "b", Arguments: `{"k": 2}`}}}},
		{"llama3 text", Llama3, tools, "The answer is {x}.", []ReplyEvent{{Kind: EventText, Text: "The answer is {x}."}}, Reply{Text: "The answer is {x}."}},
		{"llama3 object that is no call", Llama3, tools, `{"answer": 42}`, []ReplyEvent{{Kind: EventText, Text: `{"answer": 42}`}}, Reply{Text: `{"answer": 42}`}},
		{"mistral calls with ids", MistralV3, tools, "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": \"]\"}, \"id\": \"abcDEF123\"}, {\"name\": \"b\", \"arguments\": {}}]",
			append(call(0, "a", `{"x": "]"}`), call(1, "b", "{}")...), Reply{Calls: []ReplyCall{{Name: "a", Arguments: `{"x": "]"}`, ID: "abcDEF123"}, {Name: "b", Arguments: "{}"}}}},
		{"mistral prefilled", MistralV3, ParseOptions{Tools: true, Prefix: "[TOOL_CALLS]"}, " [{\"name\": \"a\", \"arguments\": {}}]",
			call(0, "a", "{}"), Reply{Calls: []ReplyCall{{Name: "a", Arguments: "{}"}}}},
		{"mistral marker then text", MistralV3, tools, "Sure [TOOL_CALLS] no list", []ReplyEvent{{Kind: EventText, Text: "Sure [TOOL_CALLS] no list"}}, Reply{Text: "Sure [TOOL_CALLS] no list"}},
	} {
		for name, cut := range map[string]func(string) []string{"whole": nil, "bytes": bytesCut, "random": randomCut(uint64(len(tt.reply)))} {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				evs, r := parseAll(tt.f, tt.o, tt.reply, cut)
				if !reflect.DeepEqual(evs, tt.events) {
					t.Errorf("events\n%s\nwant\n%s", show(evs), show(tt.events))
				}
				if !reflect.DeepEqual(r, tt.want) {
					t.Errorf("reply %+v, want %+v", r, tt.want)
				}
			})
		}
	}
}

func show(evs []ReplyEvent) string {
	b, _ := json.MarshalIndent(evs, "", " ")
	return string(b)
}

// TestReplyFormatOf: templates pick their families.
func TestReplyFormatOf(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"{{ messages }}", "hermes"},
		{"{% if tools %}<tool_call>{% endif %}<think>", "hermes+think"},
		{"[TOOL_CALLS] {{ x }}", "mistral"},
		{"<|python_tag|>", "llama3"},
	} {
		tpl, err := New(tt.src)
		if err != nil {
			t.Fatal(err)
		}
		if got := ReplyFormatOf(tpl).Name(); got != tt.want {
			t.Errorf("%q: %s, want %s", tt.src, got, tt.want)
		}
	}
	if got := ReplyFormatOf(Plain{}).Name(); got != "hermes" {
		t.Errorf("plain: %s", got)
	}
	f := ReplyFormatOf(mustTemplate(t, "<think>"))
	if !f.OpensReasoning("<|im_start|>assistant\n<think>\n") || f.OpensReasoning("<think>\n\n</think>\n\n") {
		t.Error("OpensReasoning")
	}
	if strings.Join(MistralV3.Markers(), ",") != "[TOOL_CALLS]" {
		t.Errorf("markers %v", MistralV3.Markers())
	}
}

func mustTemplate(t *testing.T, src string) *Template {
	tpl, err := New(src)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}
