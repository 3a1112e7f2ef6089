package runtime

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tessera-llm/tessera/models/tokenizer"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/kvcache"
)

// work is one sequence's share of a step: its next n tokens (the last of
// them possibly draft tokens to verify), and whether the last is the
// sequence's last (so its logits are sampled).
type work struct {
	s     *sequence
	n     int
	out   bool
	draft []int32       // speculative: proposed tokens after the sequence's own
	q     [][]candidate // the distribution each draft token came from (nil: one-hot)
	match int           // the n-gram match the draft came from (0: a model's)
}

// rows is how many output rows w has: every row when it verifies drafts.
func (w work) outputs() int {
	switch {
	case w.draft != nil:
		return w.n
	case w.out:
		return 1
	}
	return 0
}

// token is the token of w's row t.
func (w work) token(t int) int32 {
	if pos := w.s.stored + t; pos < len(w.s.tokens) {
		return w.s.tokens[pos]
	}
	return w.draft[w.s.stored+t-len(w.s.tokens)]
}

// step runs one forward pass over the next tokens of the running sequences
// and samples a token for each sequence whose tokens are all in the cache;
// with a draft, sequences in decode state first get proposals, verified in
// the same pass.
func (e *Engine) step() error {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.loraMu.Lock()
	if e.loraDirty {
		if err := e.syncAdapters(); err != nil {
			e.loraMu.Unlock()
			return err
		}
	}
	e.loraMu.Unlock()
	start := time.Now()
	e.mu.Lock()
	e.closeCost(start)
	e.dropCancelled()
	drafting, room := e.drafting()
	e.mu.Unlock()
	proposals, err := e.propose(drafting, room)
	if err != nil {
		return err
	}
	var drafted time.Duration // a model draft's own steps: not the target's
	if e.drafter != nil && !e.drafter.lookahead() {
		drafted = time.Since(start)
	}
	e.mu.Lock()
	plan, copies := e.plan(proposals)
	chain := e.chainLength(plan)
	var restores [][2]int
	if e.rs != nil {
		restores = e.restores(plan)
	}
	e.mu.Unlock()
	if len(plan) == 0 {
		return nil
	}
	for _, c := range copies {
		e.net.copyBlock(int(c.Src), int(c.Dst))
	}
	for _, r := range restores { // linear layers' states, or rings, at a prefix hit's end
		e.net.copySlot(r[0], r[1])
	}
	e.steps.Add(1)
	b := e.batch(plan)
	images, both, err := e.setImages(plan)
	if err != nil {
		return err
	}
	e.net.images, e.net.bidirectional = images, both
	e.net.imagePadTokens(&b)
	err = e.net.forward(b)
	e.net.images, e.net.bidirectional = nil, false // the ops are queued; a chain's later steps read tokens
	if err != nil {
		return err
	}
	plain := chain == 1 && len(proposals) == 0
	for _, w := range plan {
		plain = plain && w.n == 1
	}
	var results []result
	if chain > 1 {
		results, err = e.runChain(plan, b, chain)
	} else {
		results, err = e.sample(plan, b)
	}
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.measurePool()
	for j, w := range plan {
		if results[j].err != nil { // a constraint with no way on: end the sequence, not the step
			e.running = slices.DeleteFunc(e.running, func(x *sequence) bool { return x == w.s })
			e.finish(w.s, results[j].err)
		}
	}
	took := time.Since(start)
	if plain { // a decode step with no draft: what speculation must beat
		e.plainStep = movingAverage(e.plainStep, took)
	}
	if e.drafter != nil {
		e.observeCosts(plan, chain, start, drafted)
	}
	for j, w := range plan {
		rows := make([]int32, w.n)
		for t := range rows {
			rows[t] = w.token(t)
		}
		if chain > 1 && w.out { // the chain's later steps stored the tokens it picked
			t := results[j].tokens
			rows = append(rows, t[:len(t)-1]...)
		}
		if results != nil && results[j].err != nil {
			continue
		}
		w.s.kv.Commit(rows)
		w.s.stored += len(rows)
		if w.s.snapAt > 0 && w.s.stored == w.s.snapAt {
			e.keepSnapshot(w.s)
		}
		if !w.out {
			continue
		}
		w.s.stats.Steps++
		emit, accepted := results[j].tokens, 0
		if w.draft != nil {
			accepted = len(emit) - 1
			keep := w.s.stored - len(w.draft) + accepted
			w.s.kv.Truncate(keep)
			w.s.stored = keep
			e.drafter.keep(w.s, keep)
			w.s.stats.Drafted += len(w.draft)
			w.s.stats.Accepted += accepted
			e.spec.observe(len(w.draft), accepted)
		}
		if w.s.spec != nil {
			w.s.spec.observe(len(w.s.tokens), emit, len(w.draft), w.match, accepted)
		}
		for _, tok := range emit {
			t := Token{ID: tok}
			if w.s.req.Logprobs {
				t.Logprob, t.Top = results[j].logprob, results[j].top
			}
			if e.accept(w.s, t) {
				break
			}
		}
	}
	return nil
}

