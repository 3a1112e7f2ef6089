package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
)

// writeBlocks runs a Hermes+think reply through a parser fed in pieces
// of n bytes (0: whole) and a blockWriter, and returns the content and
// the names of the events the stream would send.
func writeBlocks(t *testing.T, reply string, n int) ([]anthropicContent, []string) {
	t.Helper()
	f := chat.ReplyFormatOf(mustTemplate(t, "{{ '<think>' }}"))
	p := f.NewParser(chat.ParseOptions{Tools: true, Reasoning: true})
	var names []string
	w := &blockWriter{open: -1, callID: func(k int, _ string) string { return fmt.Sprintf("toolu_%d", k) },
		emit: func(name string, v any) error {
			if d, ok := v.(anthropicEvent).Delta.(anthropicDelta); ok {
				name = d.Type
			}
			if len(names) == 0 || names[len(names)-1] != name {
				names = append(names, name)
			}
			return nil
		}}
	for len(reply) > 0 {
		k := len(reply)
		if n > 0 {
			k = min(n, k)
		}
		if err := w.add(p.Feed(reply[:k])); err != nil {
			t.Fatal(err)
		}
		reply = reply[k:]
	}
	last, _ := p.Close()
	w.add(last)
	w.stop()
	return w.content(), names
}

func mustTemplate(t *testing.T, src string) *chat.Template {
	t.Helper()
	tpl, err := chat.New(src)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// TestBlockWriter: a reply's blocks are the same whole and fed a byte at
// a time; whitespace around a part never makes a block and is trimmed
// from a block's ends, whitespace inside is kept; a call's block holds
// its arguments, or {} when they were cut off.
func TestBlockWriter(t *testing.T) {
	call := "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>"
	for _, tc := range []struct {
		reply  string
		want   string // the blocks, type:text or type:name(input), joined by |
		events string
	}{
		{"Hello", "text:Hello", "content_block_start text_delta content_block_stop"},
		{"\n\n  Hello,\n  world.  \n\n", "text:Hello,\n  world.", "content_block_start text_delta content_block_stop"},
		{"  \n ", "", ""},
		{"<think>\nWhy?\n</think>\n\nBecause.", "thinking:Why?|text:Because.",
			"content_block_start thinking_delta content_block_stop content_block_start text_delta content_block_stop"},
		{"<think>\n\n</think>\n\nOnly text.", "text:Only text.", "content_block_start text_delta content_block_stop"},
		{"<think>Hm.</think>\n\n" + call + "\n" + call, `thinking:Hm.|tool_use:f({"a": 1})|tool_use:f({"a": 1})`,
			"content_block_start thinking_delta content_block_stop content_block_start input_json_delta content_block_stop content_block_start input_json_delta content_block_stop"},
		{"Let me look.\n" + call, `text:Let me look.|tool_use:f({"a": 1})`,
			"content_block_start text_delta content_block_stop content_block_start input_json_delta content_block_stop"},
		{"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": ", "tool_use:f({})", "content_block_start input_json_delta content_block_stop"},
	} {
		for _, n := range []int{0, 1, 3} {
			content, events := writeBlocks(t, tc.reply, n)
			var got []string
			for _, b := range content {
				switch b.Type {
				case "text":
					got = append(got, "text:"+*b.Text)
				case "thinking":
					got = append(got, "thinking:"+*b.Thinking)
					if b.Signature == nil {
						t.Errorf("%q: a thinking block without a signature", tc.reply)
					}
				case "tool_use":
					got = append(got, fmt.Sprintf("tool_use:%s(%s)", b.Name, b.Input))
					if !json.Valid(b.Input) {
						t.Errorf("%q: input %q", tc.reply, b.Input)
					}
				}
			}
			// A byte at a time, the deltas of a block come apart: the
			// events are compared with repeats merged.
			if g := strings.Join(got, "|"); g != tc.want || strings.Join(events, " ") != tc.events {
				t.Errorf("%q in pieces of %d: blocks %q, events %q; want %q, %q", tc.reply, n, g, strings.Join(events, " "), tc.want, tc.events)
			}
		}
	}
}

// TestAnthropicErrorTypes: each status the server answers has
// Anthropic's type for it.
func TestAnthropicErrorTypes(t *testing.T) {
	want := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
		408: "invalid_request_error", 413: "request_too_large", 429: "rate_limit_error", 499: "invalid_request_error",
		500: "api_error", 503: "overloaded_error", 504: "timeout_error"}
	got := map[int]string{}
	for status := range want {
		e := anthropicErrorBody(&httpError{status: status, msg: "m"})
		if e.Type != "error" || e.Error.Message != "m" {
			t.Errorf("%d: %+v", status, e)
		}
		got[status] = e.Error.Type
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("types %v, want %v", got, want)
	}
}
