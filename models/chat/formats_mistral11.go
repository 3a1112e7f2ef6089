package chat

import "strings"

// MistralV11: Mistral's v11 and later tokenizers (Mistral Small 3.2,
// Magistral, Devstral, Ministral 3) write each call as
// [TOOL_CALLS]NAME[ARGS]{...}, one after another, where [TOOL_CALLS] and
// [ARGS] are control tokens; Mistral Small 3.2's template renders an id
// between them ([CALL_ID]abcDEF123), which is read when a model writes
// it, and refuses ids that are not nine letters and digits. A v3-style
// list after [TOOL_CALLS] is read too.
//
// A grammar cannot write [ARGS], so only a single tool can be required:
// [TOOL_CALLS]NAME[ARGS] is prefilled and the grammar writes the
// arguments.
var MistralV11 = &ReplyFormat{
	name:       "mistral-v11",
	openers:    []string{"[TOOL_CALLS]"},
	newBody:    func(string) callBody { return &v11Call{} },
	inCalls:    []string{"[ARGS]", "[CALL_ID]"},
	argsKey:    "arguments",
	marker:     "[TOOL_CALLS]",
	idSchema:   `{"type":"string","pattern":"^[a-zA-Z0-9]{9}$"}`,
	requireOne: true,
	require:    requireArgs(func(name string) string { return "[TOOL_CALLS]" + name + "[ARGS]" }),
}

// MagistralV11 is MistralV11 reasoning between [THINK] and [/THINK]
// (Magistral, Ministral 3 Reasoning), control tokens too.
var MagistralV11 = func() *ReplyFormat {
	f := *MistralV11
	f.name = "mistral-v11+think"
	f.think = [2]string{"[THINK]", "[/THINK]"}
	f.controlThink = true
	return &f
}()

// maxName bounds a function's name written before its arguments: longer
// is no name (OpenAI's limit is 64 bytes).
const maxName = 256

// v11Call reads one call after [TOOL_CALLS]: the name up to [ARGS] (or
// [CALL_ID] and the id), then the arguments' object.
type v11Call struct {
	st   uint8 // 0 name, 1 id, 2 arguments, 3 a v3 list
	name string
	id   string
	k    int
	args jsonScan
	list *jsonList
}

var v11Marks = []string{"[ARGS]", "[CALL_ID]"}

func (c *v11Call) next(p *ReplyParser, t *tagged, final bool) (progress, done, text bool) {
	switch c.st {
	case 0, 1:
		if c.st == 0 && strings.TrimLeft(c.name, " \n") == "" {
			// A v3 list, [{...}, ...], rather than a name?
			rest := strings.TrimLeft(p.buf, " \n")
			if strings.HasPrefix(rest, "[") {
				if len(rest) == 1 && !final {
					return false, false, false
				}
				if len(rest) > 1 && (rest[1] == '{' || isSpace(rest[1])) {
					c.st, c.list = 3, &jsonList{argsKeys: []string{"arguments"}}
					return true, false, false
				}
			}
		}
		at, which, held := p.find(v11Marks)
		n := at
		if at < 0 {
			n = len(p.buf) - held
		}
		part := p.buf[:n]
		if c.st == 0 {
			c.name += part
		} else {
			c.id += part
		}
		t.raw = append(t.raw, p.buf[:n]...)
		p.consume(n)
		name := strings.TrimLeft(c.name, " \n")
		if !validName(name) || len(c.id) > maxName || final && at < 0 || at >= 0 && name == "" {
			return true, false, true // not a call: the opener and what followed are text
		}
		if at < 0 {
			return n > 0, false, false
		}
		m := v11Marks[which]
		t.raw = append(t.raw, m...)
		p.consume(len(m))
		if m == "[CALL_ID]" && c.st == 0 {
			c.st = 1
			return true, false, false
		}
		if m == "[CALL_ID]" { // a second [CALL_ID]: no call
			return true, false, true
		}
		c.st, c.k = 2, p.startCall(name, c.id)
		return true, false, false
	case 3:
		return c.list.next(p, t, final)
	}
	var b strings.Builder
	n := 0
	for n < len(p.buf) && !c.args.done && !c.args.bad {
		if c.args.feed(p.buf[n]) {
			b.WriteByte(p.buf[n])
		}
		n++
	}
	if c.args.bad {
		n-- // the byte that is no object is text after the call
	}
	p.args(c.k, b.String())
	p.consume(n)
	return n > 0, c.args.done || c.args.bad || final, false
}

// validName reports whether s can be (the start of) a function's name
// written bare between control tokens.
func validName(s string) bool {
	if len(s) > maxName {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !(isGBNFName(c) || c == '.' || c == ':' || c >= 0x80) {
			return false
		}
	}
	return true
}

// requireArgs is Require for the families whose call ends its header in
// a control token right before the arguments: the header of the one tool
// is prefilled, and the grammar writes the arguments.
func requireArgs(head func(name string) string) func(*ReplyFormat, RequireOptions, *gbnfSet) (string, string, error) {
	return func(f *ReplyFormat, o RequireOptions, g *gbnfSet) (string, string, error) {
		t := o.Tools[0]
		if err := g.schema("args", t.params()); err != nil {
			return "", "", err
		}
		return head(t.Name), "args", nil
	}
}
