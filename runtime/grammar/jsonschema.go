package grammar

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// SchemaOptions tune the grammar a JSON Schema compiles to. Bounds that a
// schema leaves open may be tightened (any output still validates): a
// model that never closes a string would otherwise run to its token limit.
type SchemaOptions struct {
	// MaxString bounds strings without maxLength (0: unbounded).
	MaxString int
	// MaxItems bounds arrays without maxItems, and the members of objects
	// that take any key (0: unbounded).
	MaxItems int
}

// SchemaError is a schema the compiler cannot express, and where.
type SchemaError struct {
	Pointer string // JSON pointer of the offending schema ("" is the root)
	Keyword string // the keyword, when one is to blame
	Msg     string
}

func (e *SchemaError) Error() string {
	at := e.Pointer
	if at == "" {
		at = "the root"
	}
	if e.Keyword != "" {
		return fmt.Sprintf("json schema: %q at %s: %s", e.Keyword, at, e.Msg)
	}
	return fmt.Sprintf("json schema at %s: %s", at, e.Msg)
}

// JSONSchema compiles a JSON Schema into a grammar of the JSON texts that
// validate against it.
//
// Supported: type (one or a list), properties, required and
// additionalProperties (false, or a schema for objects without
// properties), minProperties and maxProperties (minProperties only with
// listed properties, which the grammar keeps distinct), patternProperties
// of one pattern (without properties; keys are generated to match it
// whole), enum, const, items, prefixItems, minItems, maxItems, anyOf, oneOf
// (its branches should not overlap: the grammar cannot check that only
// one matches), allOf (one schema, or object schemas, which are merged:
// see allOf), local $ref (#, #/$defs/..., recursive ones included),
// minLength, maxLength, pattern (a regular expression, see Regex), format
// (date, time, date-time, uuid, email, ipv4, hostname), integer
// minimum/maximum/exclusiveMinimum/exclusiveMaximum, and number bounds
// with a non-negative integer minimum. Annotations (title, description,
// default, examples, ...) are ignored.
//
// Properties come in the order the schema lists them, optional ones may be
// left out; an object with properties never gets other keys (OpenAI's
// strict mode). Anything else is a *SchemaError naming the keyword and
// its JSON pointer.
func JSONSchema(schema []byte, o SchemaOptions) (*Grammar, error) {
	src, err := JSONSchemaGBNF(schema, o)
	if err != nil {
		return nil, err
	}
	return Parse(src)
}

// JSONObject is the grammar of any JSON object (OpenAI's json_object).
func JSONObject(o SchemaOptions) *Grammar {
	g, err := JSONSchema([]byte(`{"type":"object"}`), o)
	if err != nil {
		panic(err)
	}
	return g
}

// JSONSchemaGBNF is the GBNF text JSONSchema compiles.
func JSONSchemaGBNF(schema []byte, o SchemaOptions) (string, error) {
	if len(schema) > MaxSource {
		return "", budgetError("the JSON schema is %d bytes, more than %d (MaxSource)", len(schema), MaxSource)
	}
	root, err := parseValue(schema)
	if errors.Is(err, ErrBudget) {
		return "", fmt.Errorf("json schema: %w", err)
	}
	if err != nil {
		return "", &SchemaError{Msg: "not JSON: " + err.Error()}
	}
	c := &schemaCompiler{opts: o, root: root, refs: map[string]string{}, rules: map[string]string{}}
	expr, err := c.schema(root, "")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "root ::= %s\n", expr)
	for _, name := range c.order {
		fmt.Fprintf(&b, "%s ::= %s\n", name, c.rules[name])
	}
	return b.String(), nil
}

type schemaCompiler struct {
	opts  SchemaOptions
	root  *value
	refs  map[string]string // $ref → its rule
	rules map[string]string // rule → body
	order []string
	n     int
}

