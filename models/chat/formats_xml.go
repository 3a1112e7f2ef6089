package chat

import (
	"encoding/json"
	"fmt"
	"strings"
)

// QwenXML: Qwen3-Coder (30B-A3B, 480B) and Qwen3.5 write each call as
//
//	<tool_call>
//	<function=NAME>
//	<parameter=P>
//	VALUE
//	</parameter>
//	...
//	</function>
//	</tool_call>
//
// with every value bare: a value is text unless the tool's parameters
// schema says the parameter is a number, boolean, object or array (or
// null), which is then read as JSON, as vLLM's and llama.cpp's parsers
// do (so a parser needs ParseOptions.ToolSpecs to tell "5" from 5). The
// arguments come out as a JSON object, a parameter at a time: a text
// value as it is written, any other once it closes.
//
// A value ends at a </parameter> followed by the next <parameter=, by
// </function> or by the end of the reply: code that a model writes into
// a value may hold the tag itself. Qwen3-Coder at times leaves out the
// <tool_call> around a call; a bare <function=NAME> is read as a call
// when NAME is one of the tools offered. A block that holds Qwen's JSON
// call instead ({"name": ..., "arguments": ...}) is read as Hermes'.
var QwenXML = &ReplyFormat{
	name:    "qwen3-coder",
	openers: []string{"<tool_call>", "<function="},
	newBody: func(opener string) callBody { return &xmlCall{bare: opener == "<function=", st: xmlHead} },
	argsKey: "arguments",
	require: requireXML,
}

type xmlState uint8

const (
	xmlHead   xmlState = iota // after <tool_call>: <function= next
	xmlName                   // in NAME>
	xmlParams                 // before <parameter=, </function> or </tool_call>
	xmlPName                  // in P>
	xmlValue                  // in a value
	xmlAfter                  // after </function>: </tool_call>, or another <function=
)

// xmlCall reads the calls of one <tool_call> block (or one bare
// <function=).
type xmlCall struct {
	bare   bool
	st     xmlState
	calls  int // calls started in the block
	k      int // the current call
	schema *paramSchema
	params int        // parameters written in the current call
	name   string     // the function's or parameter's name being read
	lead   bool       // a value's first newline may come (it is not the value's)
	text   bool       // the value is text, streamed as a JSON string
	value  []byte     // a JSON value's text, reported once it closes
	json   *jsonBlock // the block holds a JSON call instead
}

const (
	paramOpen  = "<parameter="
	paramClose = "</parameter>"
	funcOpen   = "<function="
	funcClose  = "</function>"
	blockClose = "</tool_call>"
)

func (x *xmlCall) next(p *ReplyParser, t *tagged, final bool) (progress, done, text bool) {
	if x.bare && x.st == xmlHead {
		x.st = xmlName
	}
	if x.json != nil {
		return x.json.next(p, t, final)
	}
	if x.st == xmlHead {
		// Qwen's JSON call in the block, which these models write at times?
		rest := strings.TrimLeft(p.buf, " \t\r\n")
		if rest == "" && !final {
			return false, false, false
		}
		if strings.HasPrefix(rest, "{") {
			x.json = newJSONBlock(blockClose, "arguments")
			return true, false, false
		}
	}
	switch x.st {
	case xmlHead, xmlParams, xmlAfter:
		return x.tag(p, t, final)
	case xmlName, xmlPName:
		i := strings.IndexByte(p.buf, '>')
		n := i
		if i < 0 {
			n = len(p.buf)
		}
		x.name += p.buf[:n]
		if strings.ContainsAny(x.name, "<\n") || len(x.name) > maxName || i < 0 && final {
			return x.fail(p, t, n)
		}
		if i < 0 {
			x.eat(p, t, n)
			return n > 0, false, false
		}
		x.eat(p, t, i+1)
		name := strings.TrimSpace(x.name)
		x.name = ""
		if x.st == xmlPName {
			x.st, x.lead, x.value = xmlValue, true, x.value[:0]
			x.text = x.schema == nil || x.schema.isText(name)
			x.key(p, name)
			return true, false, false
		}
		spec, offered := findTool(t.opts.ToolSpecs, name)
		if name == "" || x.bare && len(t.opts.ToolSpecs) > 0 && !offered {
			return x.fail(p, t, 0)
		}
		x.schema = nil
		if offered {
			x.schema = readParams(spec.params())
		}
		x.k, x.params, x.st = p.startCall(name, ""), 0, xmlParams
		x.calls++
		return true, false, false
	}
	return x.readValue(p, final)
}

