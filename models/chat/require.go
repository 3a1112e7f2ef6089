package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Requiring calls. tool_choice "required" (or a named tool) is kept by a
// grammar over the reply's bytes, in the family's own syntax: the model
// writes calls and nothing else. Some families mark parts of a call with
// control tokens, which have no bytes a grammar could write; there the
// prompt ends in those tokens instead (the prefill) and the grammar
// shapes what follows them, which works only where nothing the model
// chooses (such as the function's name) comes before the last of them.
// Require says which, for every family alike, so a server compiles
// whatever it is given and refuses what cannot be required.

// ToolSpec is a tool offered to the model: its name and the JSON Schema
// of its parameters (nil or null: any object).
type ToolSpec struct {
	Name       string
	Parameters json.RawMessage
}

// params is the tool's parameters schema, {"type":"object"} when unset.
func (t ToolSpec) params() json.RawMessage {
	if len(t.Parameters) == 0 || string(t.Parameters) == "null" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return t.Parameters
}

// ErrCannotRequire is returned (wrapped) by Require for a family that
// cannot be held to calls by grammar with the tools given: its syntax has
// a control token between the function's name and the arguments, so only
// a single tool (one offered, or the one tool_choice names) can be
// prefilled.
var ErrCannotRequire = errors.New("this model's tool-call format cannot be required by grammar")

// RequireOptions say what Require builds.
type RequireOptions struct {
	// Tools are the tools a call may use: all those offered for
	// tool_choice "required", the named one for a named tool_choice.
	Tools []ToolSpec
	// More is how many calls may follow the first, where the family
	// writes several (0: exactly one).
	More int
	// InReasoning: the prompt ends inside the family's reasoning
	// (OpensReasoning), which the reply must close before its calls.
	InReasoning bool
	// Compile turns a JSON Schema into GBNF text whose "root" rule is the
	// JSON of the values that validate (grammar.JSONSchemaGBNF with the
	// server's options): models does not import the grammar compiler, so
	// the caller lends it.
	Compile func(schema []byte) (string, error)
}

// Required is how a reply is held to calls.
type Required struct {
	// Prefill ends the prompt, as control tokens' text (the server
	// encodes it with special tokens), and is the parser's
	// ParseOptions.Prefix. "" when the grammar writes everything.
	Prefill string
	// Grammar is the GBNF (root rule "root") of what the model writes
	// after the prompt.
	Grammar string
}

// CanRequire reports whether Require can hold a reply to calls of one of
// n tools (see ErrCannotRequire).
func (f *ReplyFormat) CanRequire(n int) bool {
	return n > 0 && (n == 1 || !f.requireOne)
}

// Require returns the prefill and grammar that hold a reply to calls of
// o.Tools, one and up to o.More more (fewer where the family writes one
// call per reply or its calls end in a control token).
func (f *ReplyFormat) Require(o RequireOptions) (Required, error) {
	if len(o.Tools) == 0 {
		return Required{}, errors.New("chat: calls cannot be required without tools")
	}
	if !f.CanRequire(len(o.Tools)) {
		return Required{}, fmt.Errorf("%w: the %s format writes a control token between a call's name and its arguments, so only a single tool can be required", ErrCannotRequire, f.name)
	}
	if o.Compile == nil {
		return Required{}, errors.New("chat: Require needs a JSON Schema compiler")
	}
	g := &gbnfSet{compile: o.Compile, rules: map[string]string{}}
	require := f.require
	if require == nil {
		require = requireJSONCalls
	}
	prefill, body, err := require(f, o, g)
	if err != nil {
		return Required{}, err
	}
	if closer := f.think[1]; o.InReasoning && closer != "" {
		if prefill != "" || f.controlThink {
			// Reasoning cannot come before a prefill: it is closed at once.
			prefill = closer + "\n\n" + prefill
		} else {
			body = fmt.Sprintf(`%s %s "\n"{0,2} %s`, g.without(closer), quote(closer), body)
		}
	}
	g.rule("root", body)
	return Required{Prefill: prefill, Grammar: g.String()}, nil
}

