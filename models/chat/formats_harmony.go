package chat

import "strings"

// Harmony: gpt-oss (20b, 120b) writes its reply as messages, each a
// header, <|message|>, the content, and an end:
//
//	<|channel|>analysis<|message|>REASONING<|end|>
//	<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
//	<|start|>assistant<|channel|>final<|message|>TEXT<|return|>
//
// (the prompt ends in <|start|>assistant, so the first header starts at
// its channel). The analysis channel is reasoning, the final channel
// text, a commentary message without a recipient a preamble (text), and
// a message to=functions.NAME, in the header before or after the
// channel, a call whose content is its arguments. Every marker is a
// control token, so every reply needs them all (always); <|call|> and
// <|return|> end generation and may never reach the parser.
//
// A grammar cannot write the header's <|message|>, so only a single tool
// can be required: its header is prefilled and the grammar writes the
// arguments.
var Harmony = &ReplyFormat{
	name:       "harmony",
	syntaxOf:   func(f *ReplyFormat, o ParseOptions) syntax { return &harmony{opts: o} },
	always:     []string{"<|start|>", "<|channel|>", "<|constrain|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>"},
	reasons:    true,
	argsKey:    "arguments",
	requireOne: true,
	require: requireArgs(func(name string) string {
		return "<|channel|>commentary to=functions." + name + " <|constrain|>json<|message|>"
	}),
}

// maxHeader bounds a message's header: text that runs longer without a
// <|message|> is no header.
const maxHeader = 512

type harmonyKind uint8

const (
	hText harmonyKind = iota
	hReasoning
	hCall
)

// harmony reads a reply's messages.
type harmony struct {
	opts   ParseOptions
	inBody bool
	header string
	kind   harmonyKind
	k      int
}

var harmonyEnds = []string{"<|end|>", "<|call|>", "<|return|>", "<|start|>"}

func (h *harmony) next(p *ReplyParser, final bool) bool {
	if p.buf == "" && !final {
		return false
	}
	if !h.inBody {
		at, _, held := p.find([]string{"<|message|>"})
		if at < 0 {
			n := len(p.buf) - held
			if final {
				n = len(p.buf)
			}
			h.header += p.buf[:n]
			p.consume(n)
			if len(h.header) > maxHeader || final && !strings.Contains(h.header, "<|channel|>") {
				// No header: text, as the model wrote it.
				p.reportText(strings.TrimPrefix(h.header, "<|start|>assistant"))
				h.header = ""
				if !final {
					h.inBody, h.kind = true, hText
				}
			}
			return false
		}
		h.header += p.buf[:at]
		p.consume(at + len("<|message|>"))
		h.open(p)
		return true
	}
	at, which, held := p.find(harmonyEnds)
	n := at
	if at < 0 {
		n = len(p.buf) - held
		if final {
			n = len(p.buf)
		}
	}
	switch h.kind {
	case hCall:
		p.args(h.k, p.buf[:n])
		p.consume(n)
	default:
		p.text(n, h.kind == hReasoning)
	}
	if at < 0 {
		return false
	}
	if harmonyEnds[which] != "<|start|>" { // <|start|> begins the next header
		p.consume(len(harmonyEnds[which]))
	}
	h.inBody, h.header = false, ""
	return true
}

// open reads a message's header and starts its content.
func (h *harmony) open(p *ReplyParser) {
	words := strings.Fields(strings.NewReplacer("<|start|>", " ", "<|channel|>", " <|channel|> ", "<|constrain|>", " ").Replace(h.header))
	var channel, to string
	for i, w := range words {
		switch {
		case w == "<|channel|>" && i+1 < len(words):
			channel = words[i+1]
		case strings.HasPrefix(w, "to="):
			to = w[len("to="):]
		}
	}
	h.inBody, h.header = true, ""
	name, isFunc := strings.CutPrefix(to, "functions.")
	switch {
	case isFunc && name != "" && h.opts.Tools:
		h.kind, h.k = hCall, p.startCall(name, "")
	case (channel == "analysis" || to != "") && h.opts.Reasoning:
		// Reasoning, and what the model sends to a tool it was not given
		// (gpt-oss's built-in browser and python).
		h.kind = hReasoning
	default:
		h.kind = hText
	}
}
