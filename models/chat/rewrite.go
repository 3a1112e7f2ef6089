package chat

import (
	"strings"
)

// condFunc is the global function that stands in for conditional
// expressions gonja cannot parse.
const condFunc = "__tessera_if"

// atFunc is the global function that stands in for negative subscripts.
const atFunc = "__tessera_at"

// rewriteConditionals works around gonja's one parsing gap the real chat
// templates hit: it accepts a conditional expression (x if c else y) only
// as the whole of a {{ }} or of a {% set %} value, while Jinja accepts it
// anywhere an expression goes. Gemma 3's template writes
//
//	{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
//
// which gonja rejects with "Unbalanced parenthesis". Every conditional
// inside brackets (parentheses, lists, dicts, call arguments, subscripts),
// and chains of them (a if b else c if d else e) at the top of an
// expression, become calls __tessera_if(c, x, y). The difference from
// Jinja: both branches are evaluated, so a branch that fails to evaluate
// fails the render even when it is not taken. Everything else in the
// source is copied byte for byte.
func rewriteConditionals(src string) string {
	var out strings.Builder
	for i := 0; i < len(src); {
		j := nextTag(src, i)
		if j < 0 {
			out.WriteString(src[i:])
			break
		}
		out.WriteString(src[i:j])
		switch src[j+1] {
		case '#':
			end := strings.Index(src[j+2:], "#}")
			if end < 0 {
				out.WriteString(src[j:])
				return out.String()
			}
			out.WriteString(src[j : j+2+end+2])
			i = j + 2 + end + 2
			continue
		}
		end, ok := tagEnd(src, j)
		if !ok {
			out.WriteString(src[j:])
			break
		}
		tag := src[j:end]
		if src[j+1] == '%' && isRawTag(tag) {
			// Copy a {% raw %} block untouched, up to its {% endraw %}.
			k := strings.Index(src[end:], "endraw")
			if k < 0 {
				out.WriteString(src[j:])
				break
			}
			close := strings.Index(src[end+k:], "%}")
			if close < 0 {
				out.WriteString(src[j:])
				break
			}
			out.WriteString(src[j : end+k+close+2])
			i = end + k + close + 2
			continue
		}
		out.WriteString(rewriteTag(tag))
		i = end
	}
	return out.String()
}

// nextTag returns the offset of the next {{, {% or {#, or -1.
func nextTag(src string, from int) int {
	for i := from; i+1 < len(src); i++ {
		if src[i] == '{' && (src[i+1] == '{' || src[i+1] == '%' || src[i+1] == '#') {
			return i
		}
	}
	return -1
}

// tagEnd returns the offset just past the tag that starts at j: strings
// are skipped and the closing delimiter only counts outside brackets, as
// in Jinja's lexer ({{ {'a': {'b': 1}} }} ends at the last }}).
func tagEnd(src string, j int) (int, bool) {
	closer := byte('}')
	if src[j+1] == '%' {
		closer = '%'
	}
	depth := 0
	for i := j + 2; i < len(src); i++ {
		switch c := src[i]; c {
		case '\'', '"':
			k := skipString(src, i)
			if k < 0 {
				return 0, false
			}
			i = k - 1
		case '(', '[', '{':
			depth++
		case ')', ']':
			depth--
		case '}':
			if depth == 0 && closer == '}' && i+1 < len(src) && src[i+1] == '}' {
				return i + 2, true
			}
			depth--
		case '%':
			if depth <= 0 && closer == '%' && i+1 < len(src) && src[i+1] == '}' {
				return i + 2, true
			}
		}
	}
	return 0, false
}

// skipString returns the offset just past the string literal at i.
func skipString(s string, i int) int {
	q := s[i]
	for k := i + 1; k < len(s); k++ {
		switch s[k] {
		case '\\':
			k++
		case q:
			return k + 1
		}
	}
	return -1
}

func isRawTag(tag string) bool {
	inner := strings.Trim(tag[2:len(tag)-2], "-+ \t\r\n")
	return inner == "raw"
}

// token is a lexical unit of an expression, kept with its exact text.
type token struct {
	kind byte // 's' space, 'q' string, 'n' name or number, '(' open, ')' close, ',' separator, 'o' other
	text string
}

func lex(s string) []token {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		j := i + 1
		kind := byte('o')
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
				j++
			}
			kind = 's'
		case c == '\'' || c == '"':
			if j = skipString(s, i); j < 0 {
				j = len(s)
			}
			kind = 'q'
		case isNameByte(c):
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			kind = 'n'
		case c == '(' || c == '[' || c == '{':
			kind = '('
		case c == ')' || c == ']' || c == '}':
			kind = ')'
		case c == ',' || c == ':':
			kind = ','
		case c == '=' || c == '!' || c == '<' || c == '>':
			if j < len(s) && s[j] == '=' {
				j++
			}
		}
		toks = append(toks, token{kind, s[i:j]})
		i = j
	}
	return toks
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c >= 0x80
}