// measurePool records the pool's use after a step: the peak of blocks in
// use, and the allocated and unused slots, summed over steps for the
// workload's waste. Called with e.mu held.
func (e *Engine) measurePool() { e.observe(e.pool.Stats()) }

// isEnd reports whether a sampled token ends a generation: EOS, BOS (a
// llama2.c model starting a new story), or one of a chat model's
// end-of-turn tokens.
func (e *Engine) isEnd(id int) bool {
	tok := e.model.Tokenizer
	if ec, ok := tok.(tokenizer.EndChecker); ok && ec.IsEnd(id) {
		return true
	}
	return id == tok.EOS() || id == tok.BOS()
}

// chainLength is how many decoding steps this step can run in one
// submission: up to e.chain when every running sequence is in the plan,
// those that sample decode greedily with no draft and no logprobs and
// have room in their budget, context and cache; 1 otherwise. The first
// step may read prompt chunks while other sequences decode: a prompt that
// ends in it decodes in the later steps with the others (its first token
// comes with the chain's), and one that does not waits for the chain to
// end. A step of prompts alone does not chain, so that a first token is
// never held back for the sake of throughput no other sequence needs.
// Sequences still queued wait too (they could not be admitted this step
// anyway), at most e.chain-1 steps more. Called with e.mu held, after
// plan.
func (e *Engine) chainLength(plan []work) int {
	if e.chain <= 1 || len(plan) != len(e.running) {
		return 1
	}
	n, decoding := e.chain, false
	for _, w := range plan {
		if !w.out {
			continue
		}
		decoding = decoding || w.s.stats.Generated > 0
		if w.draft != nil || !w.s.sampler.opts.greedy() && !e.chainsSampled(w.s) || w.s.req.Logprobs || w.s.gm != nil {
			return 1
		}
		// After this step's rows the sequence holds stored+w.n tokens.
		n = min(n, w.s.req.MaxTokens-w.s.stats.Generated, e.model.Config.Context-w.s.stored-w.n)
	}
	if n <= 1 || !decoding {
		return 1
	}
	for _, w := range plan {
		if w.out && !w.s.kv.CanReserve(w.n+n-1) {
			return 1
		}
	}
	for _, w := range plan {
		if !w.out {
			continue
		}
		if _, err := w.s.kv.Reserve(w.n + n - 1); err != nil { // cannot fail after CanReserve
			return 1
		}
	}
	return n
}