// tag reads the tag expected between the parts of a block.
func (x *xmlCall) tag(p *ReplyParser, t *tagged, final bool) (progress, done, text bool) {
	rest := strings.TrimLeft(p.buf, " \t\r\n")
	skip := len(p.buf) - len(rest)
	var tags []string
	switch x.st {
	case xmlHead:
		tags = []string{funcOpen}
	case xmlParams:
		tags = []string{paramOpen, funcClose, blockClose}
	case xmlAfter:
		tags = []string{blockClose, funcOpen}
	}
	for _, tag := range tags {
		if strings.HasPrefix(rest, tag) {
			x.eat(p, t, skip+len(tag))
			switch {
			case tag == funcOpen:
				x.st = xmlName
			case tag == paramOpen:
				x.st = xmlPName
			case x.st == xmlParams: // the call ends
				if x.params == 0 {
					p.args(x.k, "{")
				}
				p.args(x.k, "}")
				x.st = xmlAfter
				if tag == blockClose {
					return true, true, false
				}
			default: // </tool_call> after the calls
				return true, true, false
			}
			return true, false, false
		}
	}
	waiting := false
	for _, tag := range tags {
		waiting = waiting || strings.HasPrefix(tag, rest)
	}
	if waiting && !final {
		return false, false, false // "" or the start of a tag
	}
	switch {
	case x.calls == 0:
		return x.fail(p, t, 0)
	case x.st == xmlParams && rest != "" && !final:
		// Something else between parameters: skipped, up to the next tag.
		n := strings.IndexByte(rest[1:], '<')
		if n < 0 {
			n = len(rest) - 1
		}
		p.consume(skip + 1 + n)
		return true, false, false
	}
	return true, true, false
}

// eat consumes the first n bytes of the buffer, kept as the block's text
// while no call has started.
func (x *xmlCall) eat(p *ReplyParser, t *tagged, n int) {
	if x.calls == 0 {
		t.raw = append(t.raw, p.buf[:n]...)
	}
	p.consume(n)
}

// fail ends a block that is no call: what was read of it, and the first
// n bytes of the buffer, are text.
func (x *xmlCall) fail(p *ReplyParser, t *tagged, n int) (progress, done, text bool) {
	if x.calls > 0 {
		return true, true, false
	}
	x.eat(p, t, n)
	return true, false, true
}

// key reports the start of parameter name's value.
func (x *xmlCall) key(p *ReplyParser, name string) {
	sep := ", "
	if x.params == 0 {
		sep = "{"
	}
	x.params++
	s := sep + jsonQuote(name) + ": "
	if x.text {
		s += `"`
	}
	p.args(x.k, s)
}

// readValue reads a value up to its </parameter>.
func (x *xmlCall) readValue(p *ReplyParser, final bool) (progress, done, text bool) {
	if x.lead {
		if p.buf == "" && !final {
			return false, false, false
		}
		if strings.HasPrefix(p.buf, "\n") {
			p.consume(1)
		}
		x.lead = false
	}
	end, held := closingTag(p.buf, final)
	if end < 0 {
		// The value goes on: all of it but what may be its closing.
		x.valueText(p, len(p.buf)-held)
		if final {
			x.closeValue(p, false)
			return true, true, false
		}
		return len(p.buf) > held, false, false
	}
	n := end
	if n > 0 && p.buf[n-1] == '\n' {
		n--
	}
	x.valueText(p, n)
	p.consume(end - n + len(paramClose))
	x.closeValue(p, true)
	x.st = xmlParams
	return true, false, false
}

