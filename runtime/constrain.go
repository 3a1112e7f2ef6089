package runtime

import (
	"errors"
	"fmt"

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

// maxMachines bounds the grammars whose machines (and masks) an engine keeps.
const maxMachines = 64

// machine returns the machine of g over the engine's vocabulary, shared by
// the requests with the same grammar.
func (e *Engine) machine(g *grammar.Grammar) *grammar.Machine {
	e.grammarMu.Lock()
	defer e.grammarMu.Unlock()
	if e.vocabIdx == nil {
		var ends []int
		for id := range e.model.Config.Vocab {
			if e.isEnd(id) {
				ends = append(ends, id)
			}
		}
		e.vocabIdx = grammar.TokenizerIndex(e.model.Tokenizer, ends)
		e.machines = map[string]*grammar.Machine{}
	}
	key := g.Source()
	if m, ok := e.machines[key]; ok && key != "" {
		return m
	}
	if len(e.machines) >= maxMachines {
		clear(e.machines)
	}
	m := grammar.NewMachine(g, e.vocabIdx)
	if key != "" {
		e.machines[key] = m
	}
	return m
}

// constraintMask is the mask of s's next token. The first token after BOS
// may lose a leading space in some tokenizers, so its mask feeds each
// token's actual bytes rather than the index's.
func (e *Engine) constraintMask(s *sequence) ([]uint32, error) {
	var mask []uint32
	if prev := int(s.tokens[len(s.tokens)-1]); prev == e.model.Tokenizer.BOS() {
		tok := e.model.Tokenizer
		mask = s.gm.MaskWith(s.gs, func(id int) []byte { return tok.TokenBytes(prev, id) })
	} else {
		mask = s.gm.Mask(s.gs)
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
	go s.gm.Mask(s.gs)
}
