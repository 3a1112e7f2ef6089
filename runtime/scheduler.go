package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime/kvcache"
)

// The scheduler runs every live generation on one model: each step batches
// the next token of every decoding sequence and chunks of new prompts into
// one forward pass (continuous batching), over a paged KV cache whose
// blocks the sequences share by prefix. When the pool runs out, the
// youngest sequence is preempted: its blocks are freed and it is recomputed
// later from its tokens, which costs time but loses nothing.

// ErrOutOfKV is returned (wrapped) for a request whose prompt cannot fit in
// the KV pool even alone, or for a lone sequence that filled the pool.
var ErrOutOfKV = errors.New("out of KV cache memory")

// sequence is one generation inside the scheduler.
type sequence struct {
	ctx     context.Context
	req     Request
	stream  *Stream
	sampler *Sampler
	detok   *tokenizer.Stream
	tokens  []int32 // prompt, then generated tokens
	kv      *kvcache.Seq
	stored  int // leading tokens whose K/V are in the cache
	stats   Stats
	start   time.Time
	first   time.Time
	order   uint64 // arrival order: preemption takes the youngest

	spec         *spec    // speculation state, when the engine has a draft
	draftSampler *Sampler // how the draft model picks its proposals
}

// Start queues a generation and returns the stream of its tokens. It fails
// at once for a request that can never run: bad options, a prompt longer
// than the context, or one larger than the whole KV pool.
func (e *Engine) Start(ctx context.Context, req Request) (*Stream, error) {
	if err := req.Sampler.Validate(); err != nil {
		return nil, err
	}
	ids, err := e.PromptTokens(req)
	if err != nil {
		return nil, err
	}
	if need := e.pool.BlocksNeeded(len(ids) + 1); need > e.pool.Blocks() {
		return nil, fmt.Errorf("%w: a prompt of %d tokens needs %d blocks, the pool has %d", ErrOutOfKV, len(ids), need, e.pool.Blocks())
	}
	ctx, cancel := context.WithCancel(ctx)
	if req.MaxTokens <= 0 {
		st := newStream(cancel)
		st.finish(Stats{PromptTokens: len(ids)}, nil)
		cancel()
		return st, nil
	}
	s := &sequence{
		ctx: ctx, req: req, stream: newStream(cancel), sampler: NewSampler(req.Sampler),
		detok: tokenizer.NewStream(e.model.Tokenizer), tokens: ids, start: time.Now(),
	}
	s.stats.PromptTokens = len(ids)
	if e.drafter != nil {
		s.spec = newSpec()
		do := req.Sampler
		do.Seed ^= 0xd7af7
		s.draftSampler = NewSampler(do)
	}
	for _, id := range ids {
		s.detok.Next(int(id)) // the prompt primes the leading-space rules
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		cancel()
		return nil, errors.New("engine closed")
	}
	e.order++
	s.order = e.order
	e.waiting = append(e.waiting, s)
	if !e.looping {
		e.looping = true
		go e.loop()
	}
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return s.stream, nil
}

// PromptTokens returns the ids Start would run for req's prompt (its
// Tokens, its Messages rendered with the chat template, or its Prompt with
// BOS), checked against the vocabulary and the context.
func (e *Engine) PromptTokens(req Request) ([]int32, error) {
	ids := slices.Clone(req.Tokens)
	switch {
	case ids != nil:
	case req.Messages != nil:
		tok := e.model.Tokenizer
		text, err := e.chat.Render(req.Messages, chat.Options{BOS: tok.Piece(tok.BOS()), EOS: tok.Piece(tok.EOS()), AddGenerationPrompt: true})
		if err != nil {
			return nil, fmt.Errorf("chat template: %w", err)
		}
		// A model's template writes BOS itself where the model wants one;
		// the plain format does not.
		_, plain := e.chat.(chat.Plain)
		for _, id := range tokenizer.EncodeSpecial(tok, text, plain) {
			ids = append(ids, int32(id))
		}
	default:
		for _, id := range e.model.Tokenizer.Encode(req.Prompt, true) {
			ids = append(ids, int32(id))
		}
	}
	ctxLen := e.model.Config.Context
	switch {
	case len(ids) == 0:
		return nil, errors.New("empty prompt: there is no token to start from")
	case len(ids) >= ctxLen:
		return nil, fmt.Errorf("%w: %d tokens, the context is %d", ErrContextFull, len(ids), ctxLen)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= e.model.Config.Vocab {
			return nil, fmt.Errorf("prompt token %d is outside the vocabulary of %d", id, e.model.Config.Vocab)
		}
	}
	return ids, nil
}

// loop runs steps while there is work, and sleeps when there is none.
func (e *Engine) loop() {
	defer close(e.loopDone)
	for {
		e.mu.Lock()
		closed := e.closed
		e.admit()
		idle := len(e.running) == 0
		e.mu.Unlock()
		if closed {
			e.failAll(errors.New("engine closed"))
			return
		}
		if idle {
			select {
			case <-e.wake:
			case <-e.quit:
			}
			continue
		}
		if err := e.step(); err != nil {
			e.failAll(err)
		}
	}
}

// admit moves waiting sequences to running, oldest first, while the pool
// can hold their prompts (so that admitted work rarely needs preempting).
// It must be called with e.mu held.
func (e *Engine) admit() {
	for len(e.waiting) > 0 && len(e.running) < e.net.maxOut {
		s := e.waiting[0]
		if s.kv == nil {
			s.kv = e.pool.NewSeq()
		}
		if s.kv.Len() == 0 && !e.noPrefixCache {
			s.stored = s.kv.Share(s.tokens)
		}
		if !s.kv.CanReserve(len(s.tokens) - s.stored) {
			if len(e.running) == 0 {
				// Alone and still no room: the pool is held by cached
				// blocks only, which Reserve evicts; let step find out.
			} else {
				s.kv.Release()
				s.stored = 0
				return
			}
		}
		e.waiting = e.waiting[1:]
		e.running = append(e.running, s)
	}
}

// failAll ends every sequence with err.
func (e *Engine) failAll(err error) {
	e.mu.Lock()
	all := append(e.running, e.waiting...)
	e.running, e.waiting = nil, nil
	e.mu.Unlock()
	for _, s := range all {
		e.finish(s, err)
	}
}

// finish releases s's blocks and ends its stream.
func (e *Engine) finish(s *sequence, err error) {
	if s.kv != nil {
		s.kv.Release()
	}
	if s.spec != nil {
		e.drafter.release(s)
	}
	if rest := s.detok.Flush(); rest != "" {
		s.stream.push(Token{ID: -1, Text: rest})
	}
	if !s.first.IsZero() {
		s.stats.Decode = time.Since(s.first)
	}
	s.stream.finish(s.stats, err)
	s.stream.cancel()
}

// preempt frees s's blocks and queues it again at the front: it will be
// recomputed from its tokens (prompt and generated so far).
func (e *Engine) preempt(s *sequence) {
	s.kv.Release()
	if s.spec != nil {
		e.drafter.release(s)
	}
	s.stored = 0
	e.running = slices.DeleteFunc(e.running, func(x *sequence) bool { return x == s })
	e.waiting = append([]*sequence{s}, e.waiting...)
	e.preemptions++
}

// youngest returns the running sequence that arrived last.
func (e *Engine) youngest() *sequence {
	var y *sequence
	for _, s := range e.running {
		if y == nil || s.order > y.order {
			y = s
		}
	}
	return y
}
