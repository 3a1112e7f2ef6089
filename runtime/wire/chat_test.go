package wire_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// A request's fields either read into the engine's terms or are refused
// as a bad request naming the field.
func TestRead(t *testing.T) {
	type body struct {
		Messages           []wire.Message  `json:"messages"`
		Tools              []wire.Tool     `json:"tools"`
		ToolChoice         json.RawMessage `json:"tool_choice"`
		ChatTemplateKwargs map[string]any  `json:"chat_template_kwargs"`
		ReasoningEffort    string          `json:"reasoning_effort"`
	}
	weather := `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}`
	for _, tt := range []struct {
		name, json, param string // param "": read
		required          int
	}{
		{"plain", `{"messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`, "", 0},
		{"tool loop", `{"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"reasoning_content":"r","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"21"}],"tools":[` + weather + `]}`, "", 0},
		{"required", `{"messages":[{"role":"user","content":"x"}],"tools":[` + weather + `],"tool_choice":"required"}`, "", 1},
		{"named", `{"messages":[{"role":"user","content":"x"}],"tools":[` + weather + `],"tool_choice":{"type":"function","function":{"name":"get_weather"}}}`, "", 1},
		{"kwargs", `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false},"reasoning_effort":"high"}`, "", 0},
		{"no messages", `{"messages":[]}`, "messages", 0},
		{"bad role", `{"messages":[{"role":"robot","content":"x"}]}`, "messages", 0},
		{"image part", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages", 0},
		{"text part without text", `{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages", 0},
		{"arguments no object", `{"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages", 0},
		{"kwargs replace messages", `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"messages":[]}}`, "chat_template_kwargs", 0},
		{"effort", `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"max"}`, "reasoning_effort", 0},
		{"choice without tools", `{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`, "tool_choice", 0},
		{"unknown choice", `{"messages":[{"role":"user","content":"x"}],"tools":[` + weather + `],"tool_choice":"always"}`, "tool_choice", 0},
		{"named missing", `{"messages":[{"role":"user","content":"x"}],"tools":[` + weather + `],"tool_choice":{"type":"function","function":{"name":"other"}}}`, "tool_choice", 0},
		{"bad tool name", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a b"}}]}`, "tools", 0},
		{"not a function", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search"}]}`, "tools", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b body
			err := json.Unmarshal([]byte(tt.json), &b)
			var msgs []chat.Message
			if err == nil {
				msgs, err = wire.ChatMessages(b.Messages)
			}
			if err == nil {
				_, err = wire.TemplateVars(b.ChatTemplateKwargs, b.ReasoningEffort)
			}
			var ct runtime.ChatTools
			if err == nil {
				_, ct, err = wire.Tools(b.Tools, b.ToolChoice, true, chat.Hermes)
			}
			if tt.param == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(ct.Required) != tt.required || len(msgs) != len(b.Messages) {
					t.Errorf("%d required, %d messages", len(ct.Required), len(msgs))
				}
				return
			}
			pe, ok := wire.AsParam(err)
			if !ok || pe.Param != tt.param || !errors.Is(err, runtime.ErrBadRequest) {
				t.Errorf("%v, want a bad request about %q", err, tt.param)
			}
		})
	}
}

// A tool loop's assistant message reads back as the template takes it.
func TestChatMessages(t *testing.T) {
	var ms []wire.Message
	json.Unmarshal([]byte(`[{"role":"assistant","content":null,"reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]`), &ms)
	got, err := wire.ChatMessages(ms)
	if err != nil {
		t.Fatal(err)
	}
	a := got[0]
	if a.Role != "assistant" || a.Reasoning != "think" || len(a.ToolCalls) != 1 || a.ToolCalls[0].Name != "f" || a.ToolCalls[0].Arguments["a"] != 1.0 ||
		got[1].Role != "tool" || got[1].ToolCallID != "c1" || got[1].Content != "ok" {
		t.Errorf("%+v", got)
	}
}