// The building blocks every schema shares.
var jsonRules = map[string]string{
	"ws":      `( " " | "\n" [ \t]{0,12} )?`,
	"char":    `[^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} )`,
	"string":  `"\"" char* "\""`,
	"integer": `"-"? ( "0" | [1-9] [0-9]{0,15} )`,
	"number":  `integer ( "." [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?`,
	"boolean": `"true" | "false"`,
	"null":    `"null"`,
	"value":   `object | array | string | number | boolean | null`,
	"object":  `"{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"`,
	"array":   `"[" ws ( value ws ( "," ws value ws )* )? "]"`,
	// Formats, as far as a grammar can check them (February has 28 days).
	"date":      `[0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ) | ( "0" [469] | "11" ) "-" ( "0" [1-9] | [12] [0-9] | "30" ) | "02-" ( "0" [1-9] | "1" [0-9] | "2" [0-8] ) )`,
	"time":      `( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`,
	"date-time": `date "T" time`,
	"uuid":      `[0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}`,
	"label":     `[a-zA-Z0-9] ( [a-zA-Z0-9-]{0,30} [a-zA-Z0-9] )?`,
	"hostname":  `label ( "." label ){0,4}`,
	"email":     `[a-zA-Z0-9_+-]{1,20} ( "." [a-zA-Z0-9_+-]{1,20} ){0,2} "@" label ( "." label ){1,3}`,
	"octet":     `"25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9]`,
	"ipv4":      `octet "." octet "." octet "." octet`,
}

// The rules each building block needs besides itself.
var jsonDeps = map[string][]string{
	"string": {"char"}, "number": {"integer"},
	"value":  {"object", "array", "string", "number", "boolean", "null"},
	"object": {"ws", "string", "value"}, "array": {"ws", "value"},
	"date-time": {"date", "time"}, "hostname": {"label"}, "email": {"label"}, "ipv4": {"octet"},
}

// use adds a building block (and what it needs) and returns its name.
func (c *schemaCompiler) use(name string) string {
	if _, ok := c.rules[name]; ok {
		return name
	}
	body := jsonRules[name]
	if c.opts.MaxString > 0 && name == "string" {
		body = fmt.Sprintf(`"\"" char{0,%d} "\""`, c.opts.MaxString)
	}
	if c.opts.MaxItems > 0 && (name == "object" || name == "array") {
		k := c.opts.MaxItems - 1
		if name == "object" {
			body = fmt.Sprintf(`"{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws ){0,%d} )? "}"`, k)
		} else {
			body = fmt.Sprintf(`"[" ws ( value ws ( "," ws value ws ){0,%d} )? "]"`, k)
		}
	}
	c.add(name, body)
	for _, d := range jsonDeps[name] {
		c.use(d)
	}
	return name
}

func (c *schemaCompiler) add(name, body string) {
	c.rules[name] = body
	c.order = append(c.order, name)
}

// fresh makes a new rule for a part of the schema.
func (c *schemaCompiler) fresh(ptr, body string) string {
	c.n++
	hint := strings.Map(func(r rune) rune {
		if r < 0x80 && isNameByte(byte(r)) {
			return r
		}
		return '-'
	}, strings.TrimPrefix(ptr, "/"))
	if len(hint) > 40 {
		hint = hint[len(hint)-40:]
	}
	name := fmt.Sprintf("s%d-%s", c.n, strings.Trim(hint, "-"))
	name = strings.TrimSuffix(name, "-")
	c.add(name, body)
	return name
}

// Keywords that say nothing about what validates.
var annotations = []string{"$schema", "$id", "$comment", "title", "description", "default", "examples",
	"deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict", "name", "contentMediaType", "contentEncoding"}

var supported = []string{"type", "properties", "required", "additionalProperties", "enum", "const", "items",
	"minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "minLength", "maxLength", "pattern", "format",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "uniqueItems", "prefixItems",
	"minProperties", "maxProperties", "patternProperties"}

func errAt(ptr, kw, format string, args ...any) error {
	return &SchemaError{Pointer: ptr, Keyword: kw, Msg: fmt.Sprintf(format, args...)}
}

