package runtime_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/grammar"
)

// tinyQwen3Chat is a random model at a tiny Qwen3 shape with the real
// Qwen3 tokenizer and chat template (which reasons in <think>).
func tinyQwen3Chat(t *testing.T) *runtime.Engine {
	t.Helper()
	eng, err := runtime.LoadModel(tinyQwen3ChatModel(t), runtime.Options{Device: "cpu", Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// tinyQwen3ChatModel is tinyQwen3Chat's file, read from memory as the
// browser reads a Blob.
func tinyQwen3ChatModel(t *testing.T) *models.Model {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "tokenizers", "qwen3")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("shared tokenizers not found: %v", err)
	}
	shape, err := synth.Lookup("tiny-qwen3")
	if err != nil {
		t.Fatal(err)
	}
	shape.Config.Vocab = 151936
	tok, err := synth.HFTokenizer(dir, "qwen2", shape.Config.Vocab)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := synth.WriteWith(&buf, shape, dtype.F16, 1, tok); err != nil {
		t.Fatal(err)
	}
	m, err := models.OpenReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "qwen3-chat.gguf")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scripted is the grammar of exactly text: a random model constrained by
// it writes text, token by token, as a trained one would.
func scripted(t *testing.T, text string) *grammar.Grammar {
	t.Helper()
	g, err := grammar.Parse("root ::= " + grammar.Quote(text) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestReplyReader: a Go program reads a Qwen3 reply's reasoning, text and
// tool call as they come, the call's name before its arguments have all
// been generated; with enable_thinking false the template closes the
// reasoning itself and the reply is text.
func TestReplyReader(t *testing.T) {
	eng := tinyQwen3Chat(t)
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
	msgs := []chat.Message{{Role: "user", Content: "Weather in Paris?"}}
	for _, tc := range []struct {
		name   string
		vars   map[string]any
		script string
		want   chat.Reply
	}{
		{"reasoning and a call", nil,
			"<think>\nThe user wants the weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			chat.Reply{Reasoning: "The user wants the weather.", Calls: []chat.ReplyCall{{Name: "get_weather", Arguments: `{"city": "Paris"}`}}}},
		{"reasoning and text", nil, "<think>\nEasy.\n</think>\n\nIt is sunny.", chat.Reply{Reasoning: "Easy.", Text: "\n\nIt is sunny."}},
		{"no thinking", map[string]any{"enable_thinking": false}, "It is sunny in Paris.", chat.Reply{Text: "It is sunny in Paris."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := runtime.Request{Messages: msgs, Tools: tools, TemplateVars: tc.vars, MaxTokens: 200, Constraint: scripted(t, tc.script)}
			prompt, err := eng.PromptTokens(req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.vars != nil && !strings.Contains(eng.Tokenizer().Decode(toInts(prompt)), "<think>\n\n</think>") {
				t.Fatalf("enable_thinking false did not reach the template")
			}
			r := eng.NewReplyReader(eng.ReplyOptions(req, prompt))
			st, err := eng.Start(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var evs []chat.ReplyEvent
			callAt, lastArgs, n := -1, -1, 0
			for tok, err := range st.Tokens() {
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range r.Next(tok) {
					switch e.Kind {
					case chat.EventCall:
						callAt = n
					case chat.EventArgs:
						lastArgs = n
					}
					evs = append(evs, e)
				}
				n++
			}
			last, reply := r.Close()
			evs = append(evs, last...)
			if !st.Stats().Complete {
				t.Fatalf("the scripted reply did not complete: %+v", st.Stats())
			}
			if reply.Reasoning != tc.want.Reasoning || reply.Text != tc.want.Text || len(reply.Calls) != len(tc.want.Calls) {
				t.Fatalf("reply %+v, want %+v", reply, tc.want)
			}
			for k, c := range reply.Calls {
				if c.Name != tc.want.Calls[k].Name || c.Arguments != tc.want.Calls[k].Arguments {
					t.Errorf("call %d: %+v, want %+v", k, c, tc.want.Calls[k])
				}
			}
			if len(tc.want.Calls) > 0 && !(callAt >= 0 && callAt < lastArgs) {
				t.Errorf("the call was named at token %d, its last arguments came at %d: not streamed", callAt, lastArgs)
			}
			if len(evs) < 2 {
				t.Errorf("%d events for the whole reply: not streamed", len(evs))
			}
		})
	}
}

func toInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
