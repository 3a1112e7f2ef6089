package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The syntax tree that GBNF, regular expressions and JSON Schema all
// compile to before lowering.

type nodeKind uint8

const (
	nAlt    nodeKind = iota // one of kids
	nSeq                    // kids in order
	nLit                    // the bytes lit
	nClass                  // one code point in ranges
	nRef                    // the rule name
	nRepeat                 // kids[0] between min and max times (max -1: unbounded)
)

type node struct {
	kind     nodeKind
	kids     []*node
	lit      []byte
	ranges   []cpRange
	name     string
	min, max int
}

type ruleDef struct {
	name string
	body *node
}

// MaxRepeat bounds the counts of x{m,n}: each repetition is a copy.
const MaxRepeat = 1000

// Parse compiles GBNF text (llama.cpp's grammar format), starting at the
// rule named root:
//
//	root   ::= "{" ws pair ("," ws pair)* "}"   # comments run to the end of the line
//	pair   ::= [a-z]+ ":" ws value
//	value  ::= "yes" | "no" | [0-9]{1,3} | .
//	ws     ::= [ \t\n]*
//
// Literals take \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH escapes;
// classes take ranges, ^ for the complement, and the same escapes; "."
// is any character but a newline, as in llama.cpp. A rule runs to the
// next "name ::=", so rules may span lines.
//
// Its costs are bounded: see MaxSource, MaxNesting and MaxElems.
func Parse(src string) (*Grammar, error) {
	if len(src) > MaxSource {
		return nil, budgetError("the grammar is %d bytes, more than %d (MaxSource)", len(src), MaxSource)
	}
	p := &parser{src: src}
	var defs []ruleDef
	p.space()
	for p.pos < len(p.src) {
		name := p.name()
		if name == "" {
			return nil, p.errorf("expected a rule name")
		}
		p.space()
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return nil, p.errorf("expected ::= after %q", name)
		}
		p.pos += 3
		body, err := p.alternation(false)
		if err != nil {
			return nil, err
		}
		defs = append(defs, ruleDef{name, body})
		p.space()
	}
	return build(defs, "root", src)
}

type parser struct {
	src   string
	pos   int
	depth int // groups open around pos, against MaxNesting
	items int // syntax nodes made, against MaxElems
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("grammar: line %d: %s", p.line(), fmt.Sprintf(format, args...))
}

// line is the line of pos, for errors.
func (p *parser) line() int { return strings.Count(p.src[:p.pos], "\n") + 1 }

// space skips blanks, newlines and comments.
func (p *parser) space() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *parser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// atRuleStart reports whether a new rule ("name ::=") starts here.
func (p *parser) atRuleStart() bool {
	q := *p
	if q.name() == "" {
		return false
	}
	q.space()
	return strings.HasPrefix(q.src[q.pos:], "::=")
}

func (p *parser) alternation(nested bool) (*node, error) {
	alt := &node{kind: nAlt}
	for {
		seq, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alt.kids = append(alt.kids, seq)
		p.space()
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			continue
		}
		break
	}
	if len(alt.kids) == 1 {
		return alt.kids[0], nil
	}
	return alt, nil
}

func (p *parser) sequence(nested bool) (*node, error) {
	seq := &node{kind: nSeq}
	for {
		p.space()
		if p.pos >= len(p.src) {
			break
		}
		c := p.src[p.pos]
		if c == '|' || c == ')' || !nested && p.atRuleStart() {
			break
		}
		var item *node
		var err error
		switch {
		case c == '"':
			item, err = p.literal()
		case c == '[':
			item, err = p.class()
		case c == '.':
			p.pos++
			item = &node{kind: nClass, ranges: negate([]cpRange{{'\n', '\n'}})}
		case c == '(':
			if p.depth++; p.depth > MaxNesting {
				return nil, budgetError("grammar: line %d: groups nest deeper than %d (MaxNesting)", p.line(), MaxNesting)
			}
			p.pos++
			if item, err = p.alternation(true); err == nil {
				p.space()
				if p.pos >= len(p.src) || p.src[p.pos] != ')' {
					return nil, p.errorf("expected )")
				}
				p.pos++
				p.depth--
			}
		case isNameByte(c):
			item = &node{kind: nRef, name: p.name()}
		default:
			return nil, p.errorf("unexpected %q", c)
		}
		if err != nil {
			return nil, err
		}
		if item, err = p.quantifier(item); err != nil {
			return nil, err
		}
		if p.items++; p.items > MaxElems {
			return nil, budgetError("grammar: line %d: more than %d items (MaxElems)", p.line(), MaxElems)
		}
		seq.kids = append(seq.kids, item)
	}
	if len(seq.kids) == 1 {
		return seq.kids[0], nil
	}
	return seq, nil
}

