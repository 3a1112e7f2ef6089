package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime/grammar"
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

// queue is the scheduler's part of an engine: the sequences waiting for a
// place and those running, and the loop that steps them while there is
// work. Its fields are guarded by Engine.mu; the channels are made with
// the engine and never change.
type queue struct {
	wake, quit, loopDone chan struct{} // the loop: new work, Close, loop ended
	waiting              []*sequence
	running              []*sequence
	order                uint64 // arrivals so far: each sequence's place in line
	looping              bool   // the loop goroutine runs
	closed               bool
	// noPrefixCache keeps new sequences out of the prefix cache: a
	// benchmark's switch (SetPrefixCache).
	noPrefixCache bool
}

// newQueue is an empty queue whose loop has not started.
func newQueue() queue {
	return queue{wake: make(chan struct{}, 1), quit: make(chan struct{}), loopDone: make(chan struct{})}
}

// push appends seqs to the waiting line in arrival order and wakes the
// loop; it reports whether the loop must be started (it was not
// running, and now counts as running). Called with Engine.mu held.
func (q *queue) push(seqs []*sequence) (startLoop bool) {
	for _, s := range seqs {
		q.order++
		s.order = q.order
	}
	q.waiting = append(q.waiting, seqs...)
	startLoop = !q.looping
	q.looping = true
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return startLoop
}

// SetPrefixCache turns the use of the prefix cache by new sequences off
// (on: false) or back on: a benchmark (runtime/eval) measures what
// sharing a prompt's blocks saves.
func (e *Engine) SetPrefixCache(on bool) {
	e.mu.Lock()
	e.noPrefixCache = !on
	e.mu.Unlock()
}

// sequence is one generation inside the scheduler.
type sequence struct {
	ctx     context.Context
	req     Request
	stream  *Stream
	sampler *Sampler
	detok   *tokenizer.Stream
	stop    stopper
	tokens  []int32 // prompt, then generated tokens
	kv      *kvcache.Seq
	stored  int // leading tokens whose K/V are in the cache
	stats   Stats
	start   time.Time
	first   time.Time
	order   uint64 // arrival order: preemption takes the youngest

	// With Request.Constraint: the grammar's machine and the state after
	// the tokens generated so far.
	gm *grammar.Machine
	gs grammar.State

	spec         *spec    // speculation state, when the engine has a draft
	draftSampler *Sampler // how the draft model picks its proposals

	// parent is the first of StartN's samples, whose prompt blocks this
	// one waits for and shares.
	parent *sequence

	// adapter is the LoRA adapter the sequence runs with (nil: none), at
	// adapterScale (the request's multiplier times the adapter's scale).
	adapter      *adapterEntry
	adapterScale float32

	// images are where the prompt's images go and their embeddings.
	images []imageSpan

	// On a model with linear layers (linear.go): state is the sequence's
	// recurrent-state slot plus one while it runs (else 0); restore the
	// snapshot (plus one) its state starts from, taken with a prefix-cache
	// hit; snapAt the position whose state it leaves as a snapshot.
	state, restore int32
	snapAt         int
}

// waitsForParent reports whether s should stay queued because its parent
// is still reading the prompt they share (and will soon cache it).
// Called with e.mu held.
func (s *sequence) waitsForParent() bool {
	p := s.parent
	if p == nil {
		return false
	}
	select {
	case <-p.stream.Done():
		s.parent = nil
		return false
	default:
	}
	if p.stored >= len(s.tokens)-1 {
		s.parent = nil
		return false
	}
	return true
}

// Start queues a generation and returns the stream of its tokens. It fails
// at once for a request that can never run: bad options, a prompt longer
// than the context, or one larger than the whole KV pool.
func (e *Engine) Start(ctx context.Context, req Request) (*Stream, error) {
	sts, err := e.StartN(ctx, req, 1)
	if err != nil {
		return nil, err
	}
	return sts[0], nil
}

// MaxSamples is how many parallel samples StartN takes at most (OpenAI's
// n); samples beyond the engine's MaxSeqs wait for a place like any
// sequence.
const MaxSamples = 32

