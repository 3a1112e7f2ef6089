//go:build js

package main

import (
	"syscall/js"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime/wire"
	"github.com/tessera-llm/tessera/runtime/wire/wiretest"
)

// TestBadSamplingAsEveryHome: generate's options, as index.js sends an
// OpenAI-shaped completion (options.request), refuse the requests of
// wiretest.BadSampling naming the field in the words the server and the
// plugin host use for them too (their own tests run the same table). It
// runs under Node (GOOS=js go test, with go_js_wasm_exec on the PATH).
func TestBadSamplingAsEveryHome(t *testing.T) {
	for _, c := range wiretest.BadSampling {
		opts := js.ValueOf(map[string]any{"request": `{"prompt": "Once", ` + c.Fields + `}`})
		_, _, err := samplingRequest(opts, false)
		pe, ok := wire.AsParam(err)
		if !ok || pe.Param != c.Param || pe.Msg != c.Msg {
			t.Errorf("%s: refused with %v, want %s: %q", c.Name, err, c.Param, c.Msg)
		}
	}
	opts := js.ValueOf(map[string]any{"request": `{"prompt": "Once", "max_tokens": 1, ` + wiretest.Unknown + `}`})
	if _, _, err := samplingRequest(opts, false); err != nil {
		t.Errorf("a request with an unknown field: %v", err)
	}
}

// TestLowLevelOptions: the low-level options are checked by the same
// function, naming the option as the page spells it, and keep their
// defaults (greedy, 256 tokens, repeatPenalty 1 over 64 tokens).
func TestLowLevelOptions(t *testing.T) {
	req, n, err := samplingRequest(js.ValueOf(map[string]any{"seed": 3}), false)
	if err != nil || n != 1 || req.MaxTokens != 256 || req.Sampler.Temperature != 0 || req.Sampler.Seed != 3 || req.Sampler.RepeatLastN != 64 {
		t.Errorf("defaults: %+v n=%d %v", req, n, err)
	}
	for _, c := range []struct {
		opts       map[string]any
		param, msg string
	}{
		{map[string]any{"temperature": 5}, "temperature", "temperature must be between 0 and 2, not 5"},
		{map[string]any{"topP": 1.5}, "topP", "topP must be between 0 and 1, not 1.5"},
		{map[string]any{"topK": -2}, "topK", "topK must be -1 or 0 (off) or positive, not -2"},
		{map[string]any{"maxTokens": 0}, "maxTokens", "maxTokens must be at least 1, not 0"},
		{map[string]any{"repeatPenalty": 20}, "repeatPenalty", "repeatPenalty must be between 0 and 10, not 20"},
		{map[string]any{"repeatLastN": -1}, "repeatLastN", "repeatLastN must be at least 0, not -1"},
	} {
		_, _, err := samplingRequest(js.ValueOf(c.opts), false)
		if pe, ok := wire.AsParam(err); !ok || pe.Param != c.param || pe.Msg != c.msg {
			t.Errorf("%v: refused with %v, want %s: %q", c.opts, err, c.param, c.msg)
		}
	}
}

// TestBadChatAsEveryHome: a {messages} input of generate, read as
// generate reads it (readChat, then its tools for the model's format),
// refuses the requests of wiretest.BadChat as the server does.
func TestBadChatAsEveryHome(t *testing.T) {
	for _, c := range wiretest.BadChat {
		in := js.Global().Get("JSON").Call("parse", `{`+c.Fields+`}`)
		_, chatIn, err := readChat(in)
		if err == nil {
			_, _, err = chatIn.ChatTools(chat.Hermes)
		}
		pe, ok := wire.AsParam(err)
		if !ok || pe.Param != c.Param || pe.Msg != c.Msg {
			t.Errorf("%s: refused with %v, want %s: %q", c.Name, err, c.Param, c.Msg)
		}
	}
}