// quantifier applies a following *, +, ? or {m,n} to item.
func (p *parser) quantifier(item *node) (*node, error) {
	if p.pos >= len(p.src) {
		return item, nil
	}
	rep := func(min, max int) *node { return &node{kind: nRepeat, kids: []*node{item}, min: min, max: max} }
	switch p.src[p.pos] {
	case '*':
		p.pos++
		return rep(0, -1), nil
	case '+':
		p.pos++
		return rep(1, -1), nil
	case '?':
		p.pos++
		return rep(0, 1), nil
	case '{':
		end := strings.IndexByte(p.src[p.pos:], '}')
		if end < 0 {
			return nil, p.errorf("unterminated {")
		}
		min, max, err := parseCounts(p.src[p.pos+1 : p.pos+end])
		if err != nil {
			return nil, p.errorf("%v", err)
		}
		p.pos += end + 1
		return rep(min, max), nil
	}
	return item, nil
}

// parseCounts reads "m", "m,", ",n" or "m,n".
func parseCounts(s string) (int, int, error) {
	s = strings.ReplaceAll(s, " ", "")
	lo, hi, comma := strings.Cut(s, ",")
	min, max := 0, -1
	var err error
	if lo != "" {
		if min, err = strconv.Atoi(lo); err != nil {
			return 0, 0, fmt.Errorf("bad repetition count {%s}", s)
		}
	}
	switch {
	case !comma:
		max = min
	case hi != "":
		if max, err = strconv.Atoi(hi); err != nil {
			return 0, 0, fmt.Errorf("bad repetition count {%s}", s)
		}
	}
	if min < 0 || max >= 0 && max < min || min > MaxRepeat || max > MaxRepeat {
		return 0, 0, fmt.Errorf("repetition {%s} must have 0 <= m <= n <= %d", s, MaxRepeat)
	}
	return min, max, nil
}

func (p *parser) literal() (*node, error) {
	p.pos++ // "
	var lit []byte
	for {
		if p.pos >= len(p.src) {
			return nil, p.errorf("unterminated string")
		}
		if p.src[p.pos] == '"' {
			p.pos++
			return &node{kind: nLit, lit: lit}, nil
		}
		r, err := p.char()
		if err != nil {
			return nil, err
		}
		lit = utf8.AppendRune(lit, r)
	}
}

// char reads one character, escaped or not.
func (p *parser) char() (rune, error) {
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += n
		return r, nil
	}
	if p.pos+1 >= len(p.src) {
		return 0, p.errorf("escape at the end")
	}
	c := p.src[p.pos+1]
	p.pos += 2
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		if p.pos+n > len(p.src) {
			return 0, p.errorf("short \\%c escape", c)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil || v > utf8.MaxRune {
			return 0, p.errorf("bad \\%c escape %q", c, p.src[p.pos:p.pos+n])
		}
		p.pos += n
		return rune(v), nil
	}
	return rune(c), nil // \\ \" \' \[ \] \- and friends stand for themselves
}

func (p *parser) class() (*node, error) {
	p.pos++ // [
	neg := p.pos < len(p.src) && p.src[p.pos] == '^'
	if neg {
		p.pos++
	}
	var rs []cpRange
	for {
		if p.pos >= len(p.src) {
			return nil, p.errorf("unterminated character class")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			break
		}
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errorf("class range %q-%q is backwards", lo, hi)
			}
		}
		rs = append(rs, cpRange{lo, hi})
	}
	rs = normalize(rs)
	if neg {
		rs = negate(rs)
	}
	return &node{kind: nClass, ranges: rs}, nil
}