// closingTag finds the </parameter> that ends a value: one followed by
// the next <parameter=, </function>, </tool_call> or the end of the
// reply. held is how much of the end of s must wait for more text (a tag
// begun, or a </parameter> whose follower is not known yet), with the
// newline before it.
func closingTag(s string, final bool) (end, held int) {
	from := 0
	for {
		i := strings.Index(s[from:], paramClose)
		if i < 0 {
			break
		}
		i += from
		after := strings.TrimLeft(s[i+len(paramClose):], " \t\r\n")
		for _, tag := range []string{paramOpen, funcClose, blockClose} {
			if strings.HasPrefix(after, tag) {
				return i, 0
			}
		}
		if final && after == "" {
			return i, 0
		}
		pending := false
		for _, tag := range []string{paramOpen, funcClose, blockClose} {
			pending = pending || strings.HasPrefix(tag, after)
		}
		if pending && !final {
			held = len(s) - i
			if i > 0 && s[i-1] == '\n' {
				held++
			}
			return -1, held
		}
		from = i + 1 // text that merely holds the tag
	}
	held = partialSuffix(s, paramClose)
	if n := len(s) - held; n > 0 && s[n-1] == '\n' && !final {
		held++
	}
	if final {
		held = 0
	}
	return -1, held
}

// valueText reads the first n bytes of the buffer into the value.
func (x *xmlCall) valueText(p *ReplyParser, n int) {
	if n <= 0 {
		return
	}
	if x.text {
		p.args(x.k, jsonEscape(p.buf[:n]))
	} else {
		x.value = append(x.value, p.buf[:n]...)
	}
	p.consume(n)
}

// closeValue ends a value: a text one's string closes, any other is
// reported as the JSON it is (Python's True, False and None read as
// JSON's), or as a string when it is no JSON. A call cut short ends
// with what was written (closed: false), its text value unclosed.
func (x *xmlCall) closeValue(p *ReplyParser, closed bool) {
	if x.text {
		if closed {
			p.args(x.k, `"`)
		}
		return
	}
	v := strings.TrimSpace(string(x.value))
	switch v {
	case "True", "False", "None":
		v = map[string]string{"True": "true", "False": "false", "None": "null"}[v]
	}
	if !json.Valid([]byte(v)) {
		v = jsonQuote(string(x.value))
	}
	p.args(x.k, v)
}

func findTool(tools []ToolSpec, name string) (ToolSpec, bool) {
	for _, t := range tools {
		if t.Name == name {
			return t, true
		}
	}
	return ToolSpec{}, false
}

// jsonQuote is s as a JSON string.
func jsonQuote(s string) string { return `"` + jsonEscape(s) + `"` }

// jsonEscape is s escaped for the inside of a JSON string (HTML's <, >
// and & left as they are, unlike encoding/json).
func jsonEscape(s string) string {
	var b strings.Builder
	for i := range len(s) {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// requireXML holds a reply to XML calls: each tool's parameters in the
// order its schema lists them, the required ones always, a text value as
// any text without </parameter> (or one of its enum), any other as the
// JSON its schema compiles to.
func requireXML(f *ReplyFormat, o RequireOptions, g *gbnfSet) (string, string, error) {
	var fns []string
	for i, t := range o.Tools {
		s := readParams(t.params())
		seq := []string{quote(funcOpen + t.Name + ">\n")}
		for j, p := range s.names {
			var v string
			switch enum := s.enum(p); {
			case s.isText(p) && len(enum) > 0:
				var alts []string
				for _, e := range enum {
					alts = append(alts, quote(e))
				}
				v = "( " + strings.Join(alts, " | ") + " )"
			case s.isText(p):
				v = g.without(paramClose)
			default:
				v = fmt.Sprintf("xml-%d-%d", i, j)
				if err := g.schema(v, s.valueSchema(p)); err != nil {
					return "", "", fmt.Errorf("tool %q, parameter %q: %w", t.Name, p, err)
				}
			}
			item := fmt.Sprintf("%s %s %s", quote(paramOpen+p+">\n"), v, quote("\n"+paramClose+"\n"))
			if !s.required[p] {
				item = "( " + item + " )?"
			}
			seq = append(seq, item)
		}
		if s.additional() {
			seq = append(seq, fmt.Sprintf(`( %s [a-zA-Z0-9_.-]{1,64} ">\n" %s %s ){0,16}`, quote(paramOpen), g.without(paramClose), quote("\n"+paramClose+"\n")))
		}
		fn := fmt.Sprintf("xml-%d", i)
		g.rule(fn, strings.Join(seq, " "))
		fns = append(fns, fn)
	}
	g.rule("xml-call", fmt.Sprintf(`%s ( %s ) %s`, quote("<tool_call>\n"), strings.Join(fns, " | "), quote(funcClose+"\n"+blockClose)))
	return "", fmt.Sprintf(`xml-call ( "\n" xml-call ){0,%d}`, o.More), nil
}