// requireJSONCalls holds a reply to the calls of the families that write
// a call as one JSON object (Hermes, Llama 3, Mistral v3): the tools'
// CallSchemas make rule tool-call, which CallsGrammar's root repeats.
func requireJSONCalls(f *ReplyFormat, o RequireOptions, g *gbnfSet) (string, string, error) {
	var alts []string
	for _, t := range o.Tools {
		alts = append(alts, f.CallSchema(t.Name, t.params()))
	}
	if err := g.schema("tool-call", []byte(`{"anyOf":[`+strings.Join(alts, ",")+`]}`)); err != nil {
		return "", "", err
	}
	more := o.More
	if f.single {
		more = 0
	}
	prefill := ""
	if f.prefill {
		prefill = f.marker
	}
	return prefill, f.root(more), nil
}

// gbnfSet gathers the rules of one grammar: hand-written ones, and JSON
// Schemas compiled separately (so that each one's local $refs resolve
// in it), their rules renamed apart. Rules that several compilations
// share word for word (the JSON building blocks: ws, string, value, ...)
// are kept once.
type gbnfSet struct {
	compile func([]byte) (string, error)
	rules   map[string]string
	order   []string
}

// rule adds a hand-written rule.
func (g *gbnfSet) rule(name, body string) {
	if _, ok := g.rules[name]; !ok {
		g.order = append(g.order, name)
	}
	g.rules[name] = body
}

