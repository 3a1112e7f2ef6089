package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Regex compiles a regular expression into a grammar whose language is
// the strings the expression matches as a whole (as if anchored at both
// ends; leading ^ and trailing $ are accepted and change nothing).
//
// The subset: literals and escapes (\n \t \r \f \v \xHH \uHHHH \u{H..}
// and escaped punctuation), ".", classes with ranges and negation, the
// shorthands \d \w \s \D \W \S, groups (capturing, (?:...) and named),
// alternation, and the quantifiers * + ? {m} {m,} {m,n} (lazy and
// possessive suffixes are accepted: a grammar has no preference).
// Backreferences, lookaround, word boundaries and inner anchors are
// rejected: they are not context-free.
//
// Its costs are bounded as a grammar's are (MaxSource, MaxNesting,
// MaxElems).
func Regex(re string) (*Grammar, error) {
	if len(re) > MaxSource {
		return nil, budgetError("the regular expression is %d bytes, more than %d (MaxSource)", len(re), MaxSource)
	}
	n, err := parseRegex(re)
	if err != nil {
		return nil, err
	}
	return Parse("root ::= " + n.gbnf() + "\n")
}

// parseRegex parses re into a syntax tree.
func parseRegex(re string) (*node, error) {
	p := &reParser{src: re}
	if strings.HasPrefix(p.src, "^") {
		p.pos++
	}
	n, err := p.alternation()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, p.errorf("unexpected %q", p.src[p.pos])
	}
	return n, nil
}

type reParser struct {
	src   string
	pos   int
	depth int // groups open around pos, against MaxNesting
}

func (p *reParser) errorf(format string, args ...any) error {
	src := p.src
	if len(src) > 80 { // a long expression is not worth repeating whole
		src = src[:77] + "..."
	}
	return fmt.Errorf("regex %q at offset %d: %s", src, p.pos, fmt.Sprintf(format, args...))
}

func (p *reParser) more() bool { return p.pos < len(p.src) }