// runChain runs n decoding steps from b in one submission: each later
// step has one row per output row of b (the sequences that sample), whose
// tokens are the previous step's argmax, or its draw on the device when a
// sequence samples (devsample.go), kept on the device; one read-back at
// the end brings every picked id. Tokens past a stop are dropped later by
// accept, and their cache slots rolled back with the sequence. The results
// are one per sequence of b (plan's works), empty for those whose prompt
// chunk did not end in b.
func (e *Engine) runChain(plan []work, b backend.Batch, n int) ([]result, error) {
	outs := len(b.Out)
	ds := e.deviceSampler()
	sampled := false
	for _, r := range b.Out {
		sampled = sampled || !plan[b.Seq[r]].s.sampler.opts.greedy()
	}
	if sampled {
		rows := make([]backend.SampleRow, outs)
		for i, r := range b.Out {
			s := plan[b.Seq[r]].s
			rows[i] = s.sampler.sampleRow(s.tokens, e.model.Config.Vocab, n)
		}
		if err := ds.SetSampling(rows); err != nil {
			return nil, err
		}
	}
	keep := func() {
		if sampled {
			ds.KeepSampled(e.net.logits, outs)
		} else {
			e.be.Keep(e.net.logits, outs)
		}
	}
	keep()
	next := backend.Batch{BlockSize: b.BlockSize, Tables: b.Tables, States: b.States, Windows: b.Windows,
		Tokens: make([]int32, outs), Seq: make([]int32, outs), Out: make([]int32, outs)}
	for i, r := range b.Out {
		next.Seq[i], next.Out[i] = b.Seq[r], int32(i)
	}
	if b.Adapter != nil {
		next.Adapter, next.AdapterScale = make([]int32, outs), make([]float32, outs)
		for i, r := range b.Out {
			next.Adapter[i], next.AdapterScale[i] = b.Adapter[r], b.AdapterScale[r]
		}
	}
	for j := 1; j < n; j++ {
		next.Pos = make([]int32, outs)
		for i, r := range b.Out {
			next.Pos[i] = b.Pos[r] + int32(j)
		}
		if b.RopePos != nil { // M-RoPE after an image: its rows turn by fewer positions than they hold
			next.RopePos = make([]int32, 0, 4*outs)
			for i, r := range b.Out {
				p := mropePos(plan[b.Seq[r]].s.images, int(next.Pos[i]))
				next.RopePos = append(next.RopePos, p[:]...)
			}
		}
		if err := e.net.forwardChained(next); err != nil {
			return nil, err
		}
		e.steps.Add(1)
		keep()
	}
	ids, err := e.be.Kept()
	if err != nil {
		return nil, err
	}
	var drawn []backend.Drawn
	if sampled {
		drawn = ds.KeptDraws()
	}
	results := make([]result, len(b.Tables))
	for i, r := range b.Out {
		seq := b.Seq[r]
		if drawn != nil {
			plan[seq].s.sampler.skip(drawn[i].Draws)
		}
		for j := range n {
			results[seq].tokens = append(results[seq].tokens, ids[j*outs+i])
		}
	}
	return results, nil
}

// drafting lists the running sequences that may speculate this step
// (in decode state, speculation on), with the most each may draft (its
// budget, context and the step's outputs allow). Called with e.mu held.
func (e *Engine) drafting() ([]*sequence, []int) {
	if !e.pays() {
		return nil, nil
	}
	// A model draft first catches up with the whole sequence: worth it only
	// with enough tokens left to amortise that.
	model := !e.drafter.lookahead()
	var out []*sequence
	var room []int
	for _, s := range e.running {
		if s.spec == nil || s.stored != len(s.tokens)-1 {
			continue
		}
		left := s.req.MaxTokens - s.stats.Generated
		if model && !e.specAlways && (left < minDraftRun || e.drafter.catchUpCost(s) > time.Duration(left)*e.plainStep/20) {
			continue // the draft's catch-up would cost over 5% of what is left
		}
		ctx := e.model.Config.Context
		if e.draft != nil {
			ctx = min(ctx, e.draft.model.Config.Context)
		}
		k := min(maxDraft, left-1, ctx-len(s.tokens)-1, e.net.maxOut-1)
		if k > 0 {
			out, room = append(out, s), append(room, k)
		}
	}
	return out, room
}

// proposal is a draft for one sequence: its tokens, the distribution each
// came from (nil: one-hot) and the n-gram match it came from (0: a
// model's).
type proposal struct {
	tokens []int32
	q      [][]candidate
	match  int
}

