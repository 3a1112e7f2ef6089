package server

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/tokenizer"
)

// toolFormat is how a model family writes tool calls in a reply: the JSON
// of one call, the text around the calls, and how to find them again.
// Which one a model uses is read from its chat template, the way
// llama.cpp picks its parsers: a template that renders [TOOL_CALLS] is
// Mistral's, one that renders <|python_tag|> and "parameters" Llama 3.1's,
// and everything else (Qwen, Hermes and the plain format) writes
// <tool_call> blocks.
type toolFormat struct {
	name string
	// argsKey is the key of a call's arguments.
	argsKey string
	// marker is the control token that starts a reply's calls ("" when
	// none). It writes no text, so a reply's text is parsed with the
	// marker's piece put back where the token came.
	marker string
	// prefill puts the marker at the end of the prompt when calls are
	// required: a grammar over bytes cannot produce a control token, so
	// the reply starts after it and the grammar shapes the rest.
	prefill bool
	// single: one call per reply (Llama 3.1's template renders no more).
	single bool
	// id is the JSON Schema of an "id" a call may carry, "" for none.
	id string
	// root is the GBNF of a constrained reply over rule tool-call, with
	// up to more calls after the first.
	root func(more int) string
	// split finds the calls in a reply: the JSON of each, and the text
	// around them. ok is false when the reply makes no call.
	split func(text string) (calls []json.RawMessage, rest string, ok bool)
}

// toolFormatOf is the tool format of a model's chat renderer.
func toolFormatOf(r chat.Renderer) toolFormat {
	t, ok := r.(*chat.Template)
	if !ok {
		return qwenTools
	}
	src := t.Source()
	switch {
	case strings.Contains(src, "[TOOL_CALLS]"):
		return mistralTools
	case strings.Contains(src, "<|python_tag|>") || strings.Contains(src, "ipython") && strings.Contains(src, `"parameters"`):
		return llama3Tools
	}
	return qwenTools
}

// qwenTools: Qwen 2.5/3 (and Hermes) write each call as
// <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>, one block
// after another.
var qwenTools = toolFormat{
	name:    "qwen",
	argsKey: "arguments",
	root: func(more int) string {
		return fmt.Sprintf(`"<tool_call>\n" tool-call "\n</tool_call>" ( "\n<tool_call>\n" tool-call "\n</tool_call>" ){0,%d}`, more)
	},
	split: func(text string) ([]json.RawMessage, string, bool) {
		var calls []json.RawMessage
		rest := qwenCallRE.ReplaceAllStringFunc(text, func(block string) string {
			inner := qwenCallRE.FindStringSubmatch(block)[1]
			if !isCall(inner, "arguments") {
				return block // not a call: it stays in the text
			}
			calls = append(calls, json.RawMessage(inner))
			return ""
		})
		return calls, rest, len(calls) > 0
	},
}

var qwenCallRE = regexp.MustCompile(`(?s)<tool_call>\s*(.*?)\s*</tool_call>`)

// llama3Tools: Llama 3.1, 3.2 and 3.3 answer a call to a custom tool with
// the reply {"name": ..., "parameters": {...}} alone (then <|eot_id|>),
// sometimes after <|python_tag|>, which is also what starts a call to a
// built-in tool. Their template renders one call per assistant message.
// A reply of several calls separated by ";" (which the 3.2 models write
// at times) is parsed too.
var llama3Tools = toolFormat{
	name:    "llama3",
	argsKey: "parameters",
	marker:  "<|python_tag|>",
	single:  true,
	root:    func(int) string { return "tool-call" },
	split: func(text string) ([]json.RawMessage, string, bool) {
		body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "<|python_tag|>"))
		if !strings.HasPrefix(body, "{") {
			return nil, text, false
		}
		var calls []json.RawMessage
		dec := json.NewDecoder(strings.NewReader(body))
		for {
			var raw json.RawMessage
			if dec.Decode(&raw) != nil || !isCall(string(raw), "parameters", "arguments") {
				return nil, text, false
			}
			calls = append(calls, raw)
			tail := strings.TrimSpace(body[dec.InputOffset():])
			if tail == "" {
				return calls, "", true
			}
			if !strings.HasPrefix(tail, ";") {
				return nil, text, false
			}
			body = strings.TrimSpace(tail[1:])
			dec = json.NewDecoder(strings.NewReader(body))
		}
	},
}

