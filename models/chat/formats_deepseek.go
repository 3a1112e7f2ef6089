package chat

import (
	"fmt"
	"strings"
)

// DeepSeek's call markers, each one token (special, so a detokenizer
// writes no text for it).
const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

// DeepSeek: DeepSeek V3 and R1 (and R1's distills) write their calls as
//
//	<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//	```json
//	{...}
//	```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//
// and reason between <think> and </think>, which R1's template opens in
// its generation prompt. V3.1 leaves out the type and the fence:
// <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
// (DeepSeekV31); one reader takes both.
//
// A grammar cannot write the markers; V3 and R1 put the name after the
// last marker, so any tool can be required (the markers up to
// <｜tool▁sep｜> prefilled, the grammar writing a name and its
// arguments), while V3.1 can require a single tool only.
var DeepSeek = &ReplyFormat{
	name:    "deepseek",
	openers: []string{dsCallsBegin, dsCallBegin},
	newBody: func(opener string) callBody { return &dsCalls{inCall: opener == dsCallBegin} },
	inCalls: []string{dsCallsEnd, dsCallEnd, dsSep},
	argsKey: "arguments",
	marker:  dsCallsBegin,
	require: requireDeepSeek,
}

// DeepSeekV31 is DeepSeek V3.1's format (see DeepSeek).
var DeepSeekV31 = func() *ReplyFormat {
	f := *DeepSeek
	f.name = "deepseek-v3.1"
	f.requireOne = true
	f.require = requireArgs(func(name string) string { return dsCallsBegin + dsCallBegin + name + dsSep })
	return &f
}()

// dsCalls reads the calls after <｜tool▁calls▁begin｜> (or a lone
// <｜tool▁call▁begin｜>) up to <｜tool▁calls▁end｜>.
type dsCalls struct {
	inCall bool   // after <｜tool▁call▁begin｜>, before the arguments
	head   string // what came before <｜tool▁sep｜>
	sep    bool   // <｜tool▁sep｜> was read
	typed  bool   // V3's "function<｜tool▁sep｜>NAME\n": the name comes next
	name   string
	calls  int
	k      int
	inArgs bool
	args   jsonScan
}

func (d *dsCalls) next(p *ReplyParser, t *tagged, final bool) (progress, done, text bool) {
	switch {
	case d.inArgs:
		return d.readArgs(p, final)
	case d.inCall && !d.sep:
		at, _, held := p.find([]string{dsSep})
		n := at
		if at < 0 {
			n = len(p.buf) - held
		}
		d.head += p.buf[:n]
		if !validName(strings.TrimSpace(d.head)) || at < 0 && final {
			return d.fail(p, t, n)
		}
		if at < 0 {
			d.eat(p, t, n)
			return n > 0, false, false
		}
		d.eat(p, t, n+len(dsSep))
		d.sep = true
		return true, false, false
	case d.inCall:
		// After the separator: V3.1's arguments, or V3's name line.
		rest := strings.TrimLeft(p.buf, " \t\r\n")
		if rest == "" && !final {
			return false, false, false
		}
		head := strings.TrimSpace(d.head)
		if head != "function" || strings.HasPrefix(rest, "{") || d.typed {
			name := head
			if d.typed {
				name = d.name
			}
			if name == "" {
				return d.fail(p, t, 0)
			}
			d.k, d.inArgs, d.args = p.startCall(name, ""), true, jsonScan{}
			d.calls++
			return true, false, false
		}
		i := strings.IndexByte(p.buf, '\n')
		n := i
		if i < 0 {
			n = len(p.buf)
		}
		d.name += p.buf[:n]
		if !validName(strings.TrimSpace(d.name)) || i < 0 && final {
			return d.fail(p, t, n)
		}
		if i < 0 {
			d.eat(p, t, n)
			return n > 0, false, false
		}
		d.eat(p, t, i+1)
		d.name, d.typed = strings.TrimSpace(d.name), true
		return true, false, false
	}
	// Between calls.
	rest := strings.TrimLeft(p.buf, " \t\r\n")
	skip := len(p.buf) - len(rest)
	switch {
	case strings.HasPrefix(rest, dsCallBegin):
		d.eat(p, t, skip+len(dsCallBegin))
		*d = dsCalls{inCall: true, calls: d.calls}
		return true, false, false
	case strings.HasPrefix(rest, dsCallsEnd):
		d.eat(p, t, skip+len(dsCallsEnd))
		if d.calls == 0 {
			return true, false, true
		}
		return true, true, false
	case !final && (strings.HasPrefix(dsCallBegin, rest) || strings.HasPrefix(dsCallsEnd, rest)):
		return false, false, false
	}
	return d.fail(p, t, 0)
}