// schema returns a GBNF expression for the JSON texts valid against s.
func (c *schemaCompiler) schema(s *value, ptr string) (string, error) {
	switch s.kind {
	case 'b':
		if s.b {
			return c.use("value"), nil
		}
		return "", errAt(ptr, "", "the schema false matches nothing")
	case 'o':
	default:
		return "", errAt(ptr, "", "a schema must be an object or a boolean")
	}
	for _, k := range s.keys {
		if !slices.Contains(supported, k) && !slices.Contains(annotations, k) {
			return "", errAt(ptr, k, "keyword not supported")
		}
	}
	if ref := s.get("$ref"); ref != nil {
		if len(s.keys) > 1 {
			for _, k := range s.keys {
				if k != "$ref" && !slices.Contains(annotations, k) {
					return "", errAt(ptr, k, "keywords beside $ref are not supported")
				}
			}
		}
		return c.ref(ref, ptr)
	}
	if v := s.get("const"); v != nil {
		return Quote(v.compact()), nil
	}
	if v := s.get("enum"); v != nil {
		if v.kind != 'a' || len(v.vals) == 0 {
			return "", errAt(ptr, "enum", "must be a non-empty array")
		}
		var alts []string
		for _, x := range v.vals {
			alts = append(alts, Quote(x.compact()))
		}
		return "( " + strings.Join(alts, " | ") + " )", nil
	}
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		v := s.get(kw)
		if v == nil {
			continue
		}
		if v.kind != 'a' || len(v.vals) == 0 {
			return "", errAt(ptr, kw, "must be a non-empty array")
		}
		if kw == "allOf" {
			return c.allOf(s, ptr)
		}
		for _, k := range s.keys {
			if k != kw && !slices.Contains(annotations, k) && k != "type" {
				return "", errAt(ptr, k, "keywords beside %s are not supported", kw)
			}
		}
		var alts []string
		for i, x := range v.vals {
			e, err := c.schema(x, fmt.Sprintf("%s/%s/%d", ptr, kw, i))
			if err != nil {
				return "", err
			}
			alts = append(alts, e)
		}
		return c.fresh(ptr+"/"+kw, strings.Join(alts, " | ")), nil
	}
	var types []string
	switch t := s.get("type"); {
	case t == nil:
		switch {
		case s.get("properties") != nil || s.get("additionalProperties") != nil || s.get("required") != nil:
			types = []string{"object"}
		case s.get("items") != nil || s.get("minItems") != nil || s.get("maxItems") != nil:
			types = []string{"array"}
		case s.get("pattern") != nil || s.get("format") != nil || s.get("minLength") != nil || s.get("maxLength") != nil:
			types = []string{"string"}
		case s.get("minimum") != nil || s.get("maximum") != nil || s.get("exclusiveMinimum") != nil || s.get("exclusiveMaximum") != nil:
			types = []string{"number"}
		default:
			return c.use("value"), nil
		}
	case t.kind == 's':
		types = []string{t.str}
	case t.kind == 'a' && len(t.vals) > 0:
		for _, x := range t.vals {
			if x.kind != 's' {
				return "", errAt(ptr, "type", "must be a string or an array of strings")
			}
			types = append(types, x.str)
		}
	default:
		return "", errAt(ptr, "type", "must be a string or an array of strings")
	}
	var alts []string
	for _, t := range types {
		var e string
		var err error
		switch t {
		case "null", "boolean":
			e = c.use(t)
		case "string":
			e, err = c.str(s, ptr)
		case "integer":
			e, err = c.integer(s, ptr)
		case "number":
			e, err = c.number(s, ptr)
		case "object":
			e, err = c.object(s, ptr)
		case "array":
			e, err = c.array(s, ptr)
		default:
			err = errAt(ptr, "type", "unknown type %q", t)
		}
		if err != nil {
			return "", err
		}
		alts = append(alts, e)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return "( " + strings.Join(alts, " | ") + " )", nil
}

// ref resolves a local $ref into a rule (made once, so recursion works).
func (c *schemaCompiler) ref(ref *value, ptr string) (string, error) {
	if ref.kind != 's' || !strings.HasPrefix(ref.str, "#") {
		return "", errAt(ptr, "$ref", "only local references (#...) are supported")
	}
	if name, ok := c.refs[ref.str]; ok {
		return name, nil
	}
	target, err := c.resolve(ref, ptr)
	if err != nil {
		return "", err
	}
	name := c.fresh("ref"+strings.TrimPrefix(ref.str, "#"), "")
	c.refs[ref.str] = name
	body, err := c.schema(target, strings.TrimPrefix(ref.str, "#"))
	if err != nil {
		return "", err
	}
	c.rules[name] = body
	return name, nil
}

// resolve finds the schema a local $ref points to.
func (c *schemaCompiler) resolve(ref *value, ptr string) (*value, error) {
	if ref.kind != 's' || !strings.HasPrefix(ref.str, "#") {
		return nil, errAt(ptr, "$ref", "only local references (#...) are supported")
	}
	target := c.root
	for _, part := range strings.Split(strings.TrimPrefix(ref.str, "#"), "/")[1:] {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch {
		case target.kind == 'o':
			target = target.get(part)
		case target.kind == 'a':
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(target.vals) {
				target = nil
			} else {
				target = target.vals[i]
			}
		default:
			target = nil
		}
		if target == nil {
			return nil, errAt(ptr, "$ref", "%q does not resolve", ref.str)
		}
	}
	return target, nil
}

