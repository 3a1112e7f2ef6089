package server

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// A chat reply is read as it is generated (chat.ReplyParser): reasoning,
// text and tool calls, in the model's own format. Every dialect (Chat
// Completions, Responses, Messages) prepares its conversation the same
// way (conversation) and renders the same events its own way.

// conversation is a chat request made ready to run: the engine's
// request, and how its reply is read.
type conversation struct {
	req   runtime.Request
	reply replyPlan
}

// replyPlan says how a reply is read.
type replyPlan struct {
	format *chat.ReplyFormat
	opts   chat.ParseOptions
	// marks are the control tokens whose pieces the parser must see (a
	// detokenizer writes no text for them).
	marks map[int32]string
}

// newConversation completes req, whose Messages are set, for a reply read
// in m's format: the tools and tool_choice (wire.Tools), and
// (runtime.Engine.PrepareChat) the prompt's tokens when the reply's
// reading depends on how the prompt ends (a prefilled call marker,
// reasoning the template opened) and the grammar of required calls. A
// request that already has a constraint cannot also require calls.
func newConversation(ctx context.Context, m *model, req runtime.Request, tools []tool, choice json.RawMessage, parallel bool) (*conversation, error) {
	f := m.eng.ReplyFormat()
	defs, ct, err := wire.Tools(tools, choice, parallel, f)
	if err != nil {
		return nil, err
	}
	req.Tools = defs
	if ct.Required != nil && req.Constraint != nil {
		return nil, badRequest("tool_choice", "tool_choice %s cannot be combined with response_format or a grammar", string(choice))
	}
	req, opts, err := m.eng.PrepareChat(ctx, req, ct)
	if err != nil {
		if errors.Is(err, runtime.ErrBadRequest) && ct.Required != nil {
			return nil, badRequest("tools", "%v", err)
		}
		return nil, err
	}
	return &conversation{req: req, reply: replyPlan{format: f, opts: opts, marks: m.eng.ReplyMarks(opts)}}, nil
}

// parser is a new parser for one choice's reply.
func (r replyPlan) parser() *chat.ReplyParser { return r.format.NewParser(r.opts) }

// callIDs gives the calls of a reply their ids: the model's own where
// its format keeps them, else made from prefix (unique per choice).
func callIDs(f *chat.ReplyFormat, prefix string, calls []chat.ReplyCall) []chat.ReplyCall {
	for k := range calls {
		calls[k].ID = f.CallID(prefix, k, calls[k].ID)
	}
	return calls
}