// readArgs reads the arguments' object (after V3's fence), then up to
// the call's end.
func (d *dsCalls) readArgs(p *ReplyParser, final bool) (progress, done, text bool) {
	if !d.args.started && !d.args.bad {
		rest := strings.TrimLeft(p.buf, " \t\r\n")
		fence := "```json"
		switch {
		case !final && strings.HasPrefix(fence, rest): // "", or the fence begun
			return false, false, false
		case strings.HasPrefix(rest, fence), strings.HasPrefix(rest, "```"):
			if !strings.HasPrefix(rest, fence) {
				fence = "```"
			}
			p.consume(len(p.buf) - len(rest) + len(fence))
			return true, false, false
		}
	}
	if !d.args.done && !d.args.bad {
		var b strings.Builder
		n := 0
		for n < len(p.buf) && !d.args.done && !d.args.bad {
			if d.args.feed(p.buf[n]) {
				b.WriteByte(p.buf[n])
			}
			n++
		}
		if d.args.bad {
			n--
		}
		p.args(d.k, b.String())
		p.consume(n)
		if final {
			return true, true, false
		}
		return n > 0, false, false
	}
	// After the object: the fence's end, up to the call's end.
	at, which, held := p.find([]string{dsCallEnd, dsCallBegin, dsCallsEnd})
	switch {
	case at >= 0:
		n := at
		if which == 0 {
			n += len(dsCallEnd)
		}
		p.consume(n)
		*d = dsCalls{calls: d.calls}
		return true, false, false
	case final:
		p.consume(len(p.buf))
		return true, true, false
	}
	p.consume(len(p.buf) - held)
	return len(p.buf) > held, false, false
}

// eat consumes the first n bytes of the buffer, kept as the block's text
// while no call has started.
func (d *dsCalls) eat(p *ReplyParser, t *tagged, n int) {
	if d.calls == 0 {
		t.raw = append(t.raw, p.buf[:n]...)
	}
	p.consume(n)
}

// fail ends a block that is no call (what was read of it and the first n
// bytes of the buffer are text), or ends the calls before what follows.
func (d *dsCalls) fail(p *ReplyParser, t *tagged, n int) (progress, done, text bool) {
	if d.calls > 0 {
		return true, true, false
	}
	d.eat(p, t, n)
	return true, false, true
}

// requireDeepSeek prefills V3's markers up to <｜tool▁sep｜>; the
// grammar writes one call: a tool's name and its arguments in the fence.
func requireDeepSeek(f *ReplyFormat, o RequireOptions, g *gbnfSet) (string, string, error) {
	var alts []string
	for i, t := range o.Tools {
		rule := fmt.Sprintf("args-%d", i)
		if err := g.schema(rule, t.params()); err != nil {
			return "", "", fmt.Errorf("tool %q: %w", t.Name, err)
		}
		alts = append(alts, fmt.Sprintf("%s %s %s", quote(t.Name+"\n```json\n"), rule, quote("\n```")))
	}
	return dsCallsBegin + dsCallBegin + "function" + dsSep, "( " + strings.Join(alts, " | ") + " )", nil
}
