package server

import (
	"sync"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/grammar"
)

// Script scripts a server's replies, for dialects whose requests have no
// field for a grammar (Anthropic's Messages, OpenAI's Responses): a
// generation started while replies are set gets a grammar of exactly the
// next of them (the last repeats), which replaces any constraint it had
// (a required tool call's), so that a random model writes that text, in
// tokens of its own choosing, through the real tokenizer, template and
// reply parser, and stops. With none set, generations are free.
type Script struct {
	mu      sync.Mutex
	replies []*grammar.Grammar
	next    int
}

// NewScript installs a script on s, before s serves (so that its
// handlers see it without a race).
func NewScript(s *Server) *Script {
	sc := &Script{}
	s.scripted = sc.apply
	return sc
}

// Set makes replies the next generations' replies, in order.
func (sc *Script) Set(replies ...string) error {
	gs := make([]*grammar.Grammar, len(replies))
	for i, r := range replies {
		g, err := grammar.Parse("root ::= " + grammar.Quote(r) + "\n")
		if err != nil {
			return err
		}
		gs[i] = g
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.replies, sc.next = gs, 0
	return nil
}

func (sc *Script) apply(req runtime.Request) runtime.Request {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if len(sc.replies) > 0 {
		req.Constraint = sc.replies[min(sc.next, len(sc.replies)-1)]
		sc.next++
	}
	return req
}
