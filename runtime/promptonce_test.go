package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

// TestPromptEncodedOnce: a request renders and tokenizes its prompt once,
// however many of its readers need the tokens: the engine's own
// (PrepareChat then Start, as the browser runs a chat) and each of the
// server's chat dialects with logprobs (the first token's alternatives
// read the prompt's last token), transcripts, several samples, required
// tool calls (whose grammar and prefill depend on how the prompt ends)
// and a reasoning template (which reads whether the prompt opened a
// thought). Before, a chat with logprobs whose template neither reasons
// nor is held to calls encoded it twice (the server's lastTokens, then
// StartN; PrepareChat tokenized only for the other two), as did a
// completion with logprobs, and the engine's own PrepareChat, PromptTokens
// and Start.
func TestPromptEncodedOnce(t *testing.T) {
	plain := loadDevice(t, "cpu", sharedFile(t, "stories260K.gguf"), runtime.Options{})
	qwen := tinyQwen3Chat(t)
	if !qwen.ReplyFormat().Reasons() {
		t.Fatal("the Qwen3 template's reply format does not reason: the test would not cover PrepareChat's reading of the prompt")
	}
	ctx := context.Background()
	msgs := []chat.Message{{Role: "user", Content: "Tell me a story."}}
	for name, eng := range map[string]*runtime.Engine{"plain": plain, "qwen3": qwen} {
		before := eng.PromptEncodes()
		req, _, err := eng.PrepareChat(ctx, runtime.Request{Messages: msgs, MaxTokens: 2}, runtime.ChatTools{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.PromptTokens(req); err != nil { // as the browser reads them
			t.Fatal(err)
		}
		if _, err := eng.Generate(ctx, req, func(runtime.Token) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if n := eng.PromptEncodes() - before; n != 1 {
			t.Errorf("%s: PrepareChat, PromptTokens and Generate encoded the prompt %d times, want 1", name, n)
		}
	}

	tool := map[string]any{"type": "function", "function": map[string]any{"name": "tell", "description": "Tell a story.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}, "required": []string{"title"}}}}
	user := []map[string]any{{"role": "user", "content": "Tell me a story."}}
	for _, tc := range []struct {
		name, path string
		eng        *runtime.Engine
		body       map[string]any
	}{
		{"chat", "/v1/chat/completions", plain, map[string]any{"messages": user, "max_tokens": 3}},
		{"chat, logprobs", "/v1/chat/completions", plain, map[string]any{"messages": user, "max_tokens": 3, "logprobs": true, "top_logprobs": 2}},
		{"chat, logprobs, n=3, transcript", "/v1/chat/completions", plain, map[string]any{"messages": user, "max_tokens": 3, "logprobs": true, "n": 3, "transcript": true}},
		{"chat, streamed", "/v1/chat/completions", plain, map[string]any{"messages": user, "max_tokens": 3, "logprobs": true, "stream": true}},
		{"chat, reasoning template, logprobs", "/v1/chat/completions", qwen, map[string]any{"messages": user, "max_tokens": 3, "logprobs": true}},
		{"chat, required call", "/v1/chat/completions", qwen, map[string]any{"messages": user, "max_tokens": 3, "logprobs": true,
			"tools": []any{tool}, "tool_choice": "required"}},
		{"responses", "/v1/responses", qwen, map[string]any{"input": "Tell me a story.", "max_output_tokens": 3}},
		{"messages", "/v1/messages", qwen, map[string]any{"messages": user, "max_tokens": 3}},
		{"completions, logprobs", "/v1/completions", plain, map[string]any{"prompt": "Once upon a time", "max_tokens": 3, "logprobs": 2}},
		{"completions, echo, logprobs, transcript", "/v1/completions", plain, map[string]any{"prompt": "Once upon a time", "max_tokens": 3, "logprobs": 2,
			"echo": true, "transcript": true}},
		{"completions, two prompts, echo", "/v1/completions", plain, map[string]any{"prompt": []string{"Once upon a time", "The cat"}, "max_tokens": 2,
			"echo": true, "logprobs": 1, "n": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := server.New(server.Options{})
			if err := s.Add("m", tc.eng); err != nil {
				t.Fatal(err)
			}
			s.Ready()
			ts := httptest.NewServer(s)
			defer ts.Close()
			tc.body["model"] = "m"
			raw, err := json.Marshal(tc.body)
			if err != nil {
				t.Fatal(err)
			}
			before := tc.eng.PromptEncodes()
			resp, err := http.Post(ts.URL+tc.path, "application/json", bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, out)
			}
			want := int64(1)
			if ps, ok := tc.body["prompt"].([]string); ok {
				want = int64(len(ps)) // once each
			}
			if n := tc.eng.PromptEncodes() - before; n != want {
				t.Errorf("the request encoded its %d prompts %d times", want, n)
			}
		})
	}
}
