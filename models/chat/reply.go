package chat

import (
	"strings"
)

// A reply is what a chat model writes after the prompt: text for the
// user, and, depending on the family, reasoning before it (Qwen3's and
// DeepSeek-R1's <think> blocks, gpt-oss's analysis channel) and tool
// calls in the family's own syntax (Qwen's <tool_call> blocks, Llama 3.1's
// JSON, Mistral's [TOOL_CALLS], ...). A ReplyParser reads the reply as it
// is generated and splits it into events, so that every API dialect
// (Chat Completions, Responses, Messages, the Go and JavaScript APIs)
// streams reasoning, text and tool calls as they come: a call's name as
// soon as it is known, its arguments as they are written.

// EventKind says what a ReplyEvent carries.
type EventKind uint8

const (
	// EventText is reply text (Text).
	EventText EventKind = iota
	// EventReasoning is reasoning text (Text).
	EventReasoning
	// EventCall starts tool call Call, named Name (ID: the id the model
	// gave it, "" when it gave none).
	EventCall
	// EventArgs is a piece of call Call's arguments (Text), a JSON object
	// written a piece at a time: the pieces of a call joined are its
	// arguments.
	EventArgs
)

// ReplyEvent is one piece of a reply.
type ReplyEvent struct {
	Kind EventKind
	Text string
	Call int    // the call's index in the reply, for EventCall and EventArgs
	Name string // EventCall
	ID   string // EventCall: the model's own id for the call, if any
}

// Reply is a whole reply, split: what a parser's events add up to.
type Reply struct {
	Reasoning string
	Text      string
	Calls     []ReplyCall
}

// ReplyCall is a tool call of a reply, its arguments a JSON object as
// text ("{}" when the model wrote none).
type ReplyCall struct {
	ID, Name, Arguments string
}

// ParseOptions say what a parser looks for.
type ParseOptions struct {
	// Tools: tools were offered, so the reply is read for calls. Without
	// it, call syntax is text.
	Tools bool
	// ToolSpecs are the tools offered, for the families whose calls do not
	// say a value's type (Qwen3-Coder's XML writes 5 and "5" alike): a
	// value is read as the parameter's schema says, text without one.
	// Setting them sets Tools.
	ToolSpecs []ToolSpec
	// Reasoning: the reply is read for reasoning. Without it, reasoning
	// markers are text.
	Reasoning bool
	// InReasoning: the prompt ends inside the reasoning (a template that
	// opens <think> for the model), so the reply starts there.
	InReasoning bool
	// Prefix is reply text the prompt already holds (a prefilled tool
	// call marker): it is read first and never reported as text.
	Prefix string
}

// ReplyParser splits a reply into events as it comes. It is not safe for
// concurrent use.
type ReplyParser struct {
	f      *ReplyFormat
	opts   ParseOptions
	syn    syntax
	buf    string // text read and not yet reported
	out    []ReplyEvent
	calls  int   // calls started
	hide   int   // bytes at the front of buf that are the prefix, never text
	reply  Reply // what the events add up to
	closed bool
}

// syntax is a family's reply grammar as a state machine over the parser's
// buffer: next reads what it can of p.buf, reports events, consumes what
// it reported and says whether it made progress. With final set no more
// text comes, so it must consume everything.
type syntax interface {
	next(p *ReplyParser, final bool) bool
}

// NewParser returns a parser of replies in format f.
func (f *ReplyFormat) NewParser(o ParseOptions) *ReplyParser {
	if len(o.ToolSpecs) > 0 {
		o.Tools = true
	}
	p := &ReplyParser{f: f, opts: o}
	p.syn = f.syntax(o)
	if o.Prefix != "" {
		p.buf, p.hide = o.Prefix, len(o.Prefix)
	}
	return p
}

// Feed reads more of the reply and returns the events it completes. Text
// that may be the start of a marker is held until the rest shows what it
// is.
func (p *ReplyParser) Feed(text string) []ReplyEvent {
	if p.closed {
		return nil
	}
	p.buf += text
	return p.run(false)
}

// Close ends the reply: what was held is reported, and the whole reply is
// returned.
func (p *ReplyParser) Close() ([]ReplyEvent, Reply) {
	if p.closed {
		return nil, p.reply
	}
	ev := p.run(true)
	p.closed = true
	r := p.reply
	if len(r.Calls) > 0 { // the text around calls is what separated them
		r.Text = strings.TrimSpace(r.Text)
	}
	for i := range r.Calls {
		if strings.TrimSpace(r.Calls[i].Arguments) == "" {
			r.Calls[i].Arguments = "{}"
		}
	}
	r.Reasoning = strings.TrimSpace(r.Reasoning)
	return ev, r
}

func (p *ReplyParser) run(final bool) []ReplyEvent {
	for p.syn.next(p, final) {
	}
	out := p.out
	p.out = nil
	return out
}

// consume drops the first n bytes of the buffer.
func (p *ReplyParser) consume(n int) {
	p.buf = p.buf[n:]
	p.hide = max(p.hide-n, 0)
}

// text reports the first n bytes of the buffer as reply text (or
// reasoning) and consumes them; the prefix's bytes are consumed silently.
func (p *ReplyParser) text(n int, reasoning bool) {
	if n <= 0 {
		return
	}
	s := p.buf[min(p.hide, n):n]
	p.consume(n)
	if s == "" {
		return
	}
	kind := EventText
	if reasoning {
		kind = EventReasoning
		p.reply.Reasoning += s
	} else {
		p.reply.Text += s
	}
	if k := len(p.out) - 1; k >= 0 && p.out[k].Kind == kind { // one event per kind and feed
		p.out[k].Text += s
		return
	}
	p.out = append(p.out, ReplyEvent{Kind: kind, Text: s})
}

// startCall reports a new call and returns its index.
func (p *ReplyParser) startCall(name, id string) int {
	k := p.calls
	p.calls++
	p.reply.Calls = append(p.reply.Calls, ReplyCall{ID: id, Name: name})
	p.out = append(p.out, ReplyEvent{Kind: EventCall, Call: k, Name: name, ID: id})
	return k
}

// args reports a piece of call k's arguments.
func (p *ReplyParser) args(k int, s string) {
	if s == "" {
		return
	}
	p.reply.Calls[k].Arguments += s
	if n := len(p.out) - 1; n >= 0 && p.out[n].Kind == EventArgs && p.out[n].Call == k {
		p.out[n].Text += s
		return
	}
	p.out = append(p.out, ReplyEvent{Kind: EventArgs, Call: k, Text: s})
}

// find returns the first of markers in p.buf: its position and which
// (-1 when none is there). held is how many bytes at the end of the
// buffer may be the start of a marker (when none is found).
func (p *ReplyParser) find(markers []string) (at, which, held int) {
	at, which = -1, -1
	for i, m := range markers {
		if m == "" {
			continue
		}
		if j := strings.Index(p.buf, m); j >= 0 && (at < 0 || j < at) {
			at, which = j, i
		}
	}
	if at >= 0 {
		return at, which, 0
	}
	for _, m := range markers {
		held = max(held, partialSuffix(p.buf, m))
	}
	return -1, -1, held
}

// partialSuffix is the length of the longest end of s that is a proper
// start of marker.
func partialSuffix(s, marker string) int {
	for n := min(len(s), len(marker)-1); n > 0; n-- {
		if strings.HasSuffix(s, marker[:n]) {
			return n
		}
	}
	return 0
}