// propose decides how many tokens each of seqs drafts this step (at most
// room[i]) and asks the draft for them. A draft that proposes for free
// (prompt lookup) is asked first for room[i] tokens, so that the decision
// sees what it would verify; what it proposed and does not verify is kept
// as the sequence's shadow, scored against the tokens the step emits.
func (e *Engine) propose(seqs []*sequence, room []int) (map[*sequence]proposal, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	var offered []proposal
	if e.drafter.lookahead() {
		var err error
		if offered, err = e.drafter.propose(seqs, room); err != nil {
			return nil, fmt.Errorf("draft: %w", err)
		}
	}
	e.mu.Lock()
	ks := e.draftLengths(seqs, room, offered)
	e.mu.Unlock()
	if offered == nil {
		if !slices.ContainsFunc(ks, func(k int) bool { return k > 0 }) {
			return nil, nil
		}
		var err error
		if offered, err = e.drafter.propose(seqs, ks); err != nil {
			return nil, fmt.Errorf("draft: %w", err)
		}
	}
	out := map[*sequence]proposal{}
	for i, s := range seqs {
		p := offered[i]
		if k := min(ks[i], len(p.tokens)); k > 0 {
			p.tokens, p.q = p.tokens[:k], p.q[:min(k, len(p.q))]
			out[s] = p
		} else if len(p.tokens) > 0 {
			s.spec.shadow, s.spec.shadowN, s.spec.shadowAt = p.tokens, p.match, len(s.tokens)
		}
	}
	return out, nil
}

// draftLengths is how many tokens each of seqs drafts this step: what
// the policy (chooseDrafts) finds pays, the best length on its own for
// a sequence whose probe is due or with SpeculateAlways. offered is the
// lookahead draft's proposals (nil: room is what may be drafted, at the
// acceptance of a model draft). Called with e.mu held.
func (e *Engine) draftLengths(seqs []*sequence, room []int, offered []proposal) []int {
	offers := make([]draftOffer, len(seqs))
	for i, s := range seqs {
		o := draftOffer{avail: room[i], alpha: s.spec.alpha(0)}
		if offered != nil {
			o.avail, o.alpha = len(offered[i].tokens), s.spec.alpha(offered[i].match)
		}
		offers[i] = o
	}
	ks, best := e.costs.chooseDrafts(e.decoding(), offers, e.drafter.stepTime())
	for i, s := range seqs {
		switch {
		case ks[i] > 0:
			s.spec.probeAt = firstProbe
		case e.specAlways:
			ks[i] = best[i]
		case best[i] > 0 && s.spec.plainRun >= s.spec.probeAt:
			ks[i] = best[i] // measure again: the costs may have changed, a model draft's acceptance too
			s.spec.probeAt = min(2*s.spec.probeAt, maxProbe)
		}
	}
	return ks
}

// decoding is how many running sequences decode this step (a row each).
// Called with e.mu held.
func (e *Engine) decoding() int {
	n := 0
	for _, s := range e.running {
		if s.stored == len(s.tokens)-1 {
			n++
		}
	}
	return max(n, 1)
}

// observeCosts notes a decode step's shape, to be charged the time
// from its start to the next step's start (closeCost): what the step
// costs the scheduler, emitting its tokens and going round the loop
// included, which a verification pays once for fewer tokens than a
// chain. Steps that read prompts are not decode steps and are left out.
// Called with e.mu held.
func (e *Engine) observeCosts(plan []work, chain int, start time.Time, drafted time.Duration) {
	c := pendingCost{seqs: len(plan), chain: chain, start: start, drafted: drafted}
	for _, w := range plan {
		if !w.out || w.n != 1+len(w.draft) || w.s.stats.Generated == 0 {
			return
		}
		c.rows += w.n
		c.drafts = c.drafts || w.draft != nil
	}
	e.pending = &c
}

// pendingCost is a decode step waiting for the next step's start to
// know what it cost.
type pendingCost struct {
	seqs, rows, chain int
	drafts            bool
	start             time.Time
	drafted           time.Duration // a model draft's own steps, not the target's
}

