package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tessera-llm/tessera/runtime/grammar"
)

// Constrained decoding (Request.Constraint): each sequence holds a state
// of its grammar's Machine; a step computes the state's token mask on the
// host (cached per state, so usually a lookup), hands it to the backend's
// Mask op on the logits row, and samples as usual from the masked row.
// On WebGPU the mask is a small upload and one dispatch: greedy decoding
// still reads back only ids, and top-k sampling only its candidates.

// ErrConstraint is returned (wrapped) when a constrained generation cannot
// go on: no token of the vocabulary continues the grammar.
var ErrConstraint = errors.New("constraint")

// maxMachines bounds the grammars whose machines (and masks) an engine
// keeps. Each machine is bounded by grammar.DefaultLimits, so what the
// cache holds is bounded too.
const maxMachines = 64

// grammarCache is constrained decoding's part of an engine: the
// vocabulary's index, made on first use, and the machines of recent
// grammars by source, so that requests with the same grammar share its
// cached masks. It has its own lock.
type grammarCache struct {
	mu       sync.Mutex
	vocabIdx *grammar.Index
	machines map[string]*grammar.Machine
}

// machine returns the machine of g over the index newIndex makes (once,
// on first use), shared by the requests with the same grammar. A machine
// grows with the states its requests meet; once it is Worn (a quarter of
// its budget kept, or spent), new requests get a fresh one, so that a
// grammar used for days never ends its requests for what earlier ones
// left behind. The old machine lives on with the sequences that still use
// it.
func (c *grammarCache) machine(g *grammar.Grammar, newIndex func() *grammar.Index) *grammar.Machine {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vocabIdx == nil {
		c.vocabIdx = newIndex()
		c.machines = map[string]*grammar.Machine{}
	}
	key := g.Source()
	if m, ok := c.machines[key]; ok && key != "" && !m.Worn() {
		return m
	}
	if len(c.machines) >= maxMachines {
		clear(c.machines)
	}
	m := grammar.NewMachine(g, c.vocabIdx)
	if key != "" {
		c.machines[key] = m
	}
	return m
}

// machine returns the machine of g over the engine's vocabulary
// (grammarCache.machine).
func (e *Engine) machine(g *grammar.Grammar) *grammar.Machine {
	return e.grammars.machine(g, e.vocabIndex)
}

// vocabIndex is the grammar index of the engine's vocabulary, its end
// tokens marked.
func (e *Engine) vocabIndex() *grammar.Index {
	var ends []int
	for id := range e.model.Config.Vocab {
		if e.isEnd(id) {
			ends = append(ends, id)
		}
	}
	return grammar.TokenizerIndex(e.model.Tokenizer, ends)
}

// checkConstraint computes the mask of gm's start state in the request's
// own goroutine, before the sequence is queued: a grammar whose matcher
// runs out of its budget at once (parses that multiply from the start)
// is refused there, with its error, and never costs the scheduler a step.
// The mask is cached for the sequence's first token.
func checkConstraint(ctx context.Context, gm *grammar.Machine) error {
	_, err := gm.Mask(ctx, gm.Start())
	if errors.Is(err, grammar.ErrBudget) {
		return fmt.Errorf("%w: constraint: %w", ErrBadRequest, err)
	}
	return err
}

// constraintMask is the mask of s's next token. The first token after BOS
// may lose a leading space in some tokenizers, so its mask feeds each
// token's actual bytes rather than the index's. A machine that runs out of
// its budget on the way ends the request as a bad one (the grammar's
// fault, not the server's); so does its context.
func (e *Engine) constraintMask(s *sequence) ([]uint32, error) {
	var mask []uint32
	var err error
	if prev := int(s.tokens[len(s.tokens)-1]); prev == e.model.Tokenizer.BOS() {
		tok := e.model.Tokenizer
		mask, err = s.gm.MaskWith(s.ctx, s.gs, func(id int) []byte { return tok.TokenBytes(prev, id) })
	} else {
		mask, err = s.gm.Mask(s.ctx, s.gs)
	}
	switch {
	case errors.Is(err, grammar.ErrBudget):
		return nil, fmt.Errorf("%w: constraint: %w", ErrBadRequest, err)
	case err != nil:
		return nil, err
	}
	for _, w := range mask {
		if w != 0 {
			return mask, nil
		}
	}
	return nil, fmt.Errorf("%w: no token of the vocabulary continues the grammar after %d generated tokens", ErrConstraint, s.stats.Generated)
}

// prefetchMask starts computing the mask of s's state when its machine
// has not met the state before, so that the work (up to a few hundred
// microseconds on a large vocabulary) overlaps the next step's forward
// pass on the device instead of following it; the step's Mask then finds
// it cached, or waits for the rest.
func (e *Engine) prefetchMask(s *sequence) {
	if s.gm == nil || s.gm.HasMask(s.gs) {
		return
	}
	go s.gm.Mask(s.ctx, s.gs)
}