// schema compiles a JSON Schema into rule name.
func (g *gbnfSet) schema(name string, schema []byte) error {
	src, err := g.compile(schema)
	if err != nil {
		return err
	}
	defs, err := splitGBNF(src)
	if err != nil {
		return fmt.Errorf("chat: compiled schema: %w", err)
	}
	body := map[string]string{}
	for _, d := range defs {
		body[d.name] = d.body
	}
	// A rule is shared when one of its name and text is already here and
	// every rule it uses is shared too.
	shared := map[string]bool{}
	for _, d := range defs {
		if b, ok := g.rules[d.name]; ok && b == d.body && d.name != "root" {
			shared[d.name] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for n := range shared {
			for _, r := range gbnfRefs(body[n]) {
				if !shared[r] {
					delete(shared, n)
					changed = true
					break
				}
			}
		}
	}
	rename := func(n string) string {
		switch {
		case n == "root":
			return name
		case shared[n]:
			return n
		case g.rules[n] == "" && !strings.HasPrefix(n, name+"-"):
			return n // a name not taken yet keeps it
		}
		return name + "-" + n
	}
	names := map[string]string{}
	for _, d := range defs {
		names[d.name] = rename(d.name)
	}
	for _, d := range defs {
		if shared[d.name] {
			continue
		}
		n := names[d.name]
		if _, taken := g.rules[n]; taken {
			return fmt.Errorf("chat: grammar rule %q is defined twice", n)
		}
		g.rule(n, renameGBNF(d.body, func(r string) string {
			if m, ok := names[r]; ok {
				return m
			}
			return r
		}))
	}
	return nil
}

// without returns a rule for text that does not contain w (reasoning
// before its closer, an XML value before </parameter>), adding it once.
// w's first byte must occur nowhere else in it, which holds for every
// marker here: a mismatch then only ever restarts at that byte.
//
// State k (having matched w[:k]) reads on: the next byte of w to state
// k+1, w[0] back to state 1, any other byte to state 0; the whole text
// may end in any state but len(w).
func (g *gbnfSet) without(w string) string {
	name := "without-" + gbnfName(w)
	if _, ok := g.rules[name]; ok {
		return name
	}
	first := quote(w[:1])
	if strings.IndexByte(w[1:], w[0]) >= 0 {
		g.rule(name, notIn(w[0])+"*") // no w[0] at all: less, but never w
		return name
	}
	g.rule(name, fmt.Sprintf(`( %s | %s %s-1 )* ( %s %s-e1 )?`, notIn(w[0]), first, name, first, name))
	for k := 1; k < len(w); k++ {
		next := ""
		if k+1 < len(w) {
			next = fmt.Sprintf(` | %s %s-%d`, quote(w[k:k+1]), name, k+1)
		}
		g.rule(fmt.Sprintf("%s-%d", name, k), fmt.Sprintf(`%s | %s %s-1%s`, notIn(w[0], w[k]), first, name, next))
		next = ""
		if k+1 < len(w) {
			next = fmt.Sprintf(` | %s %s-e%d`, quote(w[k:k+1]), name, k+1)
		}
		g.rule(fmt.Sprintf("%s-e%d", name, k), fmt.Sprintf(`( %s %s-e1%s )?`, first, name, next))
	}
	return name
}

// String is the grammar's GBNF text, root first.
func (g *gbnfSet) String() string {
	var b strings.Builder
	if r, ok := g.rules["root"]; ok {
		fmt.Fprintf(&b, "root ::= %s\n", r)
	}
	for _, n := range g.order {
		if n != "root" {
			fmt.Fprintf(&b, "%s ::= %s\n", n, g.rules[n])
		}
	}
	return b.String()
}

// quote is s as a GBNF literal.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// notIn is a GBNF class of every character but the given ASCII bytes.
func notIn(cs ...byte) string {
	var b strings.Builder
	b.WriteString("[^")
	for _, c := range cs {
		switch {
		case c == ']' || c == '\\' || c == '^' || c == '-' || c == '[':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02X`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte(']')
	return b.String()
}

// gbnfName makes a rule name of s's letters and digits.
func gbnfName(s string) string {
	var b strings.Builder
	for i := range len(s) {
		if c := s[i]; isGBNFName(c) && c != '_' {
			b.WriteByte(c)
		}
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}

func isGBNFName(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

type gbnfDef struct{ name, body string }

// splitGBNF cuts GBNF text into its rules (a rule runs to the next
// "name ::=", as the grammar package reads it).
func splitGBNF(src string) ([]gbnfDef, error) {
	var defs []gbnfDef
	start := -1 // where the current rule's body starts
	var name string
	scanGBNF(src, func(i, j int, kind byte) {
		if kind != 'n' {
			return
		}
		k := j
		for k < len(src) && (src[k] == ' ' || src[k] == '\t' || src[k] == '\n' || src[k] == '\r') {
			k++
		}
		if !strings.HasPrefix(src[k:], "::=") {
			return
		}
		if start >= 0 {
			defs = append(defs, gbnfDef{name, strings.TrimSpace(src[start:i])})
		}
		name, start = src[i:j], k+3
	})
	if start < 0 {
		return nil, errors.New("no rules")
	}
	defs = append(defs, gbnfDef{name, strings.TrimSpace(src[start:])})
	return defs, nil
}

// gbnfRefs lists the rule names a rule's body uses.
func gbnfRefs(body string) []string {
	var out []string
	scanGBNF(body, func(i, j int, kind byte) {
		if kind == 'n' {
			out = append(out, body[i:j])
		}
	})
	return out
}

// renameGBNF rewrites the rule names a body uses.
func renameGBNF(body string, rename func(string) string) string {
	var b strings.Builder
	last := 0
	scanGBNF(body, func(i, j int, kind byte) {
		if kind == 'n' {
			b.WriteString(body[last:i])
			b.WriteString(rename(body[i:j]))
			last = j
		}
	})
	b.WriteString(body[last:])
	return b.String()
}

// scanGBNF calls fn with the span of every name in GBNF text (kind 'n'),
// skipping literals, classes, counts and comments.
func scanGBNF(src string, fn func(i, j int, kind byte)) {
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '"' || c == '[':
			end := byte('"')
			if c == '[' {
				end = ']'
			}
			i++
			for i < len(src) && src[i] != end {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case c == '{':
			for i < len(src) && src[i] != '}' {
				i++
			}
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case isGBNFName(c):
			j := i
			for j < len(src) && isGBNFName(src[j]) {
				j++
			}
			fn(i, j, 'n')
			i = j
		default:
			i++
		}
	}
}