// rewriteTag rewrites the conditionals of one {{ }} or {% %} tag.
func rewriteTag(tag string) string {
	open, close := 2, len(tag)-2
	if open < close && (tag[open] == '-' || tag[open] == '+') {
		open++
	}
	if close > open && (tag[close-1] == '-' || tag[close-1] == '+') {
		close--
	}
	toks, neg := rewriteNegativeIndex(lex(tag[open:close]))
	if !hasName(toks, "if") {
		if neg {
			return tag[:open] + join(toks) + tag[close:]
		}
		return tag
	}
	body, _ := rewriteGroup(toks, 0)
	// At the top of {{ }} and of a {% set %} value gonja handles one
	// conditional itself; only a chain needs rewriting.
	switch {
	case tag[1] == '{':
		body = rewriteChain(body)
	case firstName(body) == "set":
		if k := indexOp(body, "="); k >= 0 {
			body = append(body[:k+1:k+1], rewriteChain(body[k+1:])...)
		}
	}
	return tag[:open] + join(body) + tag[close:]
}

// rewriteGroup rewrites toks up to the close that ends the group (or the
// end), returning the rewritten tokens, a group being one token, and how
// many tokens it consumed.
func rewriteGroup(toks []token, depth int) ([]token, int) {
	var out []token
	i := 0
	for i < len(toks) {
		t := toks[i]
		switch t.kind {
		case '(':
			inner, n := rewriteGroup(toks[i+1:], depth+1)
			i += 1 + n
			var closeTok token
			if len(inner) > 0 && inner[len(inner)-1].kind == ')' {
				closeTok, inner = inner[len(inner)-1], inner[:len(inner)-1]
			}
			out = append(out, token{'g', t.text + join(rewriteItems(inner)) + closeTok.text})
			continue
		case ')':
			if depth > 0 {
				return append(out, t), i + 1
			}
		}
		out = append(out, t)
		i++
	}
	return out, i
}

// rewriteItems rewrites each comma- or colon-separated item of a group.
func rewriteItems(toks []token) []token {
	var out []token
	start := 0
	for i := 0; i <= len(toks); i++ {
		if i < len(toks) && toks[i].kind != ',' {
			continue
		}
		item := toks[start:i]
		// A keyword argument keeps its name: f(k=a if b else c).
		if k := indexOp(item, "="); k >= 0 && firstName(item[:k]) != "" && countKind(item[:k], 'n') == 1 {
			out = append(out, item[:k+1]...)
			item = item[k+1:]
		}
		out = append(out, convert(item)...)
		if i < len(toks) {
			out = append(out, toks[i])
		}
		start = i + 1
	}
	return out
}

// rewriteChain rewrites a top-level expression only when it chains
// conditionals.
func rewriteChain(toks []token) []token {
	n := 0
	for _, t := range toks {
		if t.kind == 'n' && t.text == "if" {
			n++
		}
	}
	if n < 2 {
		return toks
	}
	return convert(toks)
}

// convert turns one expression "x if c else y" into __tessera_if(c, x, y),
// keeping the whitespace around it; other expressions are returned as they
// are.
func convert(item []token) []token {
	lead, trail := 0, len(item)
	for lead < trail && item[lead].kind == 's' {
		lead++
	}
	for trail > lead && item[trail-1].kind == 's' {
		trail--
	}
	body := item[lead:trail]
	ifAt := indexName(body, "if")
	if ifAt < 0 {
		return item
	}
	x := strings.TrimSpace(join(body[:ifAt]))
	rest := body[ifAt+1:]
	var c, y string
	if elseAt := indexName(rest, "else"); elseAt >= 0 {
		c = strings.TrimSpace(join(rest[:elseAt]))
		y = strings.TrimSpace(join(convert(rest[elseAt+1:])))
	} else {
		c = strings.TrimSpace(join(rest))
	}
	call := condFunc + "(" + c + ", " + x
	if y != "" {
		call += ", " + y
	}
	call += ")"
	out := append([]token{}, item[:lead]...)
	out = append(out, token{'g', call})
	return append(out, item[trail:]...)
}

func join(toks []token) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(t.text)
	}
	return b.String()
}

func indexName(toks []token, name string) int {
	for i, t := range toks {
		if t.kind == 'n' && t.text == name {
			return i
		}
	}
	return -1
}

func hasName(toks []token, name string) bool { return indexName(toks, name) >= 0 }

func indexOp(toks []token, op string) int {
	for i, t := range toks {
		if t.kind == 'o' && t.text == op {
			return i
		}
	}
	return -1
}

func firstName(toks []token) string {
	for _, t := range toks {
		switch t.kind {
		case 's':
			continue
		case 'n':
			return t.text
		}
		return ""
	}
	return ""
}

func countKind(toks []token, kind byte) int {
	n := 0
	for _, t := range toks {
		if t.kind == kind {
			n++
		}
	}
	return n
}

// rewriteNegativeIndex works around gonja's other gap: a negative
// subscript reaches one element short (x[-1] of a one-element list is
// undefined), and Mistral's template asks whether a message is
// user_messages[-1]. name[-N] becomes __tessera_at(name, -N), which
// indexes from the end as Python does; it reports whether it rewrote.
func rewriteNegativeIndex(toks []token) ([]token, bool) {
	var out []token
	done := false
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind == 'n' && !isNumber(t.text) && i+4 < len(toks) &&
			toks[i+1].text == "[" && toks[i+2].text == "-" && toks[i+3].kind == 'n' && isNumber(toks[i+3].text) && toks[i+4].text == "]" {
			out = append(out, token{'g', atFunc + "(" + t.text + ", -" + toks[i+3].text + ")"})
			i += 4
			done = true
			continue
		}
		out = append(out, t)
	}
	return out, done
}

func isNumber(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