// mistralTools: Mistral's v3 tokenizer (Mistral 7B Instruct v0.3, Nemo,
// Small) answers [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...],
// [TOOL_CALLS] being a control token; its template renders each call
// back with an "id" of nine letters and digits, and refuses others.
var mistralTools = toolFormat{
	name:    "mistral",
	argsKey: "arguments",
	marker:  "[TOOL_CALLS]",
	prefill: true,
	id:      `{"type":"string","pattern":"^[a-zA-Z0-9]{9}$"}`,
	root: func(more int) string {
		return fmt.Sprintf(`" "? "[" tool-call ( ", " tool-call ){0,%d} "]"`, more)
	},
	split: func(text string) ([]json.RawMessage, string, bool) {
		i := strings.Index(text, "[TOOL_CALLS]")
		if i < 0 {
			return nil, text, false
		}
		after := text[i+len("[TOOL_CALLS]"):]
		dec := json.NewDecoder(strings.NewReader(after))
		var calls []json.RawMessage
		if dec.Decode(&calls) != nil || len(calls) == 0 {
			return nil, text, false
		}
		for _, c := range calls {
			if !isCall(string(c), "arguments") {
				return nil, text, false
			}
		}
		return calls, text[:i] + after[dec.InputOffset():], true
	},
}

// callSchema is the JSON Schema of a call of function name with the given
// parameters schema, in format f.
func (f toolFormat) callSchema(name string, params json.RawMessage) string {
	n, _ := json.Marshal(name)
	key, _ := json.Marshal(f.argsKey)
	props := fmt.Sprintf(`"name":{"const":%s},%s:%s`, n, key, params)
	if f.id != "" {
		props += `,"id":` + f.id
	}
	return fmt.Sprintf(`{"type":"object","properties":{%s},"required":["name",%s],"additionalProperties":false}`, props, key)
}

// isCall reports whether text is a JSON object with a string "name" and,
// if present, an object under one of the argument keys.
func isCall(text string, argsKeys ...string) bool {
	var c map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &c) != nil {
		return false
	}
	var name string
	if json.Unmarshal(c["name"], &name) != nil || name == "" {
		return false
	}
	for _, k := range argsKeys {
		if a, ok := c[k]; ok && !isNull(a) {
			var obj map[string]json.RawMessage
			return json.Unmarshal(a, &obj) == nil
		}
	}
	return true
}

// parse takes the calls out of a reply: the text left around them, and
// the calls in order, with ids made from idPrefix (or the model's own, in
// a format whose calls carry one). The marker's piece is left out of the
// text, which is trimmed when calls were taken out of it.
func (f toolFormat) parse(text, idPrefix string) (string, []toolCall) {
	raws, rest, ok := f.split(text)
	if f.marker != "" {
		rest = strings.ReplaceAll(rest, f.marker, "")
	}
	if !ok {
		return rest, nil
	}
	var calls []toolCall
	for k, raw := range raws {
		var c map[string]json.RawMessage
		json.Unmarshal(raw, &c) // split checked it
		var tc toolCall
		tc.Type = "function"
		json.Unmarshal(c["name"], &tc.Function.Name)
		tc.Function.Arguments = "{}"
		for _, key := range []string{f.argsKey, "arguments", "parameters"} {
			if a, ok := c[key]; ok && !isNull(a) {
				tc.Function.Arguments = string(a)
				break
			}
		}
		tc.ID = f.callID(idPrefix, k, c["id"])
		calls = append(calls, tc)
	}
	return strings.TrimSpace(rest), calls
}

// toolMarks maps the token of f's marker to its piece, when the
// vocabulary has the marker as one token.
func toolMarks(tok tokenizer.Tokenizer, f toolFormat) map[int32]string {
	if f.marker == "" {
		return nil
	}
	ids := tokenizer.EncodeSpecial(tok, f.marker, false)
	if len(ids) != 1 || len(tok.TokenBytes(-1, ids[0])) > 0 {
		return nil // no such control token: the marker, if written, is text
	}
	return map[int32]string{int32(ids[0]): f.marker}
}

var nineAlnum = regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)

// callID is the id of call k of a reply. Mistral's template accepts only
// nine letters and digits: the model's own id when it wrote one, else
// nine drawn from a hash of the prefix (unique per completion) and k.
func (f toolFormat) callID(prefix string, k int, model json.RawMessage) string {
	if f.id == "" {
		return fmt.Sprintf("%s-%d", prefix, k)
	}
	var id string
	if json.Unmarshal(model, &id) == nil && nineAlnum.MatchString(id) {
		return id
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s-%d", prefix, k)
	const digits = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	v := h.Sum64()
	b := make([]byte, 9)
	for i := range b {
		b[i] = digits[v%uint64(len(digits))]
		v /= uint64(len(digits))
	}
	return string(b)
}
