package chat

// tagged is the syntax of the families that mark what is not text with
// tags in the text: reasoning between think markers, and calls after an
// opener, read by the format's call reader until it says they end.
type tagged struct {
	f     *ReplyFormat
	opts  ParseOptions
	state taggedState
	body  callBody // the calls being read
	raw   []byte   // a block's text while it may still turn out not to be a call
}

type taggedState uint8

const (
	inText taggedState = iota
	inReasoning
	inCalls
)

// callBody reads the calls after an opener. next reads what it can of
// p.buf, reporting calls through p; done: the block has ended (its closer
// consumed); text: the block turned out not to be calls, so what was read
// of it (raw) is text after all.
type callBody interface {
	next(p *ReplyParser, t *tagged, final bool) (progress, done, text bool)
}

func (t *tagged) next(p *ReplyParser, final bool) bool {
	if p.buf == "" && !final {
		return false
	}
	switch t.state {
	case inReasoning:
		at, _, held := p.find([]string{t.f.think[1]})
		if at >= 0 {
			p.text(at, true)
			p.consume(len(t.f.think[1]))
			t.state = inText
			return true
		}
		if final {
			held = 0
		}
		n := len(p.buf) - held
		p.text(n, true)
		return false
	case inCalls:
		progress, done, text := t.body.next(p, t, final)
		if text {
			s := string(t.raw)
			t.raw, t.state = nil, inText
			p.reportText(s)
			return true
		}
		if done {
			t.raw, t.state = nil, inText
			return true
		}
		return progress
	}
	var markers []string
	if t.opts.Reasoning && t.f.think[0] != "" {
		markers = append(markers, t.f.think[0])
	}
	if t.opts.Tools {
		markers = append(markers, t.f.openers...)
	}
	at, which, held := p.find(markers)
	if at < 0 {
		if final {
			held = 0
		}
		p.text(len(p.buf)-held, false)
		return false
	}
	p.text(at, false)
	m := markers[which]
	if t.opts.Reasoning && which == 0 && m == t.f.think[0] {
		p.consume(len(m))
		t.state = inReasoning
		return true
	}
	t.raw = append(t.raw[:0], p.buf[:len(m)]...)
	if p.hide > 0 { // a prefilled opener is never text
		t.raw = t.raw[:0]
	}
	p.consume(len(m))
	t.state = inCalls
	t.body = t.f.newBody(m)
	return true
}

// reportText reports s as reply text, outside the buffer.
func (p *ReplyParser) reportText(s string) {
	if s == "" {
		return
	}
	saved, hide := p.buf, p.hide
	p.buf, p.hide = s, 0
	p.text(len(s), false)
	p.buf, p.hide = saved, hide
}

// jsonBlock reads one call object between an opener and a closer
// (Qwen's <tool_call>\n{...}\n</tool_call>).
type jsonBlock struct {
	closer string
	call   pendingCall
}

func newJSONBlock(closer string, argsKeys ...string) *jsonBlock {
	return &jsonBlock{closer: closer, call: newPendingCall(argsKeys)}
}

func (b *jsonBlock) next(p *ReplyParser, t *tagged, final bool) (progress, done, text bool) {
	j := &b.call.j
	if j.st == jsDone || j.bad {
		// After the object: the closer, then back to text. Anything
		// between the object and the closer is dropped.
		at, _, held := p.find([]string{b.closer})
		switch {
		case at >= 0 || final:
			n := len(p.buf)
			if at >= 0 {
				n = at + len(b.closer)
			}
			if !b.call.started() {
				t.raw = append(t.raw, p.buf[:n]...)
				p.consume(n)
				return true, false, true
			}
			p.consume(n)
			return true, true, false
		case !b.call.started() && held < len(p.buf):
			// Not a call, and no closer yet: held as the block's text.
			t.raw = append(t.raw, p.buf[:len(p.buf)-held]...)
			p.consume(len(p.buf) - held)
			return true, false, false
		}
		return false, false, false
	}
	n := 0
	for n < len(p.buf) && j.st != jsDone && !j.bad {
		b.call.feed(p, p.buf[n])
		n++
	}
	if !b.call.started() {
		t.raw = append(t.raw, p.buf[:n]...)
	}
	p.consume(n)
	if final && j.st != jsDone && !j.bad {
		return true, b.call.started(), !b.call.started()
	}
	return n > 0, false, false
}
