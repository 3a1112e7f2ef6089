package runtime

import (
	"context"
	"fmt"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime/grammar"
)

// A chat reply, as a Go program reads it: the tokens of a Stream go
// through a ReplyReader, which splits them into reasoning, text and tool
// calls in the model's own format (chat.ReplyFormat) as they come. The
// server's dialects read replies with it too.

// ReplyFormat is how the model writes replies, read from its chat
// template (chat.ReplyFormatOf).
func (e *Engine) ReplyFormat() *chat.ReplyFormat { return chat.ReplyFormatOf(e.chat) }

// ReplyOptions are the options for reading req's reply: calls when req
// offers tools, reasoning when the model's format has it, starting inside
// the reasoning when the prompt ends inside it (a template that opens
// <think> for the model). prompt is the prompt's tokens (PromptTokens).
func (e *Engine) ReplyOptions(req Request, prompt []int32) chat.ParseOptions {
	f := e.ReplyFormat()
	o := chat.ParseOptions{Tools: len(req.Tools) > 0, Reasoning: f.Reasons()}
	if o.Reasoning && len(prompt) > 0 {
		tail := make([]int, 0, 16)
		for _, id := range prompt[max(len(prompt)-16, 0):] {
			tail = append(tail, int(id))
		}
		o.InReasoning = f.OpensReasoning(e.model.Tokenizer.Decode(tail))
	}
	return o
}

// ReplyReader reads a reply's tokens. It is not safe for concurrent use.
type ReplyReader struct {
	p     *chat.ReplyParser
	marks map[int32]string
}

// NewReplyReader returns a reader of a reply with options o
// (ReplyOptions).
func (e *Engine) NewReplyReader(o chat.ParseOptions) *ReplyReader {
	f := e.ReplyFormat()
	return &ReplyReader{p: f.NewParser(o), marks: e.ReplyMarks(o)}
}

// ReplyMarks are the control tokens of the reply's markers that a reader
// with options o must see, by id, with their pieces: a detokenizer writes
// no text for a control token.
func (e *Engine) ReplyMarks(o chat.ParseOptions) map[int32]string {
	tok := e.model.Tokenizer
	var marks map[int32]string
	for _, m := range e.ReplyFormat().MarkersFor(o) {
		ids := tokenizer.EncodeSpecial(tok, m, false)
		if len(ids) != 1 || len(tok.TokenBytes(-1, ids[0])) > 0 {
			continue // no such control token: the marker, if written, is text
		}
		if marks == nil {
			marks = map[int32]string{}
		}
		marks[int32(ids[0])] = m
	}
	return marks
}

// Next reads a token and returns the events it completes.
func (r *ReplyReader) Next(t Token) []chat.ReplyEvent {
	return r.p.Feed(r.marks[t.ID] + t.Text)
}

// Close ends the reply: it returns the last events and the whole reply.
func (r *ReplyReader) Close() ([]chat.ReplyEvent, chat.Reply) { return r.p.Close() }

// ChatTools are the tools a chat request offers (Specs, which the reply's
// parser reads calls of; their definitions go to the template as
// Request.Tools) and the calls its reply must make: Required are the
// tools one call must use (all of them for OpenAI's "required", the named
// one for a named choice; nil when calls are free), More how many calls
// may follow the first.
type ChatTools struct {
	Specs    []chat.ToolSpec
	Parse    bool // read the reply for calls (false for tool_choice "none")
	Required []chat.ToolSpec
	More     int
}

// PrepareChat readies req, whose Messages are set, to run as a chat whose
// reply is read in the model's format, and returns the reader's options.
// The prompt is rendered and tokenized here, once for the whole request:
// req comes back with its Tokens (and without Messages and Tools), which
// Start, the transcripts and the first token's logprobs reuse; for
// required calls, with the family's prefill appended and its grammar as
// the constraint (a request with a constraint of its own cannot also
// require calls). Every client of the engine (the server's dialects, the
// browser) prepares chats this way.
func (e *Engine) PrepareChat(ctx context.Context, req Request, tools ChatTools) (Request, chat.ParseOptions, error) {
	f := e.ReplyFormat()
	if tools.Required != nil && req.Constraint != nil {
		return req, chat.ParseOptions{}, fmt.Errorf("%w: calls cannot be required of a reply that has a constraint of its own", ErrBadRequest)
	}
	o := e.ReplyOptions(req, nil)
	o.Tools = tools.Parse
	if o.Tools {
		o.ToolSpecs = tools.Specs
	}
	ids, err := e.PromptTokensContext(ctx, req)
	if err != nil {
		return req, o, err
	}
	o.InReasoning = e.ReplyOptions(req, ids).InReasoning
	if tools.Required != nil {
		r, err := f.Require(chat.RequireOptions{Tools: tools.Required, More: tools.More, InReasoning: o.InReasoning,
			Compile: func(schema []byte) (string, error) { return grammar.JSONSchemaGBNF(schema, grammar.SchemaOptions{}) }})
		if err != nil {
			return req, o, fmt.Errorf("%w: tools: %w", ErrBadRequest, err)
		}
		if req.Constraint, err = grammar.Parse(r.Grammar); err != nil {
			return req, o, fmt.Errorf("%w: tools: %w", ErrBadRequest, err)
		}
		if r.Prefill != "" {
			for _, id := range tokenizer.EncodeSpecial(e.model.Tokenizer, r.Prefill, false) {
				ids = append(ids, int32(id))
			}
			o.Prefix = r.Prefill
		}
	}
	req.Tokens, req.Messages, req.Tools = ids, nil, nil
	return req, o, nil
}
