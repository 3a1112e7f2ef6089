package chat

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
)

// ReplyFormat is how a model family writes its replies: where its
// reasoning goes, and how it writes tool calls (and so how a grammar that
// requires calls is built). Which one a model uses is read from its chat
// template, the way llama.cpp picks its parsers (ReplyFormatOf).
type ReplyFormat struct {
	name string
	// think are the markers around reasoning ("" when the family writes
	// none in text).
	think [2]string
	// openers start calls in the text; newBody reads what follows one.
	openers []string
	newBody func(opener string) callBody
	// syntaxOf makes the parser's state machine; nil: tagged.
	syntaxOf func(f *ReplyFormat, o ParseOptions) syntax
	// always are control tokens every reply of the family is made of
	// (a channel format's), which the parser sees whatever it reads.
	always []string
	// inCalls are control tokens inside a call (Mistral v11's [ARGS],
	// DeepSeek's separators), which the parser sees when it reads calls.
	inCalls []string
	// reasons: the family reasons without think markers (harmony's
	// analysis channel).
	reasons bool
	// controlThink: the think markers are control tokens, which a grammar
	// cannot write (Magistral's [THINK]).
	controlThink bool
	// requireOne: a control token comes between a call's name and its
	// arguments, so Require can hold a reply to a single tool only.
	requireOne bool
	// require builds what Require returns; nil: requireJSONCalls.
	require func(f *ReplyFormat, o RequireOptions, g *gbnfSet) (prefill, body string, err error)

	argsKey  string // the key of a call's arguments in its JSON
	marker   string // the control token that starts a reply's calls, "" when none
	prefill  bool   // a required call starts after the marker, in the prompt
	single   bool   // one call per reply
	idSchema string // the JSON Schema of the id a call may carry, "" for none
	root     func(more int) string
}

func (f *ReplyFormat) syntax(o ParseOptions) syntax {
	if f.syntaxOf != nil {
		return f.syntaxOf(f, o)
	}
	t := &tagged{f: f, opts: o}
	if o.InReasoning && o.Reasoning && f.think[1] != "" {
		t.state = inReasoning
	}
	return t
}

// Name names the format ("hermes", "llama3", "mistral", ...).
func (f *ReplyFormat) Name() string { return f.name }

// Reasons reports whether the family writes reasoning in its replies.
func (f *ReplyFormat) Reasons() bool { return f.think[0] != "" || f.think[1] != "" || f.reasons }

// ArgsKey is the key under which a call's JSON holds its arguments.
func (f *ReplyFormat) ArgsKey() string { return f.argsKey }

// Marker is the control token that starts a reply's calls ("" when none).
// It writes no text, so a server puts its piece back into the text it
// parses (see Markers).
func (f *ReplyFormat) Marker() string { return f.marker }

