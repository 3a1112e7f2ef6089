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
		f := toolFormatOf(tpl)
		if f.name != tc.format {
			t.Fatalf("%s: format %q, want %q", tc.file, f.name, tc.format)
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
		reply := out[i+len(tc.from) : j]
		text, calls := f.parse(reply, "call-x")
		if text != "" || len(calls) != 1 || calls[0].Function.Name != "get_weather" {
			t.Fatalf("%s: %q parsed as %q, %+v", tc.file, reply, text, calls)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(calls[0].Function.Arguments), &got); err != nil || got["city"] != "Paris" || got["unit"] != "celsius" {
			t.Errorf("%s: arguments %s", tc.file, calls[0].Function.Arguments)
		}
		if f.name == "mistral" && calls[0].ID != "a1B2c3D4e" {
			t.Errorf("%s: id %q, not the one rendered", tc.file, calls[0].ID)
		}
	}
}

// Replies in each format: calls where the format has them, text where it
// does not.
func TestToolFormatParse(t *testing.T) {
	for _, tc := range []struct {
		f          toolFormat
		reply      string
		text       string
		names      []string
		idsFromRef bool
	}{
		{qwenTools, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>", "", []string{"f"}, false},
		{qwenTools, "ok <tool_call>{\"name\": \"f\"}</tool_call><tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>", "ok", []string{"f", "g"}, false},
		{qwenTools, "<tool_call>not json</tool_call>", "<tool_call>not json</tool_call>", nil, false},
		{llama3Tools, `{"name": "f", "parameters": {"a": 1}}`, "", []string{"f"}, false},
		{llama3Tools, `<|python_tag|>{"name": "f", "arguments": {"a": 1}}`, "", []string{"f"}, false},
		{llama3Tools, `{"name": "f", "parameters": {}}; {"name": "g", "parameters": {"b": "x"}}`, "", []string{"f", "g"}, false},
		{llama3Tools, `{"name": "f", "parameters": {}} and more`, `{"name": "f", "parameters": {}} and more`, nil, false},
		{llama3Tools, `The answer is {"a": 1}`, `The answer is {"a": 1}`, nil, false},
		{llama3Tools, `{"a": 1}`, `{"a": 1}`, nil, false},
		{llama3Tools, `{"name": "f", "parameters": [1]}`, `{"name": "f", "parameters": [1]}`, nil, false},
		{mistralTools, `[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}, "id": "abcdefghi"}]`, "", []string{"f"}, true},
		{mistralTools, `[TOOL_CALLS] [{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"x": null}}]`, "", []string{"f", "g"}, false},
		{mistralTools, `[{"name": "f", "arguments": {}}]`, `[{"name": "f", "arguments": {}}]`, nil, false},
		{mistralTools, `[TOOL_CALLS] [{"name": "f", "argu`, ` [{"name": "f", "argu`, nil, false},
		{mistralTools, `Hello`, `Hello`, nil, false},
	} {
		text, calls := tc.f.parse(tc.reply, "call-p")
		var names []string
		for _, c := range calls {
			names = append(names, c.Function.Name)
			if !json.Valid([]byte(c.Function.Arguments)) {
				t.Errorf("%s %q: arguments %q", tc.f.name, tc.reply, c.Function.Arguments)
			}
			if tc.f.id != "" && !nineAlnum.MatchString(c.ID) {
				t.Errorf("%s %q: id %q", tc.f.name, tc.reply, c.ID)
			}
		}
		if text != tc.text || strings.Join(names, ",") != strings.Join(tc.names, ",") {
			t.Errorf("%s %q: text %q, calls %v; want %q, %v", tc.f.name, tc.reply, text, names, tc.text, tc.names)
		}
		if tc.idsFromRef && calls[0].ID != "abcdefghi" {
			t.Errorf("%s %q: id %q, not the model's", tc.f.name, tc.reply, calls[0].ID)
		}
	}
	// Ids made for Mistral differ per call and per completion.
	a, b, c := mistralTools.callID("call-1", 0, nil), mistralTools.callID("call-1", 1, nil), mistralTools.callID("call-2", 0, nil)
	if a == b || a == c || !nineAlnum.MatchString(a) {
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
	text, calls := mistralTools.parse(c.text.String(), "call-m")
	if text != "" || len(calls) != 1 || calls[0].Function.Name != "f" {
		t.Fatalf("%q parsed as %q, %+v", c.text.String(), text, calls)
	}
	plain := &choice{}
	plain.add(runtime.Token{ID: 5}, false, nil)
	if plain.text.String() != "" {
		t.Errorf("a choice without marks wrote %q", plain.text.String())
	}
}