// closeCost records the pending decode step's time in the engine's step
// costs, now that the next step starts at now: a plain step (or chain),
// or one submission of drafts and their verification. Called with e.mu
// held; the loop drops the pending step when it goes idle.
func (e *Engine) closeCost(now time.Time) {
	c := e.pending
	if c == nil {
		return
	}
	e.pending = nil
	took := now.Sub(c.start)
	if !c.drafts {
		e.costs.observePlain(c.seqs, c.chain, took)
		if c.chain == 1 {
			e.costs.observeRows(c.seqs, c.rows, took)
		}
		return
	}
	e.costs.observeRows(c.seqs, c.rows, took-c.drafted)
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
func (e *Engine) plan(proposals map[*sequence]proposal) ([]work, []kvcache.Copy) {
	n := e.net
	var plan []work
	var copies []kvcache.Copy
	rows, outs := 0, 0
	only := e.imageOnly()
	for i := 0; i < len(e.running) && rows < n.maxBatch; i++ {
		s := e.running[i]
		if only != nil && s != only {
			continue
		}
		need := len(s.tokens) - s.stored
		w := work{s: s, n: min(need, n.maxBatch-rows)}
		if s.snapAt > s.stored && s.stored+w.n > s.snapAt {
			w.n = s.snapAt - s.stored // the chunk ends where a snapshot is kept
		}
		if s.images != nil {
			w.n = e.imageChunk(s, w.n)
		}
		w.out = w.n == need
		if w.out && outs == n.maxOut {
			if w.n == 1 {
				continue
			}
			w.n, w.out = w.n-1, false
		}
		if p, ok := proposals[s]; ok && w.out && w.n == 1 {
			// Verify the draft too, as far as rows and outputs allow.
			k := min(len(p.tokens), n.maxBatch-rows-1, n.maxOut-outs-1)
			if k > 0 {
				w.draft, w.q, w.n, w.match = p.tokens[:k], p.q[:min(k, len(p.q))], 1+k, p.match
			}
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
		outs += w.outputs()
	}
	return plan, copies
}

// batch lays the plan out as the backend's batch: rows in plan order, each
// sequence's block table at its index in the plan.
func (e *Engine) batch(plan []work) backend.Batch {
	b := backend.Batch{BlockSize: e.pool.BlockSize()}
	adapted := slices.ContainsFunc(plan, func(w work) bool { return w.s.adapter != nil })
	for j, w := range plan {
		b.Tables = append(b.Tables, w.s.kv.Table())
		if e.net.slotted() {
			b.States = append(b.States, w.s.state-1)
		}
		slot, scale := int32(-1), float32(0)
		if w.s.adapter != nil {
			slot, scale = int32(w.s.adapter.slot), w.s.adapterScale
		}
		for t := range w.n {
			pos := w.s.stored + t
			b.Tokens = append(b.Tokens, w.token(t))
			b.Pos = append(b.Pos, int32(pos))
			b.Seq = append(b.Seq, int32(j))
			if adapted {
				b.Adapter, b.AdapterScale = append(b.Adapter, slot), append(b.AdapterScale, scale)
			}
		}
		for o := w.outputs(); o > 0; o-- {
			b.Out = append(b.Out, int32(len(b.Tokens)-o))
		}
	}
	e.net.windows(&b)
	e.ropePositions(plan, &b)
	return b
}

// result is what a step gives one work: the tokens to emit (one, or with
// a draft the accepted draft tokens and the target's next), and with
// Request.Logprobs the log-probabilities of the one token.
type result struct {
	tokens  []int32
	logprob float32
	top     []Alternative
	err     error // the sequence cannot go on (its constraint allows no token)
}

// sample draws the next token of every output row, reading back as little
// as each sequence's sampler needs: the argmax ids, a top-k candidate set,
// or (only when needed) whole rows of logits; drafts are verified here.
func (e *Engine) sample(plan []work, b backend.Batch) ([]result, error) {
	var argmax []int32
	var logits []float32
	vocab := e.model.Config.Vocab
	needArgmax := func() (err error) {
		if argmax == nil {
			argmax, err = e.be.Argmax(e.net.logits, len(b.Out))
		}
		return err
	}
	needLogits := func() (err error) {
		if logits == nil {
			logits, err = e.be.Read(e.net.logits, len(b.Out))
		}
		return err
	}
	results := make([]result, len(plan))
	// Constrained rows are masked on the backend before anything reads
	// them; logprobs, which are the raw model's, are read first.
	masks := make([][]uint32, len(plan))
	out := 0
	for j, w := range plan {
		if w.out && w.s.gm != nil {
			if w.s.req.Logprobs {
				if err := needLogits(); err != nil {
					return nil, err
				}
			}
			mask, err := e.constraintMask(w.s)
			if err != nil {
				results[j].err = err
			} else {
				masks[j] = mask
				e.be.Mask(e.net.logits, out, mask)
			}
		}
		out += w.outputs()
	}
	// Rows drawn on the device (penalised there in place).
	drawn, onDevice, err := e.sampleOnDevice(plan, results)
	if err != nil {
		return nil, err
	}
	row := func(j, r int) []float32 {
		x := slices.Clone(logits[r*vocab : (r+1)*vocab])
		if masks[j] != nil { // logits read before the mask
			backend.MaskRow(x, masks[j])
		}
		return x
	}
	out = 0 // output row of the current work
	for j, w := range plan {
		o := w.s.sampler.opts
		var err error
		switch {
		case results[j].err != nil:
		case !w.out:
		case w.draft != nil && o.greedy():
			if err = needArgmax(); err == nil {
				results[j].tokens = verifyGreedy(w.draft, argmax[out:out+w.n])
			}
		case w.draft != nil:
			if err = needLogits(); err == nil {
				rows := make([][]float32, w.n)
				for t := range rows {
					rows[t] = row(j, out+t)
				}
				results[j].tokens = verifySampled(w.s.sampler, w.s.tokens, w.draft, w.q, rows)
			}
		case onDevice != nil && onDevice[j]:
			d := drawn[out]
			w.s.sampler.skip(d.Draws)
			results[j].tokens = []int32{d.Token}
		case o.greedy():
			if err = needArgmax(); err == nil {
				results[j].tokens = []int32{argmax[out]}
			}
		case o.usesCandidates(backend.MaxTopK):
			var ids []int32
			var vals []float32
			if ids, vals, err = e.be.TopK(e.net.logits, out, min(o.TopK, vocab)); err == nil {
				results[j].tokens = []int32{int32(w.s.sampler.SampleTop(ids, vals))}
			}
		default:
			if err = needLogits(); err == nil {
				results[j].tokens = []int32{int32(w.s.sampler.Sample(row(j, out), w.s.tokens))}
			}
		}
		if err == nil && w.out && w.s.req.Logprobs && results[j].err == nil {
			if err = needLogits(); err == nil {
				r := &results[j]
				r.logprob, r.top = Logprobs(logits[out*vocab:(out+1)*vocab], r.tokens[0], w.s.req.TopLogprobs)
			}
		}
		if err != nil {
			return nil, err
		}
		out += w.outputs()
	}
	return results, nil
}

// accept takes s's newly sampled token: it is emitted, or ends s (end of
// sequence, a stop string, enough tokens, a full context), in which case
// accept reports true. Called with e.mu held.
func (e *Engine) accept(s *sequence, t Token) bool {
	now := time.Now()
	t.Time = now
	if s.first.IsZero() {
		s.first = now
		s.stats.TimeToFirst = now.Sub(s.start)
		s.stats.Prefill = s.stats.TimeToFirst
	}
	s.stats.Generated++
	done := false
	switch {
	case !s.req.IgnoreEOS && e.isEnd(int(t.ID)):
		s.stats.StoppedAtEOS = true
		done = true
	default:
		s.tokens = append(s.tokens, t.ID)
		var text string
		text, t.Bytes = s.detok.NextBytes(int(t.ID))
		if s.gm != nil {
			s.gs = s.gm.AdvanceBytes(s.gs, t.Bytes)
		}
		t.Text, s.stats.Stop = s.stop.feed(text)
		s.stream.push(t)
		switch {
		case s.stats.Stop != "":
			done = true
		case s.gm != nil && s.gm.Done(s.gs):
			s.stats.Complete = true
			done = true
		case s.stats.Generated >= s.req.MaxTokens:
			done = true
		case len(s.tokens) >= e.model.Config.Context:
			s.stats.StoppedAtLength = true
			done = true
		}
	}
	if done {
		e.running = slices.DeleteFunc(e.running, func(x *sequence) bool { return x == s })
		e.finish(s, nil)
	} else {
		e.prefetchMask(s)
	}
	return done
}