// Markers are the pieces of the control tokens the parser must see: a
// detokenizer writes no text for a control token, so a caller passes
// these pieces on where their tokens come.
func (f *ReplyFormat) Markers() []string {
	var out []string
	for _, m := range append(append(append([]string{f.marker, f.think[0], f.think[1]}, f.openers...), f.inCalls...), f.always...) {
		if m != "" && !contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// MarkersFor are the Markers a parser with options o looks for: the
// think markers when it reads reasoning, the call markers when it reads
// calls, and those of a family whose every reply is made of control
// tokens (always). A control token the parser does not look for stays
// what a detokenizer makes of it: no text.
func (f *ReplyFormat) MarkersFor(o ParseOptions) []string {
	var out []string
	add := func(ms ...string) {
		for _, m := range ms {
			if m != "" && !contains(out, m) {
				out = append(out, m)
			}
		}
	}
	add(f.always...)
	if o.Reasoning {
		add(f.think[0], f.think[1])
	}
	if o.Tools || len(o.ToolSpecs) > 0 {
		add(f.marker)
		add(f.openers...)
		add(f.inCalls...)
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// Prefill reports whether a reply that must call a tool starts after the
// Marker, put at the end of the prompt: a grammar over bytes cannot write
// a control token, so the grammar shapes what follows it.
func (f *ReplyFormat) Prefill() bool { return f.prefill }

// Single reports whether the family makes one call per reply.
func (f *ReplyFormat) Single() bool { return f.single }

// CallSchema is the JSON Schema of one call of function name with the
// given parameters schema, as the family writes it.
func (f *ReplyFormat) CallSchema(name string, params json.RawMessage) string {
	n, _ := json.Marshal(name)
	key, _ := json.Marshal(f.argsKey)
	props := fmt.Sprintf(`"name":{"const":%s},%s:%s`, n, key, params)
	if f.idSchema != "" {
		props += `,"id":` + f.idSchema
	}
	return fmt.Sprintf(`{"type":"object","properties":{%s},"required":["name",%s],"additionalProperties":false}`, props, key)
}

// CallsGrammar is the GBNF root of a reply made of calls: one, and up to
// more after it, each a "tool-call" rule the caller defines (the anyOf of
// the tools' CallSchemas). Only the families that write a call as one
// JSON object have one ("" for the others); Require covers them all.
func (f *ReplyFormat) CallsGrammar(more int) string {
	if f.root == nil {
		return ""
	}
	return f.root(more)
}

// OpensReasoning reports whether a rendered prompt ends inside the
// family's reasoning: the template opened it for the model (DeepSeek-R1's
// generation prompt ends in <think>), so the reply starts there.
func (f *ReplyFormat) OpensReasoning(prompt string) bool {
	if f.think[0] == "" {
		return false
	}
	i := strings.LastIndex(prompt, f.think[0])
	return i >= 0 && !strings.Contains(prompt[i:], f.think[1])
}

// ReplyFormatOf is the reply format of a model's chat renderer, read from
// its template: one that renders harmony's <|channel|> and <|message|> is
// gpt-oss's (Harmony), one that renders <｜tool▁calls▁begin｜> DeepSeek's
// (with a ```json fence V3's and R1's, else V3.1's), one that renders
// [TOOL_CALLS] and [ARGS] Mistral v11's (reasoning in [THINK] where it
// renders that), [TOOL_CALLS] alone Mistral v3's, <function= and
// <parameter= Qwen3-Coder's XML, <|python_tag|> (or ipython and
// "parameters") Llama 3.1's, and the rest write Hermes' <tool_call>
// blocks (Qwen 2.5 and 3, Hermes, and the plain format). A template that
// writes <think> reasons between <think> and </think>.
func ReplyFormatOf(r Renderer) *ReplyFormat {
	t, ok := r.(*Template)
	if !ok {
		return Hermes
	}
	src := t.Source()
	f := Hermes
	switch {
	case strings.Contains(src, "<|channel|>") && strings.Contains(src, "<|message|>"):
		f = Harmony
	case strings.Contains(src, dsCallsBegin) && strings.Contains(src, "```json"):
		f = DeepSeek
	case strings.Contains(src, dsCallsBegin):
		f = DeepSeekV31
	case strings.Contains(src, "[TOOL_CALLS]") && strings.Contains(src, "[ARGS]") && strings.Contains(src, "[THINK]"):
		f = MagistralV11
	case strings.Contains(src, "[TOOL_CALLS]") && strings.Contains(src, "[ARGS]"):
		f = MistralV11
	case strings.Contains(src, "<function=") && strings.Contains(src, "<parameter="):
		f = QwenXML
	case strings.Contains(src, "[TOOL_CALLS]"):
		f = MistralV3
	case strings.Contains(src, "<|python_tag|>") || strings.Contains(src, "ipython") && strings.Contains(src, `"parameters"`):
		f = Llama3
	}
	if strings.Contains(src, "<think>") && f.think[0] == "" {
		g := *f
		g.name += "+think"
		g.think = [2]string{"<think>", "</think>"}
		return &g
	}
	return f
}

// Hermes: Qwen 2.5 and 3 (and Hermes) write each call as <tool_call>\n
// {"name": ..., "arguments": {...}}\n</tool_call>, one block after
// another.
var Hermes = &ReplyFormat{
	name:    "hermes",
	openers: []string{"<tool_call>"},
	newBody: func(string) callBody { return newJSONBlock("</tool_call>", "arguments") },
	argsKey: "arguments",
	root: func(more int) string {
		return fmt.Sprintf(`"<tool_call>\n" tool-call "\n</tool_call>" ( "\n<tool_call>\n" tool-call "\n</tool_call>" ){0,%d}`, more)
	},
}

// Llama3: Llama 3.1, 3.2 and 3.3 answer a call to a custom tool with the
// reply {"name": ..., "parameters": {...}} alone (then <|eot_id|>),
// sometimes after <|python_tag|>, which is also what starts a call to a
// built-in tool. Their template renders one call per assistant message;
// a reply of several calls separated by ";" (which the 3.2 models write
// at times) is read too.
var Llama3 = &ReplyFormat{
	name:     "llama3",
	marker:   "<|python_tag|>",
	argsKey:  "parameters",
	single:   true,
	syntaxOf: func(f *ReplyFormat, o ParseOptions) syntax { return &leadingJSON{opts: o} },
	root:     func(int) string { return "tool-call" },
}

// MistralV3: Mistral's v3 tokenizer (Mistral 7B Instruct v0.3, Nemo,
// Small) answers [TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...],
// [TOOL_CALLS] being a control token; its template renders each call back
// with an "id" of nine letters and digits, and refuses others.
var MistralV3 = &ReplyFormat{
	name:     "mistral",
	openers:  []string{"[TOOL_CALLS]"},
	newBody:  func(string) callBody { return &jsonList{argsKeys: []string{"arguments"}} },
	argsKey:  "arguments",
	marker:   "[TOOL_CALLS]",
	prefill:  true,
	idSchema: `{"type":"string","pattern":"^[a-zA-Z0-9]{9}$"}`,
	root: func(more int) string {
		return fmt.Sprintf(`" "? "[" tool-call ( ", " tool-call ){0,%d} "]"`, more)
	},
}

// jsonList reads a JSON array of call objects ([TOOL_CALLS]'s).
type jsonList struct {
	argsKeys []string
	st       uint8 // 0 before "[", 1 before a call or "]", 2 in a call, 3 after a call
	call     pendingCall
	calls    int // calls reported
}

func (l *jsonList) next(p *ReplyParser, t *tagged, final bool) (progress, done, text bool) {
	n := 0
	for n < len(p.buf) {
		c := p.buf[n]
		n++
		if l.st == 2 {
			end := l.call.feed(p, c)
			if l.call.j.bad {
				return l.fail(p, t, n)
			}
			if end {
				if !l.call.started() { // an object that is no call
					return l.fail(p, t, n)
				}
				l.st = 3
				l.calls++
			}
			continue
		}
		switch {
		case isSpace(c):
		case l.st == 0 && c == '[':
			l.st = 1
		case l.st == 3 && c == ',':
			l.st = 1
		case l.st == 1 && c == '{':
			l.st, l.call = 2, newPendingCall(l.argsKeys)
			l.call.feed(p, c)
		case (l.st == 1 || l.st == 3) && c == ']':
			if l.calls == 0 && !l.call.started() {
				return l.fail(p, t, n)
			}
			p.consume(n)
			return true, true, false
		default: // not a list of calls
			return l.fail(p, t, n-1)
		}
	}
	if l.calls == 0 && !l.call.started() {
		t.raw = append(t.raw, p.buf[:n]...)
	}
	p.consume(n)
	if final {
		if l.calls == 0 && !l.call.started() {
			return true, false, true
		}
		return true, true, false
	}
	return n > 0, false, false
}

// fail ends a list that is not one: before any call it is text (what was
// read of it, and the first n bytes of the buffer); after one, the rest
// is text after the calls.
func (l *jsonList) fail(p *ReplyParser, t *tagged, n int) (progress, done, text bool) {
	if l.calls == 0 && !l.call.started() {
		t.raw = append(t.raw, p.buf[:n]...)
		p.consume(n)
		return true, false, true
	}
	return true, true, false
}

// leadingJSON is Llama 3's syntax: a reply that starts with a JSON object
// (after <|python_tag|>, optionally) is calls, objects separated by ";";
// any other reply is text.
type leadingJSON struct {
	opts  ParseOptions
	st    uint8 // 0 deciding, 1 in a call, 2 after one, 3 text, 4 after a ";"
	call  pendingCall
	calls int
	raw   []byte // what was read while no call was started
}

var llamaArgs = []string{"parameters", "arguments"}

func (l *leadingJSON) next(p *ReplyParser, final bool) bool {
	if p.buf == "" && !final {
		return false
	}
	switch l.st {
	case 0:
		rest := strings.TrimLeft(p.buf, " \t\r\n")
		if l.opts.Tools {
			if strings.HasPrefix(rest, "<|python_tag|>") {
				rest = strings.TrimLeft(rest[len("<|python_tag|>"):], " \t\r\n")
			} else if rest != "" && strings.HasPrefix("<|python_tag|>", rest) && !final {
				return false // may be the tag
			}
		}
		switch {
		case rest == "" && !final:
			return false
		case l.opts.Tools && strings.HasPrefix(rest, "{"):
			skip := len(p.buf) - len(rest)
			l.raw = append(l.raw, p.buf[:skip]...)
			p.consume(skip)
			l.st, l.call = 1, newPendingCall(llamaArgs)
			return true
		default:
			l.st = 3
			return true
		}
	case 1:
		n := 0
		j := &l.call.j
		for n < len(p.buf) && j.st != jsDone && !j.bad {
			l.call.feed(p, p.buf[n])
			n++
		}
		if l.calls == 0 && !l.call.started() {
			l.raw = append(l.raw, p.buf[:n]...)
		}
		p.consume(n)
		ended := j.st == jsDone || j.bad || final
		switch {
		case ended && l.call.started():
			l.calls++
			l.raw, l.st = nil, 2
			if j.bad || j.st != jsDone {
				l.st = 3
			}
			return true
		case ended && l.calls == 0: // not a call: all of it is text
			p.reportText(string(l.raw))
			l.raw, l.st = nil, 3
			return true
		case ended:
			l.st = 3
			return true
		}
		return n > 0
	case 2:
		rest := strings.TrimLeft(p.buf, " \t\r\n")
		switch {
		case rest == "" && !final:
			return false
		case strings.HasPrefix(rest, ";"):
			p.consume(len(p.buf) - len(rest) + 1)
			l.st = 4
			return true
		default:
			l.st = 3
			return true
		}
	case 4: // after a ";": another call, or text
		rest := strings.TrimLeft(p.buf, " \t\r\n")
		switch {
		case rest == "" && !final:
			return false
		case strings.HasPrefix(rest, "{"):
			p.consume(len(p.buf) - len(rest))
			l.st, l.call = 1, newPendingCall(llamaArgs)
			return true
		}
		l.st = 3
		return true
	}
	// Text.
	p.text(len(p.buf), false)
	return false
}

// CallID is the id of call k of a reply: the model's own (model) where
// the family's template needs ids of a shape and the model wrote one,
// else one made from prefix (unique per reply) and k. Mistral's template
// takes only nine letters and digits, so its ids are nine drawn from a
// hash of prefix and k.
func (f *ReplyFormat) CallID(prefix string, k int, model string) string {
	if f.idSchema == "" {
		return fmt.Sprintf("%s-%d", prefix, k)
	}
	if nineAlnum(model) {
		return model
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

func nineAlnum(s string) bool {
	if len(s) != 9 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