// StartN queues n samples of one request (OpenAI's n). Sample i draws
// with seed req.Sampler.Seed+i, so sample 0 is what Start gives. The
// first sample reads the prompt; the others wait for it and share its
// cache blocks through the prefix cache, computing only the prompt's last
// partial block themselves.
func (e *Engine) StartN(ctx context.Context, req Request, n int) ([]*Stream, error) {
	if n < 1 || n > MaxSamples {
		return nil, fmt.Errorf("%w: samples %d must be in [1, %d]", ErrBadRequest, n, MaxSamples)
	}
	if err := req.validate(); err != nil {
		return nil, err
	}
	var ids []int32
	var spans []imageSpan
	var err error
	if len(req.Images) > 0 {
		var starts [][]int
		if ids, starts, err = e.imageTokens(ctx, req); err == nil {
			spans, err = e.imageSpans(ctx, req, starts)
		}
	} else {
		ids, err = e.PromptTokensContext(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	if need := e.pool.BlocksNeeded(len(ids) + 1); need > e.pool.Blocks() {
		return nil, fmt.Errorf("%w: a prompt of %d tokens needs %d blocks, the pool has %d", ErrOutOfKV, len(ids), need, e.pool.Blocks())
	}
	for id := range req.Sampler.LogitBias {
		if int(id) >= e.model.Config.Vocab {
			return nil, fmt.Errorf("%w: logit bias for token %d, outside the vocabulary of %d", ErrBadRequest, id, e.model.Config.Vocab)
		}
	}
	if req.MaxTokens <= 0 {
		sts := make([]*Stream, n)
		for i := range sts {
			sts[i] = newStream(func() {})
			sts[i].finish(Stats{PromptTokens: len(ids)}, nil)
		}
		return sts, nil
	}
	var gm *grammar.Machine
	if req.Constraint != nil {
		gm = e.machine(req.Constraint)
		if err := checkConstraint(ctx, gm); err != nil {
			return nil, err
		}
	}
	ad, adScale, err := e.acquireAdapter(req.Adapters, n)
	if err != nil {
		return nil, err
	}
	seqs := make([]*sequence, n)
	for i := range seqs {
		r := req
		r.Sampler.Seed += uint64(i)
		seqs[i] = e.newSequence(ctx, r, slices.Clone(ids), gm)
		seqs[i].adapter, seqs[i].adapterScale = ad, adScale
		seqs[i].images = spans
		if i > 0 {
			seqs[i].parent = seqs[0]
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		for _, s := range seqs {
			s.stream.cancel()
			if s.adapter != nil {
				e.releaseAdapter(s.adapter)
			}
		}
		return nil, ErrEngineClosed
	}
	sts := make([]*Stream, n)
	for i, s := range seqs {
		sts[i] = s.stream
	}
	if e.push(seqs) {
		go e.loop()
	}
	return sts, nil
}

// newSequence makes the scheduler's state for one generation of ids,
// constrained by gm when the request has a constraint.
func (e *Engine) newSequence(ctx context.Context, req Request, ids []int32, gm *grammar.Machine) *sequence {
	ctx, cancel := context.WithCancel(ctx)
	s := &sequence{
		ctx: ctx, req: req, stream: newStream(cancel), sampler: NewSampler(req.Sampler),
		detok: tokenizer.NewStream(e.model.Tokenizer), stop: newStopper(req.Stop),
		tokens: ids, start: time.Now(),
	}
	s.sampler.prompt = len(ids)
	s.stats.PromptTokens = len(ids)
	if gm != nil {
		s.gm, s.gs = gm, gm.Start()
	}
	if e.drafter != nil && !req.Logprobs && req.Constraint == nil {
		s.spec = newSpec()
		do := req.Sampler
		do.Seed ^= 0xd7af7
		s.draftSampler = NewSampler(do)
		s.draftSampler.prompt = len(ids)
	}
	for _, id := range ids {
		s.detok.Next(int(id)) // the prompt primes the leading-space rules
	}
	return s
}

// PromptTokens returns the ids Start would run for req's prompt (its
// Tokens, its Messages rendered with the chat template, or its Prompt with
// BOS), checked against the vocabulary and the context.
func (e *Engine) PromptTokens(req Request) ([]int32, error) {
	return e.PromptTokensContext(context.Background(), req)
}

// PromptTokensContext is PromptTokens stopping when ctx is done. A
// prompt's text is encoded only as far as it can fit the context: a
// megabyte of text for a model of 4,096 positions is refused with
// ErrContextFull in the time it takes to see it is too long, not after
// it is all tokenized.
func (e *Engine) PromptTokensContext(ctx context.Context, req Request) ([]int32, error) {
	if len(req.Images) > 0 { // each image's tokens stand for it (imageTokens)
		ids, _, err := e.imageTokens(ctx, req)
		return ids, err
	}
	ids := slices.Clone(req.Tokens)
	ctxLen := e.model.Config.Context
	var enc []int
	var err error
	switch {
	case ids != nil:
	case req.Messages != nil:
		text, rerr := e.renderChat(req)
		if rerr != nil {
			return nil, rerr
		}
		// A model's template writes BOS itself where the model wants one;
		// the plain format does not.
		_, plain := e.chat.(chat.Plain)
		enc, err = tokenizer.EncodeSpecialBounded(ctx, e.model.Tokenizer, text, plain, ctxLen-1)
	default:
		e.prompts.Add(1)
		enc, err = tokenizer.EncodeBounded(ctx, e.model.Tokenizer, req.Prompt, true, ctxLen-1)
	}
	switch {
	case errors.Is(err, tokenizer.ErrTooLong):
		return nil, fmt.Errorf("%w: the prompt has more tokens than the context of %d holds", ErrContextFull, ctxLen)
	case err != nil:
		return nil, err
	}
	for _, id := range enc {
		ids = append(ids, int32(id))
	}
	switch {
	case len(ids) == 0:
		return nil, fmt.Errorf("%w: empty prompt: there is no token to start from", ErrBadRequest)
	case len(ids) >= ctxLen:
		return nil, fmt.Errorf("%w: %d tokens, the context is %d", ErrContextFull, len(ids), ctxLen)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= e.model.Config.Vocab {
			return nil, fmt.Errorf("%w: prompt token %d is outside the vocabulary of %d", ErrBadRequest, id, e.model.Config.Vocab)
		}
	}
	return ids, nil
}

// renderChat renders req.Messages with the model's chat template (and
// req.Tools, req.TemplateVars), ending with the start of the assistant's
// turn. Every chat prompt is rendered here, and counted with the prompts
// tokenized from text (poolStats.prompts): a request renders and
// tokenizes its prompt once, however many clients of the engine look at
// its tokens (PrepareChat, transcripts, logprobs, StartN).
func (e *Engine) renderChat(req Request) (string, error) {
	e.prompts.Add(1)
	tok := e.model.Tokenizer
	text, err := e.chat.Render(req.Messages, chat.Options{BOS: tok.Piece(tok.BOS()), EOS: tok.Piece(tok.EOS()), AddGenerationPrompt: true, Tools: req.Tools, Vars: req.TemplateVars})
	if err != nil {
		return "", fmt.Errorf("%w: chat template: %w", ErrBadRequest, err)
	}
	return text, nil
}

// loop runs steps while there is work, and sleeps when there is none.
func (e *Engine) loop() {
	defer close(e.loopDone)
	for {
		e.mu.Lock()
		closed := e.closed
		e.admit()
		idle := len(e.running) == 0
		if idle {
			e.pending = nil // the wait is no step's cost
		}
		e.mu.Unlock()
		if closed {
			e.failAll(ErrEngineClosed)
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
		if e.yield != nil {
			e.yield()
		}
	}
}

// admit moves waiting sequences to running, oldest first, while the pool
// can hold their prompts (so that admitted work rarely needs preempting).
// A parallel sample waiting for its parent's prompt is passed over, not
// waited for. It must be called with e.mu held.
func (e *Engine) admit() {
	for i := 0; i < len(e.waiting) && len(e.running) < e.net.maxRunning(); {
		s := e.waiting[i]
		if s.waitsForParent() {
			i++
			continue
		}
		if s.kv == nil {
			s.kv = e.pool.NewSeq()
			if s.adapter != nil {
				s.kv = e.newSeqIn(s.adapter, s.adapterScale)
			}
		}
		switch {
		case s.kv.Len() != 0 || e.noPrefixCache:
		case e.rs != nil: // linear layers: only where their state was kept
			e.sharePrefix(s)
		default:
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
		e.waiting = slices.Delete(e.waiting, i, i+1)
		e.running = append(e.running, s)
		e.takeState(s)
		if s.stats.Queued == 0 { // a preempted sequence comes back: its wait was the first
			s.stats.Queued = time.Since(s.start)
		}
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
	e.releaseState(s)
	if s.adapter != nil {
		e.releaseAdapter(s.adapter)
		s.adapter = nil
	}
	if s.spec != nil {
		e.drafter.release(s)
	}
	if s.stats.Stop == "" {
		// The last bytes may still complete a stop string.
		rest, stop := s.stop.feed(s.detok.Flush())
		if stop == "" {
			rest += s.stop.flush()
		}
		s.stats.Stop = stop
		if rest != "" {
			s.stream.push(Token{ID: -1, Text: rest})
		}
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
	if s.restore != 0 { // its claim on a snapshot: admission looks again
		e.rs.snaps[s.restore-1].pins--
		s.restore = 0
	}
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