func intKeyword(s *value, ptr, kw string) (int, bool, error) {
	v := s.get(kw)
	if v == nil {
		return 0, false, nil
	}
	n, err := strconv.Atoi(string(v.num))
	if v.kind != 'n' || err != nil || n < 0 {
		return 0, false, errAt(ptr, kw, "must be a non-negative integer")
	}
	return n, true, nil
}

func (c *schemaCompiler) str(s *value, ptr string) (string, error) {
	minLen, _, err := intKeyword(s, ptr, "minLength")
	if err != nil {
		return "", err
	}
	maxLen, hasMax, err := intKeyword(s, ptr, "maxLength")
	if err != nil {
		return "", err
	}
	if hasMax && maxLen < minLen {
		return "", errAt(ptr, "maxLength", "is below minLength")
	}
	if minLen > MaxRepeat || maxLen > MaxRepeat {
		return "", errAt(ptr, "maxLength", "lengths above %d are not supported", MaxRepeat)
	}
	if f := s.get("format"); f != nil {
		if s.get("pattern") != nil || s.get("minLength") != nil || hasMax {
			return "", errAt(ptr, "format", "format with pattern or lengths is not supported")
		}
		switch f.str {
		case "date", "time", "date-time", "uuid", "email", "ipv4", "hostname":
			return `"\"" ` + c.use(f.str) + ` "\""`, nil
		}
		return "", errAt(ptr, "format", "format %q is not supported (date, time, date-time, uuid, email, ipv4 and hostname are)", f.str)
	}
	if p := s.get("pattern"); p != nil {
		if p.kind != 's' {
			return "", errAt(ptr, "pattern", "must be a string")
		}
		if s.get("minLength") != nil || hasMax {
			return "", errAt(ptr, "pattern", "pattern with minLength or maxLength is not supported")
		}
		n, err := parseRegex(strings.TrimSuffix(strings.TrimPrefix(p.str, "^"), "$"))
		if err != nil {
			return "", errAt(ptr, "pattern", "%v", err)
		}
		return `"\"" ` + jsonEscaped(n).gbnf() + ` "\""`, nil
	}
	if !hasMax && c.opts.MaxString > 0 {
		maxLen, hasMax = max(minLen, c.opts.MaxString), true
	}
	c.use("char")
	if !hasMax {
		if minLen == 0 {
			return c.use("string"), nil
		}
		return fmt.Sprintf(`"\"" char{%d,} "\""`, minLen), nil
	}
	return fmt.Sprintf(`"\"" char{%d,%d} "\""`, minLen, maxLen), nil
}

// jsonEscaped rewrites a regular expression's tree so that it generates
// the text of a JSON string: quotes, backslashes and control characters
// the expression matches come out escaped.
func jsonEscaped(n *node) *node {
	special := []cpRange{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}
	escape := func(r rune) string {
		switch r {
		case '"':
			return `\"`
		case '\\':
			return `\\`
		case '\n':
			return `\n`
		case '\t':
			return `\t`
		case '\r':
			return `\r`
		}
		return fmt.Sprintf(`\u%04x`, r)
	}
	switch n.kind {
	case nLit:
		var b strings.Builder
		for _, r := range string(n.lit) {
			if r < 0x20 || r == '"' || r == '\\' {
				b.WriteString(escape(r))
			} else {
				b.WriteRune(r)
			}
		}
		return &node{kind: nLit, lit: []byte(b.String())}
	case nClass:
		alt := &node{kind: nAlt}
		if rest := subtract(n.ranges, special); len(rest) > 0 {
			alt.kids = append(alt.kids, &node{kind: nClass, ranges: rest})
		}
		for _, sp := range special {
			for r := sp.lo; r <= sp.hi; r++ {
				if slices.ContainsFunc(n.ranges, func(x cpRange) bool { return x.lo <= r && r <= x.hi }) {
					alt.kids = append(alt.kids, &node{kind: nLit, lit: []byte(escape(r))})
				}
			}
		}
		if len(alt.kids) == 1 {
			return alt.kids[0]
		}
		return alt
	}
	out := *n
	out.kids = nil
	for _, k := range n.kids {
		out.kids = append(out.kids, jsonEscaped(k))
	}
	return &out
}

// strconvQuote is the JSON text of a key.
func strconvQuote(k string) string { return (&value{kind: 's', str: k}).compact() }
