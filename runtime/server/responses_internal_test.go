package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// The store keeps at most its count and its bytes, dropping the least
// recently used (a get uses one); a response larger than the store is not
// kept; delete drops one.
func TestResponseStoreBounds(t *testing.T) {
	entry := func(id string, n int) *storedResponse {
		return &storedResponse{id: id, body: []byte(strings.Repeat("b", n)), history: []byte("[]")}
	}
	size := entry("a", 100).size() // every id below is one letter
	for _, tc := range []struct {
		name     string
		count    int
		bytes    int64
		ops      []string // put:ID, get:ID, del:ID, big:ID (larger than the store)
		want     []string // kept, the most recently used first
		wantMiss []string
	}{
		{"count", 2, 1 << 20, []string{"put:a", "put:b", "put:c"}, []string{"c", "b"}, []string{"a"}},
		{"bytes", 10, 2 * size, []string{"put:a", "put:b", "put:c"}, []string{"c", "b"}, []string{"a"}},
		{"a get keeps it", 2, 1 << 20, []string{"put:a", "put:b", "get:a", "put:c"}, []string{"c", "a"}, []string{"b"}},
		{"delete", 3, 1 << 20, []string{"put:a", "put:b", "del:a"}, []string{"b"}, []string{"a"}},
		{"too large", 3, 2 * size, []string{"put:a", "big:b"}, []string{"a"}, []string{"b"}},
		{"put twice", 3, 1 << 20, []string{"put:a", "put:b", "put:a"}, []string{"a", "b"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newResponseStore(tc.count, tc.bytes)
			for _, op := range tc.ops {
				verb, id, _ := strings.Cut(op, ":")
				switch verb {
				case "put":
					if !st.put(entry(id, 100)) {
						t.Fatalf("%s: not kept", op)
					}
				case "big":
					if st.put(entry(id, int(tc.bytes))) {
						t.Fatalf("%s: kept", op)
					}
				case "get":
					if _, ok := st.get(id); !ok {
						t.Fatalf("%s: missing", op)
					}
				case "del":
					if !st.delete(id) || st.delete(id) {
						t.Fatalf("%s: not deleted once", op)
					}
				}
			}
			var got []string
			for e := st.order.Front(); e != nil; e = e.Next() {
				got = append(got, e.Value.(*storedResponse).id)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
			for _, id := range tc.wantMiss {
				if _, ok := st.get(id); ok {
					t.Errorf("%s is still kept", id)
				}
			}
			n, b := st.usage()
			if n != len(tc.want) || b != int64(n)*size || n > tc.count || b > tc.bytes {
				t.Errorf("usage %d responses, %d bytes; want %d of %d bytes each", n, b, len(tc.want), size)
			}
		})
	}
}

// The output: a reasoning and a message without the whitespace around
// them, calls with their arguments; the reasoning's tokens are those up
// to its closing marker; streamed, every item is added, written and done.
func TestOutputBuilder(t *testing.T) {
	b := &outputBuilder{stream: true, format: chat.Hermes, callPrefix: "call_x"}
	// One token per piece, as a reply is read.
	for _, evs := range [][]chat.ReplyEvent{
		nil, // <think>
		{{Kind: chat.EventReasoning, Text: "\n"}},
		{{Kind: chat.EventReasoning, Text: "Sunny"}},
		{{Kind: chat.EventReasoning, Text: ".\n"}},
		nil, // </think>
		{{Kind: chat.EventText, Text: "\n\n"}},
		{{Kind: chat.EventText, Text: "Yes"}},
		{{Kind: chat.EventText, Text: " \n"}},
		{{Kind: chat.EventText, Text: "it is."}},
		{{Kind: chat.EventText, Text: "\n"}},
		{{Kind: chat.EventCall, Call: 0, Name: "f"}},
		{{Kind: chat.EventArgs, Call: 0, Text: `{"a":`}},
		{{Kind: chat.EventArgs, Call: 0, Text: `1}`}},
		{{Kind: chat.EventText, Text: "\n"}},
		{{Kind: chat.EventCall, Call: 1, Name: "g"}},
	} {
		b.read(runtime.Token{ID: 1}, evs)
	}
	b.finish(runtime.Stats{StoppedAtEOS: true})
	out, _ := json.Marshal(b.output())
	var items []map[string]any
	json.Unmarshal(out, &items)
	want := []string{"reasoning Sunny.", "message Yes \nit is.", `function_call f {"a":1}`, "function_call g {}"}
	if len(items) != len(want) {
		t.Fatalf("output %s", out)
	}
	for i, it := range items {
		var got string
		switch it["type"] {
		case "reasoning":
			got = "reasoning " + it["content"].([]any)[0].(map[string]any)["text"].(string)
		case "message":
			got = "message " + it["content"].([]any)[0].(map[string]any)["text"].(string)
		case "function_call":
			got = fmt.Sprintf("function_call %s %s", it["name"], it["arguments"])
			if it["call_id"] != fmt.Sprintf("call_x-%d", i-2) {
				t.Errorf("call id %v", it["call_id"])
			}
		}
		if got != want[i] || it["status"] != "completed" {
			t.Errorf("item %d: %q (%v), want %q", i, got, it["status"], want[i])
		}
	}
	if n := b.reasoningTokens(); n != 5 {
		t.Errorf("%d reasoning tokens, want 5 (<think> to </think>)", n)
	}
	var types []string
	for i, ev := range b.queue {
		if ev["sequence_number"] != i {
			t.Fatalf("event %d has sequence_number %v", i, ev["sequence_number"])
		}
		if name := ev["type"].(string); len(types) == 0 || types[len(types)-1] != name {
			types = append(types, name)
		}
	}
	wantTypes := "response.output_item.added response.content_part.added response.reasoning_text.delta response.reasoning_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.content_part.added response.output_text.delta response.output_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.done response.output_item.done"
	if got := strings.Join(types, " "); got != wantTypes {
		t.Errorf("events\n%s\nwant\n%s", got, wantTypes)
	}
	// Nothing but whitespace: an empty message.
	empty := &outputBuilder{stream: true, format: chat.Hermes}
	empty.read(runtime.Token{ID: 1}, []chat.ReplyEvent{{Kind: chat.EventText, Text: "\n "}})
	empty.finish(runtime.Stats{StoppedAtEOS: true})
	if out := empty.output(); len(out) != 1 || out[0].(messageItem).Content[0].Text != "" || len(empty.queue) != 5 { // added, part added, text done, part done, done
		t.Errorf("an empty reply: %+v in %d events", out, len(empty.queue))
	}
	// Cut short: the item being written is incomplete.
	cut := &outputBuilder{format: chat.Hermes}
	cut.read(runtime.Token{ID: 1}, []chat.ReplyEvent{{Kind: chat.EventReasoning, Text: "hm"}})
	cut.finish(runtime.Stats{})
	if it := cut.output()[0].(reasoningItem); it.Status != "incomplete" || cut.reasoningTokens() != 1 {
		t.Errorf("cut short: %+v, %d reasoning tokens", it, cut.reasoningTokens())
	}
	// Cut short before the reasoning's first character ("<think>" and a
	// newline): the reasoning, empty, not a message.
	blank := &outputBuilder{format: chat.Hermes}
	blank.read(runtime.Token{ID: 1}, nil)
	blank.read(runtime.Token{ID: 2}, []chat.ReplyEvent{{Kind: chat.EventReasoning, Text: "\n"}})
	blank.finish(runtime.Stats{})
	if out := blank.output(); len(out) != 1 {
		t.Errorf("cut short in blank reasoning: %+v", out)
	} else if it, ok := out[0].(reasoningItem); !ok || it.Status != "incomplete" || it.Content[0].Text != "" || blank.reasoningTokens() != 2 {
		t.Errorf("cut short in blank reasoning: %+v, %d reasoning tokens", out[0], blank.reasoningTokens())
	}
	// Ended (not cut) in blank reasoning: still the empty message.
	ended := &outputBuilder{format: chat.Hermes}
	ended.read(runtime.Token{ID: 1}, []chat.ReplyEvent{{Kind: chat.EventReasoning, Text: "\n"}})
	ended.finish(runtime.Stats{StoppedAtEOS: true})
	if out := ended.output(); len(out) != 1 {
		t.Errorf("ended in blank reasoning: %+v", out)
	} else if _, ok := out[0].(messageItem); !ok {
		t.Errorf("ended in blank reasoning: %+v", out[0])
	}
}

// A streamed choice's text carries the pieces of the control tokens it
// keeps, as its whole text does, so that a streamed reply is parsed
// alike.
func TestAddAllKeepsMarks(t *testing.T) {
	c := &choice{marks: map[int32]string{5: "[TOOL_CALLS]"}}
	var read []int32
	c.read = func(tok runtime.Token) { read = append(read, tok.ID) }
	text, _ := c.addAll([]runtime.Token{{ID: 5}, {ID: 40, Text: ` [{"name": "f"}]`}}, false, nil)
	if text != `[TOOL_CALLS] [{"name": "f"}]` || text != c.text.String() || !reflect.DeepEqual(read, []int32{5, 40}) {
		t.Errorf("streamed %q, whole %q, read %v", text, c.text.String(), read)
	}
}
