package runtime

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/kvcache"
)

// work is one sequence's share of a step: its next n tokens, and whether
// the last of them is the sequence's last (so its logits are sampled).
type work struct {
	s   *sequence
	n   int
	out bool
}

// step runs one forward pass over the next tokens of the running sequences
// and samples a token for each sequence whose tokens are all in the cache.
func (e *Engine) step() error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.mu.Lock()
	e.dropCancelled()
	plan, copies := e.plan()
	e.peakBlocks = max(e.peakBlocks, e.pool.Stats().Used)
	e.mu.Unlock()
	if len(plan) == 0 {
		return nil
	}
	for _, c := range copies {
		e.be.CopyBlock(e.net.kv, int(c.Src), int(c.Dst))
	}
	e.steps.Add(1)
	b := e.batch(plan)
	if err := e.net.forward(b); err != nil {
		return err
	}
	next, err := e.sample(plan, b)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	j := 0
	for _, w := range plan {
		w.s.kv.Commit(w.s.tokens[w.s.stored : w.s.stored+w.n])
		w.s.stored += w.n
		if w.out {
			e.accept(w.s, next[j])
			j++
		}
	}
	return nil
}

// dropCancelled ends the sequences whose context is done. Called with e.mu.
func (e *Engine) dropCancelled() {
	for _, list := range []*[]*sequence{&e.running, &e.waiting} {
		*list = slices.DeleteFunc(*list, func(s *sequence) bool {
			if err := s.ctx.Err(); err != nil {
				e.finish(s, err)
				return true
			}
			return false
		})
	}
}

// plan picks the tokens of this step, oldest sequence first, within the
// batch's rows and outputs, reserving their cache slots. A sequence that
// cannot get blocks preempts the youngest sequence not yet planned (maybe
// itself). Called with e.mu held.
func (e *Engine) plan() ([]work, []kvcache.Copy) {
	n := e.net
	var plan []work
	var copies []kvcache.Copy
	rows, outs := 0, 0
	for i := 0; i < len(e.running) && rows < n.maxBatch; i++ {
		s := e.running[i]
		need := len(s.tokens) - s.stored
		w := work{s: s, n: min(need, n.maxBatch-rows)}
		w.out = w.n == need
		if w.out && outs == n.maxOut {
			if w.n == 1 {
				continue
			}
			w.n, w.out = w.n-1, false
		}
		cps, err := s.kv.Reserve(w.n)
		for errors.Is(err, kvcache.ErrFull) {
			victim := s
			for _, o := range e.running[i+1:] {
				if o.order > victim.order {
					victim = o
				}
			}
			if victim == s && len(e.running) == 1 {
				e.running = e.running[:0]
				e.finish(s, fmt.Errorf("%w: the sequence filled all %d blocks", ErrOutOfKV, e.pool.Blocks()))
				break
			}
			e.preempt(victim)
			if victim == s {
				i--
				break
			}
			cps, err = s.kv.Reserve(w.n)
		}
		if err != nil {
			continue
		}
		copies = append(copies, cps...)
		plan = append(plan, w)
		rows += w.n
		if w.out {
			outs++
		}
	}
	return plan, copies
}

// batch lays the plan out as the backend's batch: rows in plan order, each
// sequence's block table at its index in the plan.
func (e *Engine) batch(plan []work) backend.Batch {
	b := backend.Batch{BlockSize: e.pool.BlockSize()}
	for j, w := range plan {
		b.Tables = append(b.Tables, w.s.kv.Table())
		for t := range w.n {
			pos := w.s.stored + t
			b.Tokens = append(b.Tokens, w.s.tokens[pos])
			b.Pos = append(b.Pos, int32(pos))
			b.Seq = append(b.Seq, int32(j))
		}
		if w.out {
			b.Out = append(b.Out, int32(len(b.Tokens)-1))
		}
	}
	return b
}

// sample draws the next token of every output row, reading back as little
// as each sequence's sampler needs: the argmax ids, a top-k candidate set,
// or (only when needed) whole rows of logits.
func (e *Engine) sample(plan []work, b backend.Batch) ([]int32, error) {
	var argmax []int32
	var logits []float32
	vocab := e.model.Config.Vocab
	next := make([]int32, 0, len(b.Out))
	for _, w := range plan {
		if !w.out {
			continue
		}
		row := len(next)
		o := w.s.sampler.opts
		var err error
		switch {
		case o.greedy():
			if argmax == nil {
				argmax, err = e.be.Argmax(e.net.logits, len(b.Out))
			}
			if err == nil {
				next = append(next, argmax[row])
			}
		case o.usesCandidates(backend.MaxTopK):
			var ids []int32
			var vals []float32
			if ids, vals, err = e.be.TopK(e.net.logits, row, min(o.TopK, vocab)); err == nil {
				next = append(next, int32(w.s.sampler.SampleTop(ids, vals)))
			}
		default:
			if logits == nil {
				logits, err = e.be.Read(e.net.logits, len(b.Out))
			}
			if err == nil {
				l := slices.Clone(logits[row*vocab : (row+1)*vocab])
				next = append(next, int32(w.s.sampler.Sample(l, w.s.tokens)))
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return next, nil
}

// accept takes s's newly sampled token: it is emitted, or ends s (end of
// sequence, enough tokens, a full context). Called with e.mu held.
func (e *Engine) accept(s *sequence, next int32) {
	now := time.Now()
	if s.first.IsZero() {
		s.first = now
		s.stats.TimeToFirst = now.Sub(s.start)
		s.stats.Prefill = s.stats.TimeToFirst
	}
	s.stats.Generated++
	tok := e.model.Tokenizer
	done := false
	switch {
	case !s.req.IgnoreEOS && (int(next) == tok.EOS() || int(next) == tok.BOS()):
		s.stats.StoppedAtEOS = true
		done = true
	default:
		s.tokens = append(s.tokens, next)
		s.stream.push(Token{ID: next, Text: s.detok.Next(int(next))})
		if s.stats.Generated >= s.req.MaxTokens {
			done = true
		} else if len(s.tokens) >= e.model.Config.Context {
			s.stats.StoppedAtLength = true
			done = true
		}
	}
	if done {
		e.running = slices.DeleteFunc(e.running, func(x *sequence) bool { return x == s })
		e.finish(s, nil)
	}
}