func (p *reParser) alternation() (*node, error) {
	alt := &node{kind: nAlt}
	for {
		seq, err := p.sequence()
		if err != nil {
			return nil, err
		}
		alt.kids = append(alt.kids, seq)
		if p.more() && p.src[p.pos] == '|' {
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

func (p *reParser) sequence() (*node, error) {
	seq := &node{kind: nSeq}
	for p.more() {
		c := p.src[p.pos]
		if c == '|' || c == ')' {
			break
		}
		if c == '$' && p.pos == len(p.src)-1 {
			p.pos++
			break
		}
		item, err := p.atom()
		if err != nil {
			return nil, err
		}
		if item, err = p.quantifier(item); err != nil {
			return nil, err
		}
		seq.kids = append(seq.kids, item)
	}
	return seq, nil
}

func (p *reParser) atom() (*node, error) {
	c := p.src[p.pos]
	switch c {
	case '(':
		if p.depth++; p.depth > MaxNesting {
			return nil, budgetError("regex at offset %d: groups nest deeper than %d (MaxNesting)", p.pos, MaxNesting)
		}
		defer func() { p.depth-- }()
		p.pos++
		if strings.HasPrefix(p.src[p.pos:], "?") {
			switch rest := p.src[p.pos:]; {
			case strings.HasPrefix(rest, "?:"):
				p.pos += 2
			case strings.HasPrefix(rest, "?P<"), strings.HasPrefix(rest, "?<") && !strings.HasPrefix(rest, "?<=") && !strings.HasPrefix(rest, "?<!"):
				end := strings.IndexByte(rest, '>')
				if end < 0 {
					return nil, p.errorf("unterminated group name")
				}
				p.pos += end + 1
			default:
				return nil, p.errorf("lookaround and inline flags are not supported")
			}
		}
		n, err := p.alternation()
		if err != nil {
			return nil, err
		}
		if !p.more() || p.src[p.pos] != ')' {
			return nil, p.errorf("missing )")
		}
		p.pos++
		return n, nil
	case '[':
		return p.class()
	case '.':
		p.pos++
		return &node{kind: nClass, ranges: negate([]cpRange{{'\n', '\n'}})}, nil
	case '^', '$':
		return nil, p.errorf("anchors are supported only at the ends")
	case '*', '+', '?', '{':
		return nil, p.errorf("quantifier %q with nothing before it", c)
	case '\\':
		rs, lit, err := p.escape()
		if err != nil {
			return nil, err
		}
		if rs != nil {
			return &node{kind: nClass, ranges: rs}, nil
		}
		return &node{kind: nLit, lit: utf8.AppendRune(nil, lit)}, nil
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	return &node{kind: nLit, lit: utf8.AppendRune(nil, r)}, nil
}

var (
	digitRanges = []cpRange{{'0', '9'}}
	wordRanges  = []cpRange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	spaceRanges = []cpRange{{'\t', '\r'}, {' ', ' '}}
)

// escape reads a backslash escape: a class (\d ...) or one character.
func (p *reParser) escape() ([]cpRange, rune, error) {
	if p.pos+1 >= len(p.src) {
		return nil, 0, p.errorf("trailing backslash")
	}
	c := p.src[p.pos+1]
	p.pos += 2
	switch c {
	case 'd':
		return digitRanges, 0, nil
	case 'w':
		return wordRanges, 0, nil
	case 's':
		return spaceRanges, 0, nil
	case 'D':
		return negate(digitRanges), 0, nil
	case 'W':
		return negate(wordRanges), 0, nil
	case 'S':
		return negate(spaceRanges), 0, nil
	case 'n':
		return nil, '\n', nil
	case 't':
		return nil, '\t', nil
	case 'r':
		return nil, '\r', nil
	case 'f':
		return nil, '\f', nil
	case 'v':
		return nil, '\v', nil
	case '0':
		return nil, 0, nil
	case 'x', 'u':
		var hex string
		switch {
		case strings.HasPrefix(p.src[p.pos:], "{"):
			end := strings.IndexByte(p.src[p.pos:], '}')
			if end < 0 {
				return nil, 0, p.errorf("unterminated \\%c{", c)
			}
			hex = p.src[p.pos+1 : p.pos+end]
			p.pos += end + 1
		default:
			n := map[byte]int{'x': 2, 'u': 4}[c]
			if p.pos+n > len(p.src) {
				return nil, 0, p.errorf("short \\%c escape", c)
			}
			hex = p.src[p.pos : p.pos+n]
			p.pos += n
		}
		v, err := strconv.ParseUint(hex, 16, 32)
		if err != nil || v > utf8.MaxRune {
			return nil, 0, p.errorf("bad \\%c escape", c)
		}
		return nil, rune(v), nil
	case 'b', 'B', 'A', 'z', 'Z':
		return nil, 0, p.errorf("\\%c (an assertion) is not supported", c)
	}
	if c >= '1' && c <= '9' {
		return nil, 0, p.errorf("backreferences are not supported")
	}
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return nil, 0, p.errorf("unknown escape \\%c", c)
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos-1:])
	p.pos += n - 1
	return nil, r, nil
}

func (p *reParser) class() (*node, error) {
	p.pos++ // [
	neg := p.more() && p.src[p.pos] == '^'
	if neg {
		p.pos++
	}
	var rs []cpRange
	first := true
	for {
		if !p.more() {
			return nil, p.errorf("unterminated class")
		}
		if p.src[p.pos] == ']' && !first {
			p.pos++
			break
		}
		first = false
		lo, set, err := p.classChar()
		if err != nil {
			return nil, err
		}
		if set != nil {
			rs = append(rs, set...)
			continue
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			var set2 []cpRange
			if hi, set2, err = p.classChar(); err != nil {
				return nil, err
			}
			if set2 != nil || hi < lo {
				return nil, p.errorf("bad class range")
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

func (p *reParser) classChar() (rune, []cpRange, error) {
	if p.src[p.pos] == '\\' {
		set, r, err := p.escape()
		return r, set, err
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	return r, nil, nil
}

func (p *reParser) quantifier(item *node) (*node, error) {
	if !p.more() {
		return item, nil
	}
	min, max := 0, 0
	switch p.src[p.pos] {
	case '*':
		min, max = 0, -1
		p.pos++
	case '+':
		min, max = 1, -1
		p.pos++
	case '?':
		min, max = 0, 1
		p.pos++
	case '{':
		end := strings.IndexByte(p.src[p.pos:], '}')
		if end < 0 {
			return item, nil // a literal {, as most engines take it
		}
		var err error
		if min, max, err = parseCounts(p.src[p.pos+1 : p.pos+end]); err != nil {
			return nil, p.errorf("%v", err)
		}
		p.pos += end + 1
	default:
		return item, nil
	}
	if p.more() && (p.src[p.pos] == '?' || p.src[p.pos] == '+') {
		p.pos++ // lazy or possessive: the same language
	}
	return &node{kind: nRepeat, kids: []*node{item}, min: min, max: max}, nil
}

// gbnf writes n in GBNF syntax.
func (n *node) gbnf() string {
	var b strings.Builder
	n.write(&b)
	return b.String()
}

func (n *node) write(b *strings.Builder) {
	switch n.kind {
	case nAlt:
		b.WriteString("(")
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(" | ")
			}
			k.write(b)
		}
		b.WriteString(")")
	case nSeq:
		if len(n.kids) == 0 {
			b.WriteString(`""`)
			return
		}
		b.WriteString("(")
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(" ")
			}
			k.write(b)
		}
		b.WriteString(")")
	case nLit:
		b.WriteString(Quote(string(n.lit)))
	case nClass:
		b.WriteString(classGBNF(n.ranges))
	case nRef:
		b.WriteString(n.name)
	case nRepeat:
		b.WriteString("(")
		n.kids[0].write(b)
		b.WriteString(")")
		switch {
		case n.max < 0:
			fmt.Fprintf(b, "{%d,}", n.min)
		default:
			fmt.Fprintf(b, "{%d,%d}", n.min, n.max)
		}
	}
}

// Quote writes s as a GBNF literal.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		writeChar(&b, r, `"\`)
	}
	b.WriteByte('"')
	return b.String()
}

func writeChar(b *strings.Builder, r rune, special string) {
	switch {
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\r':
		b.WriteString(`\r`)
	case r == '\t':
		b.WriteString(`\t`)
	case r < 0x20 || r == 0x7f:
		fmt.Fprintf(b, `\x%02X`, r)
	case strings.ContainsRune(special, r):
		b.WriteByte('\\')
		b.WriteRune(r)
	case r == utf8.RuneError:
		b.WriteString(`\uFFFD`)
	default:
		b.WriteRune(r)
	}
}

// classGBNF writes code point ranges as a GBNF class.
func classGBNF(rs []cpRange) string {
	var b strings.Builder
	b.WriteByte('[')
	for _, r := range rs {
		writeClassChar(&b, r.lo)
		if r.hi > r.lo {
			b.WriteByte('-')
			writeClassChar(&b, r.hi)
		}
	}
	b.WriteByte(']')
	return b.String()
}

func writeClassChar(b *strings.Builder, r rune) {
	if r > 0xFFFF {
		fmt.Fprintf(b, `\U%08X`, r)
		return
	}
	if r >= 0x80 {
		fmt.Fprintf(b, `\u%04X`, r)
		return
	}
	writeChar(b, r, `\]-^[`)
}
