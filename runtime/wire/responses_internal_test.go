package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// Input items become the template's messages: an assistant's turn is its
// run of reasoning, message and calls; outputs are tool messages.
func TestInputMessages(t *testing.T) {
	args := `{"city":"Paris"}`
	call := func(id string) InputItem {
		return InputItem{Type: "function_call", CallID: id, Name: "get_weather", Arguments: &args}
	}
	text := func(role, s string) InputItem {
		b, _ := json.Marshal(s)
		return InputItem{Type: "message", Role: role, Content: b}
	}
	reasoning := InputItem{Type: "reasoning", Content: json.RawMessage(`[{"type":"reasoning_text","text":"hm"}]`)}
	paris := map[string]any{"city": "Paris"}
	for _, tc := range []struct {
		name  string
		items []InputItem
		want  []chat.Message
	}{
		{"roles", []InputItem{text("developer", "Be brief."), {Role: "user", Content: json.RawMessage(`[{"type":"input_text","text":"Hi"},{"type":"input_text","text":"!"}]`)}},
			[]chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi!"}}},
		{"a turn: reasoning, text, calls", []InputItem{text("user", "Q"), reasoning, text("assistant", "Let me see."), call("c1"), call("c2"),
			{Type: "function_call_output", CallID: "c1", Output: json.RawMessage(`"21"`)}, {Type: "function_call_output", CallID: "c2", Output: json.RawMessage(`[{"type":"input_text","text":"22"}]`)}},
			[]chat.Message{{Role: "user", Content: "Q"}, {Role: "assistant", Content: "Let me see.", Reasoning: "hm",
				ToolCalls: []chat.ToolCall{{ID: "c1", Name: "get_weather", Arguments: paris}, {ID: "c2", Name: "get_weather", Arguments: paris}}},
				{Role: "tool", ToolCallID: "c1", Content: "21"}, {Role: "tool", ToolCallID: "c2", Content: "22"}}},
		{"a message after calls is a new turn", []InputItem{call("c1"), text("assistant", "Done."), text("assistant", "More.")},
			[]chat.Message{{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "get_weather", Arguments: paris}}},
				{Role: "assistant", Content: "Done."}, {Role: "assistant", Content: "More."}}},
		{"reasoning after text is a new turn", []InputItem{text("assistant", "A"), reasoning, {Type: "message", Role: "assistant", Content: json.RawMessage(`[{"type":"output_text","text":"B","annotations":[]}]`)}},
			[]chat.Message{{Role: "assistant", Content: "A"}, {Role: "assistant", Content: "B", Reasoning: "hm"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := InputMessages(tc.items)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	bad := `{}`
	for _, tc := range []struct {
		item InputItem
		want string
	}{
		{InputItem{Type: "message", Role: "tool", Content: json.RawMessage(`"x"`)}, "role"},
		{InputItem{Type: "message", Role: "user", Content: json.RawMessage(`[{"type":"input_image","file_id":"x"}]`)}, "without its image_url"},
		{InputItem{Type: "message", Role: "user", Content: json.RawMessage(`[{"type":"input_file","file_id":"x"}]`)}, "takes text and"},
		{InputItem{Type: "message", Role: "user", Content: json.RawMessage(`[{"type":"input_image","image_url":"x"}]`)}, ""}, // decoded later, with the server's limits
		{InputItem{Type: "message", Role: "user", Content: json.RawMessage(`[{"type":"input_text"}]`)}, "without its text"},
		{InputItem{Type: "message", Role: "user", Content: json.RawMessage(`{"a":1}`)}, "content parts"},
		{InputItem{Type: "function_call", Name: "f"}, "call_id"},
		{InputItem{Type: "function_call", CallID: "c", Name: "f", Arguments: new(string)}, ""}, // empty arguments are {}
		{InputItem{Type: "function_call", CallID: "c", Name: "f", Arguments: &args}, ""},
		{InputItem{Type: "function_call", CallID: "c", Name: "f", Arguments: func() *string { s := "[1]"; return &s }()}, "JSON object"},
		{InputItem{Type: "function_call", CallID: "c", Name: "f", Arguments: func() *string { s := "null"; return &s }()}, "JSON object"},
		{InputItem{Type: "function_call_output", Output: json.RawMessage(`"x"`)}, "call_id"},
		{InputItem{Type: "reasoning", Content: json.RawMessage(`[{"type":"input_text","text":"x"}]`)}, "reasoning_text"},
		{InputItem{Type: "item_reference"}, "item_reference"},
		{InputItem{Type: "web_search_call"}, "web_search_call"},
		{InputItem{Type: "message", Role: "user", Content: json.RawMessage(bad)}, "content parts"},
	} {
		_, _, err := InputMessages([]InputItem{tc.item})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.item, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: error %v, want one about %q", tc.item, err, tc.want)
		case err != nil:
			if pe, ok := err.(*ParamError); !ok || pe.Param != "input" || !errors.Is(err, runtime.ErrBadRequest) {
				t.Errorf("%+v: %#v is not a bad request about input", tc.item, err)
			}
		}
	}
}
