package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// parseReply reads a whole reply in format f, calls read.
func parseReply(f *chat.ReplyFormat, reply string) chat.Reply {
	p := f.NewParser(chat.ParseOptions{Tools: true})
	p.Feed(reply)
	_, r := p.Close()
	return r
}

// What a model's real template renders as an assistant's call is what
// the parser reads back: the same function, arguments and id.
func TestToolFormatsReadTheirTemplates(t *testing.T) {
	args := map[string]any{"city": "Paris", "unit": "celsius"}
	for _, tc := range []struct {
		file, format string
		from, to     string // the assistant's turn in the rendering
	}{
		{"llama3.1.jinja", "llama3", "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
		{"mistral-v3.jinja", "mistral", "[/INST]", "</s>"},
	} {
		src, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := chat.New(string(src))
		if err != nil {
			t.Fatal(err)
		}
		f := chat.ReplyFormatOf(tpl)
		if f.Name() != tc.format {
			t.Fatalf("%s: format %q, want %q", tc.file, f.Name(), tc.format)
		}
		out, err := tpl.Render([]chat.Message{{Role: "user", Content: "Weather?"},
			{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "a1B2c3D4e", Name: "get_weather", Arguments: args}}}}, chat.Options{BOS: "<s>", EOS: "</s>"})
		if err != nil {
			t.Fatal(err)
		}
		i := strings.LastIndex(out, tc.from)
		j := strings.LastIndex(out, tc.to)
		if i < 0 || j < i {
			t.Fatalf("%s: no assistant turn in %q", tc.file, out)
		}
		reply := parseReply(f, out[i+len(tc.from):j])
		if reply.Text != "" || len(reply.Calls) != 1 || reply.Calls[0].Name != "get_weather" {
			t.Fatalf("%s: %q parsed as %+v", tc.file, out[i+len(tc.from):j], reply)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(reply.Calls[0].Arguments), &got); err != nil || got["city"] != "Paris" || got["unit"] != "celsius" {
			t.Errorf("%s: arguments %s", tc.file, reply.Calls[0].Arguments)
		}
		if id := f.CallID("call-x", 0, reply.Calls[0].ID); f.Name() == "mistral" && id != "a1B2c3D4e" {
			t.Errorf("%s: id %q, not the one rendered", tc.file, id)
		}
	}
}

// Replies in each format: calls where the format has them, text where it
// does not.
func TestToolFormatParse(t *testing.T) {
	for _, tc := range []struct {
		f          *chat.ReplyFormat
		reply      string
		text       string
		names      []string
		idsFromRef bool
	}{
		{chat.Hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "", []string{"f"}, false},
		{chat.Hermes, "ok <tool_call>{\"name\": \"f\"}</tool_call><tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>", "ok", []string{"f", "g"}, false},
		{chat.Hermes, "<tool_call>not json</tool_call>", "<tool_call>not json</tool_call>", nil, false},
		{chat.Llama3, `{"name": "f", "parameters": {"a": 1}}`, "", []string{"f"}, false},
		{chat.Llama3, `<|python_tag|>{"name": "f", "arguments": {"a": 1}}`, "", []string{"f"}, false},
		{chat.Llama3, `{"name": "f", "parameters": {}}; {"name": "g", "parameters": {"b": "x"}}`, "", []string{"f", "g"}, false},
		{chat.Llama3, `{"name": "f", "parameters": {}} and more`, `and more`, []string{"f"}, false},
		{chat.Llama3, `The answer is {"a": 1}`, `The answer is {"a": 1}`, nil, false},
		{chat.Llama3, `{"a": 1}`, `{"a": 1}`, nil, false},
		{chat.Llama3, `{"name": "f", "parameters": [1]}`, `{"name": "f", "parameters": [1]}`, nil, false},
		{chat.MistralV3, `[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}, "id": "abcdefghi"}]`, "", []string{"f"}, true},
		{chat.MistralV3, `[TOOL_CALLS] [{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"x": null}}]`, "", []string{"f", "g"}, false},
		{chat.MistralV3, `[{"name": "f", "arguments": {}}]`, `[{"name": "f", "arguments": {}}]`, nil, false},
		{chat.MistralV3, `[TOOL_CALLS] [{"name": "f", "argu`, `[TOOL_CALLS] [{"name": "f", "argu`, nil, false},
		{chat.MistralV3, `Hello`, `Hello`, nil, false},
	} {
		r := parseReply(tc.f, tc.reply)
		var names []string
		for k, c := range r.Calls {
			names = append(names, c.Name)
			if !json.Valid([]byte(c.Arguments)) {
				t.Errorf("%s %q: arguments %q", tc.f.Name(), tc.reply, c.Arguments)
			}
			if id := tc.f.CallID("call-p", k, c.ID); tc.f == chat.MistralV3 && len(id) != 9 {
				t.Errorf("%s %q: id %q", tc.f.Name(), tc.reply, id)
			}
		}
		if r.Text != tc.text || strings.Join(names, ",") != strings.Join(tc.names, ",") {
			t.Errorf("%s %q: text %q, calls %v; want %q, %v", tc.f.Name(), tc.reply, r.Text, names, tc.text, tc.names)
		}
		if tc.idsFromRef && r.Calls[0].ID != "abcdefghi" {
			t.Errorf("%s %q: id %q, not the model's", tc.f.Name(), tc.reply, r.Calls[0].ID)
		}
	}
	// Ids made for Mistral differ per call and per completion.
	a, b, c := chat.MistralV3.CallID("call-1", 0, ""), chat.MistralV3.CallID("call-1", 1, ""), chat.MistralV3.CallID("call-2", 0, "")
	if a == b || a == c || len(a) != 9 {
		t.Errorf("ids %q %q %q", a, b, c)
	}
}

// A marker token writes no text; a choice parsed for calls keeps its
// piece, so a reply that starts with [TOOL_CALLS] is read as calls.
func TestChoiceKeepsMarkers(t *testing.T) {
	c := &choice{marks: map[int32]string{5: "[TOOL_CALLS]"}}
	for _, tok := range []runtime.Token{{ID: 5}, {ID: 40, Text: ` [{"name": "f", `}, {ID: 41, Text: `"arguments": {}}]`}} {
		c.add(tok, false, nil)
	}
	r := parseReply(chat.MistralV3, c.text.String())
	if r.Text != "" || len(r.Calls) != 1 || r.Calls[0].Name != "f" {
		t.Fatalf("%q parsed as %+v", c.text.String(), r)
	}
	plain := &choice{}
	plain.add(runtime.Token{ID: 5}, false, nil)
	if plain.text.String() != "" {
		t.Errorf("a choice without marks wrote %q", plain.text.String())
	}
}
