package chat

import (
	"os"
	"testing"
)

// TestGemma4Template renders Gemma 4's published template
// (testdata/templates/gemma4.jinja) and compares each prompt with one
// written by hand from the template's text:
//   - the system message is a turn of its own, `<|turn>system\n` + text
//     trimmed + `<turn|>\n` (Gemma 3 folded it into the first user turn);
//     every turn is `<|turn>ROLE\n` + content trimmed + `<turn|>\n`, the
//     assistant's role written `model`;
//   - the generation prompt is `<|turn>model\n`, followed, unless
//     enable_thinking, by an empty thought channel
//     (`<|channel>thought\n<channel|>`) that tells the model not to think;
//   - enable_thinking puts `<|think|>\n` at the top of a system turn (one
//     is opened for it when the conversation has none) and leaves the
//     generation prompt open;
//   - a model turn's earlier thoughts (`<|channel>…<channel|>`) are cut
//     from its content (strip_thinking);
//   - tools are declared in the system turn as `<|tool>declaration:NAME{…}
//     <tool|>` in the template's own notation (`<|"|>` quotes, keys
//     sorted, types upper-cased); a call is `<|tool_call>call:NAME{k:v}
//     <tool_call|>` and the tool messages after it are answered inside the
//     same model turn as `<|tool_response>response:NAME{value:…}
//     <tool_response|>`, with no `<turn|>` and no new generation prompt:
//     the model goes on in that turn.
func TestGemma4Template(t *testing.T) {
	src, err := os.ReadFile("testdata/templates/gemma4.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := New(string(src))
	if err != nil {
		t.Fatal(err)
	}
	thought := append([]Message{}, conversation...)
	thought[2].Content = "<|channel>thought\nThe capital is Paris.<channel|>Paris."
	weather := []any{map[string]any{"type": "function", "function": map[string]any{
		"name": "get_weather", "description": "Weather in a city",
		"parameters": map[string]any{"type": "object", "required": []any{"city"},
			"properties": map[string]any{"city": map[string]any{"type": "string", "description": "The city"}}}}}}
	toolTurns := []Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "get_weather", Arguments: map[string]any{"city": "Paris"}}}},
		{Role: "tool", Content: `{"temp": 21}`, ToolCallID: "c1"},
	}
	const weatherDecl = `<|tool>declaration:get_weather{description:<|"|>Weather in a city<|"|>,` +
		`parameters:{properties:{city:{description:<|"|>The city<|"|>,type:<|"|>STRING<|"|>}},` +
		`required:[<|"|>city<|"|>],type:<|"|>OBJECT<|"|>}}<tool|>`
	for _, tc := range []struct {
		name string
		msgs []Message
		o    Options
		want string
	}{
		{"conversation", conversation, Options{BOS: "<bos>", AddGenerationPrompt: true},
			"<bos><|turn>system\nYou are a concise assistant.<turn|>\n" +
				"<|turn>user\nWhat is the capital of France?<turn|>\n" +
				"<|turn>model\nParis.<turn|>\n" +
				"<|turn>user\nAnd of Italy?<turn|>\n" +
				"<|turn>model\n<|channel>thought\n<channel|>"},
		{"no generation prompt", conversation[1:2], Options{BOS: "<bos>"},
			"<bos><|turn>user\nWhat is the capital of France?<turn|>\n"},
		{"thinking, earlier thoughts cut", thought, Options{BOS: "<bos>", AddGenerationPrompt: true, Vars: map[string]any{"enable_thinking": true}},
			"<bos><|turn>system\n<|think|>\nYou are a concise assistant.<turn|>\n" +
				"<|turn>user\nWhat is the capital of France?<turn|>\n" +
				"<|turn>model\nParis.<turn|>\n" +
				"<|turn>user\nAnd of Italy?<turn|>\n" +
				"<|turn>model\n"},
		{"thinking without a system message", conversation[3:], Options{BOS: "<bos>", AddGenerationPrompt: true, Vars: map[string]any{"enable_thinking": true}},
			"<bos><|turn>system\n<|think|>\n<turn|>\n<|turn>user\nAnd of Italy?<turn|>\n<|turn>model\n"},
		{"tools, a call and its response", toolTurns, Options{BOS: "<bos>", AddGenerationPrompt: true, Tools: weather},
			"<bos><|turn>system\n" + weatherDecl + "<turn|>\n" +
				"<|turn>user\nWeather in Paris?<turn|>\n" +
				"<|turn>model\n" + `<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>` +
				`<|tool_response>response:get_weather{value:<|"|>{"temp": 21}<|"|>}<tool_response|>`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tpl.Render(tc.msgs, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("rendered\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
