package runtime

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tessera-llm/tessera/runtime/backend"
)

// Speculative decoding (Leviathan et al. 2023; Chen et al. 2023): a cheap
// draft proposes k tokens, the target scores all k+1 positions in one
// forward pass, and a token is accepted by a rule that keeps the output
// distribution exactly the target's: exact match under greedy decoding,
// rejection sampling (accept d with probability min(1, p(d)/q(d)), else
// draw from max(0, p-q) normalised) under sampling. Rejected positions are
// rolled back in both caches.
//
// Two draft sources sit behind one interface: a smaller model with the same
// vocabulary, and prompt lookup ("ngram"), which proposes what followed the
// last earlier occurrence of the sequence's final tokens.

// ErrDraftVocab is returned (wrapped) for a draft model whose vocabulary is
// not the target's.
var ErrDraftVocab = errors.New("draft vocabulary differs from the target's")

// ErrDraftTooLarge is returned (wrapped) for a draft model too costly to
// speed anything up.
var ErrDraftTooLarge = errors.New("draft model too large")

// speculation is speculative decoding's part of an engine: the draft, set
// at load, and what decides at each step whether drafting pays. The
// measured fields are guarded by Engine.mu.
type speculation struct {
	drafter    drafter // the draft, or nil
	draft      *Engine // the draft model's engine (driven by this one's scheduler)
	draftName  string  // "ngram" or the draft model's path
	specAlways bool    // speculate even when it does not pay
	// specOff switches speculation off: a benchmark's switch
	// (SetSpeculation).
	specOff   bool
	plainStep time.Duration // moving average of a decode step without drafts
	costs     stepCosts     // measured decode steps, by shape (specpolicy.go)
	pending   *pendingCost  // the last decode step, until the next starts (step.go)
	spec      SpecMetrics   // the proposals made and accepted
}

// pays reports whether sequences speculate this step: there is a draft,
// speculation is on, and a draft step is cheap enough against a plain
// one (or speculation is forced). Called with Engine.mu held.
func (sp *speculation) pays() bool {
	return sp.drafter != nil && !sp.specOff && (sp.specAlways || !draftTooSlow(sp.drafter.stepTime(), sp.plainStep))
}

// DraftName names the engine's speculative draft: "ngram" or the draft
// model's path; "" without one.
func (e *Engine) DraftName() string {
	if e.drafter == nil {
		return ""
	}
	return e.draftName
}

// SetSpeculation turns speculative decoding off (on: false) or back on,
// for an engine with a draft: a benchmark (runtime/eval) compares the two
// on the same target. Running sequences follow it from their next step.
func (e *Engine) SetSpeculation(on bool) {
	e.mu.Lock()
	e.specOff = !on
	e.mu.Unlock()
}

// drafter proposes tokens for sequences in decode state.
type drafter interface {
	// propose returns, for each sequence, up to ks[i] tokens to follow its
	// tokens, the distribution each was drawn from (nil: one-hot), and
	// the length of the n-gram match it came from (0 for a model).
	propose(seqs []*sequence, ks []int) ([]proposal, error)
	// lookahead reports that proposing costs next to nothing, so the
	// scheduler proposes at every step and decides after seeing the
	// proposals how much of them to verify.
	lookahead() bool
	// keep tells the draft that s now has n tokens in the target's cache.
	keep(s *sequence, n int)
	// release frees what the draft holds for s.
	release(s *sequence)
	// stepTime is the measured time of one draft step (0: free, or not
	// measured yet).
	stepTime() time.Duration
	// catchUpCost estimates what the draft would spend reading s's tokens
	// it has not seen before its first proposal.
	catchUpCost(s *sequence) time.Duration
}

const (
	maxDraft    = 8  // the longest proposal
	minDraftRun = 64 // tokens left under which a model draft is not started
)

// draftPays reports whether a draft that reads draftBytes of weights per
// token can speed up a target that reads targetBytes: even if every draft
// token were accepted, k drafts and one verification cost 1 + k·c target
// steps for k+1 tokens, which gains nothing as the cost ratio c nears one.
func draftPays(draftBytes, targetBytes int64) bool {
	return float64(draftBytes) < 0.6*float64(targetBytes)
}

// checkDraftVocab refuses a draft whose tokens differ from the target's.
func checkDraftVocab(target, draft *Engine) error {
	t, d := target.model.Tokenizer, draft.model.Tokenizer
	if t.VocabSize() != d.VocabSize() {
		return fmt.Errorf("%w: %d tokens against %d", ErrDraftVocab, d.VocabSize(), t.VocabSize())
	}
	// Compare what each token means as text, not how the file spells it
	// (llama2.c files write BOS as "\n<s>\n", GGUF as "<s>").
	for id := range t.VocabSize() {
		if tb, db := t.TokenBytes(-1, id), d.TokenBytes(-1, id); string(tb) != string(db) {
			return fmt.Errorf("%w: token %d is %q in the draft and %q in the target", ErrDraftVocab, id, db, tb)
		}
	}
	if t.BOS() != d.BOS() || t.EOS() != d.EOS() {
		return fmt.Errorf("%w: BOS/EOS %d/%d in the draft, %d/%d in the target", ErrDraftVocab, d.BOS(), d.EOS(), t.BOS(), t.EOS())
	}
	return nil
}

// modelDraft drafts with a smaller model, run by hand from the target's
// scheduler: its own weights, backend and KV pool.
type modelDraft struct {
	e       *Engine
	step    time.Duration // moving average of a one-token-per-sequence step
	perRead time.Duration // prompt processing time per token, measured at load
}

func (m *modelDraft) stepTime() time.Duration { return m.step }

func (m *modelDraft) catchUpCost(s *sequence) time.Duration {
	return time.Duration(len(s.tokens)-s.spec.stored) * m.perRead
}

func (m *modelDraft) release(s *sequence) {
	if s.spec.draft != nil {
		s.spec.draft.Release()
		s.spec.stored = 0
	}
}

func (m *modelDraft) keep(s *sequence, n int) {
	if d := s.spec.draft; d != nil && d.Len() > n {
		d.Truncate(n)
		s.spec.stored = n
	}
}

// propose catches each sequence's draft cache up with its tokens, then runs
// the draft one token at a time for all sequences together.
func (m *modelDraft) propose(seqs []*sequence, ks []int) ([]proposal, error) {
	out, dists, err := m.run(seqs, ks)
	if err != nil {
		return nil, err
	}
	ps := make([]proposal, len(seqs))
	for i := range ps {
		ps[i] = proposal{tokens: out[i], q: dists[i]}
	}
	return ps, nil
}

func (m *modelDraft) lookahead() bool { return false }

// run drafts up to ks[i] tokens for each sequence, and the distribution
// each was drawn from.
func (m *modelDraft) run(seqs []*sequence, ks []int) ([][]int32, [][][]candidate, error) {
	e := m.e
	out := make([][]int32, len(seqs))
	dists := make([][][]candidate, len(seqs))
	live := make([]int, 0, len(seqs)) // indices still drafting
	for i, s := range seqs {
		if s.spec.draft == nil {
			s.spec.draft = e.pool.NewSeq()
		}
		if ks[i] > 0 {
			live = append(live, i)
		}
	}
	next := make([][]int32, len(seqs)) // the tokens each feeds this round
	for i, s := range seqs {
		next[i] = s.tokens[s.spec.stored:]
	}
	for round := 0; len(live) > 0; round++ {
		// Feed every live sequence's pending tokens, in chunks that fit.
		var b backend.Batch
		b.BlockSize = e.pool.BlockSize()
		var fed, waiting []int
		rows := 0
		for _, i := range live {
			s := seqs[i]
			toks := next[i]
			if rows+len(toks) > e.net.maxBatch || len(b.Out) == e.net.maxOut {
				waiting = append(waiting, i) // next round
				continue
			}
			if _, err := s.spec.draft.Reserve(len(toks)); err != nil {
				continue // the draft's pool is full: this sequence drafts no more
			}
			j := len(b.Tables)
			b.Tables = append(b.Tables, s.spec.draft.Table())
			for t, tok := range toks {
				b.Tokens = append(b.Tokens, tok)
				b.Pos = append(b.Pos, int32(s.spec.stored+t))
				b.Seq = append(b.Seq, int32(j))
			}
			b.Out = append(b.Out, int32(len(b.Tokens)-1))
			rows += len(toks)
			fed = append(fed, i)
		}
		if len(fed) == 0 {
			if len(waiting) == 0 {
				break
			}
			// A catch-up longer than a batch: feed all but its last token
			// in pieces, then draft as usual.
			i := waiting[0]
			rest, err := m.catchUp(seqs[i], next[i])
			if err != nil {
				return nil, nil, err
			}
			if len(rest) == len(next[i]) { // no room in the draft's pool
				live = waiting[1:]
				continue
			}
			next[i] = rest
			live = waiting
			continue
		}
		start := time.Now()
		if err := e.net.forward(b); err != nil {
			return nil, nil, err
		}
		logits, err := e.be.Read(e.net.logits, len(b.Out))
		if err != nil {
			return nil, nil, err
		}
		if rows == len(fed) { // a plain draft step, no catch-up: time it
			m.step = movingAverage(m.step, time.Since(start))
		}
		vocab := e.model.Config.Vocab
		still := waiting
		for j, i := range fed {
			s := seqs[i]
			s.spec.draft.Commit(next[i])
			s.spec.stored += len(next[i])
			s.stats.DraftSteps++
			row := append([]float32(nil), logits[j*vocab:(j+1)*vocab]...)
			dist := cloneDist(s.draftSampler.Dist(row, append(s.tokens, out[i]...)))
			tok := int32(s.draftSampler.pick(dist))
			out[i] = append(out[i], tok)
			dists[i] = append(dists[i], dist)
			next[i] = []int32{tok}
			if len(out[i]) < ks[i] {
				still = append(still, i)
			}
		}
		live = still
	}
	return out, dists, nil
}

// catchUp feeds all but the last of a long run of tokens to a sequence's
// draft cache in batch-sized chunks (after admission or preemption), and
// returns what is left to feed.
func (m *modelDraft) catchUp(s *sequence, toks []int32) ([]int32, error) {
	e := m.e
	for len(toks) > 1 {
		n := min(len(toks)-1, e.net.maxBatch)
		if _, err := s.spec.draft.Reserve(n); err != nil {
			return toks, nil // no room in the draft's pool
		}
		b := backend.Batch{BlockSize: e.pool.BlockSize(), Tables: [][]int32{s.spec.draft.Table()}}
		for t, tok := range toks[:n] {
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(s.spec.stored+t))
			b.Seq = append(b.Seq, 0)
		}
		if err := e.net.forward(b); err != nil {
			return nil, err
		}
		s.spec.draft.Commit(toks[:n])
		s.spec.stored += n
		toks = toks[n:]
	}
	return toks, nil
}

func cloneDist(c []candidate) []candidate { return append([]candidate(nil), c...) }

// ngramDraft proposes by prompt lookup: find the latest earlier occurrence
// of the sequence's last n tokens (longest n first) and propose what
// followed it. It needs no model and no cache.
type ngramDraft struct{}

const ngramMax, ngramMin = 4, 1

func (ngramDraft) propose(seqs []*sequence, ks []int) ([]proposal, error) {
	out := make([]proposal, len(seqs))
	for i, s := range seqs {
		out[i].tokens, out[i].match = lookup(s.tokens, ks[i])
	}
	return out, nil
}

func (ngramDraft) lookahead() bool { return true }

func (ngramDraft) keep(*sequence, int)                 {}
func (ngramDraft) stepTime() time.Duration             { return 0 }
func (ngramDraft) catchUpCost(*sequence) time.Duration { return 0 }
func (ngramDraft) release(*sequence)                   {}

// lookup returns up to k tokens that followed the most recent earlier
// occurrence of the longest suffix of toks (ngramMax down to ngramMin),
// and that suffix's length.
func lookup(toks []int32, k int) ([]int32, int) {
	if k <= 0 {
		return nil, 0
	}
	for n := min(ngramMax, len(toks)-1); n >= ngramMin; n-- {
		suffix := toks[len(toks)-n:]
		for start := len(toks) - n - 1; start >= 0; start-- {
			if equalTokens(toks[start:start+n], suffix) {
				from := start + n
				return append([]int32(nil), toks[from:min(len(toks), from+k)]...), n
			}
		}
	}
	return nil, 0
}

func equalTokens(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// verifyGreedy accepts draft tokens while they equal the target's argmax
// after the token before them; it returns the accepted tokens and the
// target's next (a correction, or a bonus when every draft was right).
func verifyGreedy(draft, target []int32) []int32 {
	var out []int32
	for i, d := range draft {
		if d != target[i] {
			return append(out, target[i])
		}
		out = append(out, d)
	}
	return append(out, target[len(draft)])
}

// verifySampled is the rejection rule: draft token d, drawn from q, is kept
// with probability min(1, p(d)/q(d)), where p is the target's distribution
// (the sampler's, after its filters); at the first rejection the token is
// drawn from max(0, p-q) normalised instead, and if all are kept a bonus is
// drawn from p after the last. The tokens that come out are distributed
// exactly as the target's own samples. A nil q is one-hot (a deterministic
// draft such as prompt lookup): see verifyOneHot.
func verifySampled(s *Sampler, history, draft []int32, q [][]candidate, rows [][]float32) []int32 {
	if q == nil {
		return verifyOneHot(s, history, draft, rows)
	}
	return verifyWith(acceptRatio, s, history, draft, q, rows)
}

// verifyOneHot verifies a deterministic draft by sampling each row as
// plain decoding would, with the same stream, and keeping the drafts
// while they equal the sampled token. For a one-hot q this is the
// rejection rule itself (d is kept with chance p(d), and otherwise the
// token comes from p without d, renormalised), but it draws exactly the
// stream values plain decoding draws: the tokens are those of a run
// without the draft, whenever the policy drafts, not just distributed
// as they are.
func verifyOneHot(s *Sampler, history, draft []int32, rows [][]float32) []int32 {
	hist := slices.Clone(history)
	var out []int32
	for i, d := range draft {
		tok := int32(s.Sample(rows[i], hist))
		out = append(out, tok)
		if tok != d {
			return out
		}
		hist = append(hist, d)
	}
	return append(out, int32(s.Sample(rows[len(draft)], hist)))
}

// acceptRatio is the rule that keeps the target's distribution: accept a
// draft token with probability min(1, p/q), u being uniform in [0, 1).
func acceptRatio(p, q float32, u float64) bool { return q > 0 && u < float64(p/q) }

// verifyWith is verifySampled with the acceptance rule as a parameter, so
// that a test can show a wrong rule is caught.
func verifyWith(accept func(p, q float32, u float64) bool, s *Sampler, history, draft []int32, q [][]candidate, rows [][]float32) []int32 {
	hist := slices.Clone(history)
	var out []int32
	for i, d := range draft {
		p := s.Dist(rows[i], hist)
		var qi []candidate
		if i < len(q) {
			qi = q[i]
		}
		pd, qd := prob(p, d), float32(1)
		if qi != nil {
			qd = prob(qi, d)
		}
		if accept(pd, qd, s.rng.Float64()) {
			out = append(out, d)
			hist = append(hist, d)
			continue
		}
		return append(out, int32(s.pick(residual(p, qi, d))))
	}
	return append(out, int32(s.pick(s.Dist(rows[len(draft)], hist))))
}

// prob is the probability of id under c.
func prob(c []candidate, id int32) float32 {
	for _, x := range c {
		if x.id == int(id) {
			return x.p
		}
	}
	return 0
}

// residual is max(0, p - q) normalised; q nil means one-hot at d. If p
// and q are equal (so nothing is left) it is p.
func residual(p, q []candidate, d int32) []candidate {
	qp := map[int]float32{}
	if q == nil {
		qp[int(d)] = 1
	}
	for _, x := range q {
		qp[x.id] = x.p
	}
	var r []candidate
	var sum float64
	for _, x := range p {
		if v := x.p - qp[x.id]; v > 0 {
			r = append(r, candidate{x.id, v})
			sum += float64(v)
		}
	}
	if sum == 0 {
		return p
	}
	for i := range r {
		r[i].p = float32(float64(r[i].p) / sum)
	}
	return r
}

// movingAverage folds a new measurement into an average that follows the
// last few (the first one starts it).
func movingAverage(avg, x time.Duration) time.Duration {
	if avg == 0 {
		return x
	}
	return (3*avg + x) / 4
}

// draftTooSlow reports whether a draft step costs so much of a plain
// target step that speculation cannot pay whatever the acceptance: k
// drafts and a verification cost 1 + k·c plain steps for at most k+1
// tokens, a loss for any k once c is near one, and little gain above half.
func draftTooSlow(draft, plain time.Duration) bool {
	return draft > 0 && plain > 0 && draft*2 > plain
}

// warmVerify runs, once, a verification step of every size a draft
// may make (2 to maxDraft+1 rows, each an output row), on a scratch
// sequence. A GPU backend compiles a pipeline the first time it meets a
// shape (lavapipe: 120–200 ms each for 2, 3–4 and 5–8 rows, stories260K),
// which would otherwise land on the first requests that speculate, and
// in the step costs that decide whether drafting pays.
func (e *Engine) warmVerify() error {
	rows := min(maxDraft+1, e.net.maxBatch, e.net.maxOut)
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.mu.Lock()
	seq := e.pool.NewSeq()
	_, err := seq.Reserve(rows)
	e.mu.Unlock()
	if err != nil {
		return err
	}
	defer func() {
		e.mu.Lock()
		seq.Release()
		e.mu.Unlock()
	}()
	tok := int32(max(e.model.Tokenizer.BOS(), 0))
	for n := 2; n <= rows; n++ {
		b := backend.Batch{BlockSize: e.pool.BlockSize(), Tables: [][]int32{seq.Table()}}
		e.net.solo(&b)
		for i := range n {
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(i))
			b.Seq = append(b.Seq, 0)
			b.Out = append(b.Out, int32(i))
		}
		if err := e.net.forward(b); err != nil {
			return err
		}
		if _, err := e.be.Argmax(e.net.logits, n); err != nil {
			return err
		}
	}
	return nil
}

// probeStep times a one-token decode step (the fastest of three, after a
// warm-up that compiles the pipelines) on a scratch sequence.
func (e *Engine) probeStep() (time.Duration, error) { return e.probe(1) }

// probeRead times reading a prompt: the time per token of a step of n.
func (e *Engine) probeRead(n int) (time.Duration, error) {
	n = min(n, e.net.maxBatch)
	d, err := e.probe(n)
	return d / time.Duration(n), err
}

// probe times a step of n prompt tokens (the fastest of three, after a
// warm-up that compiles the pipelines) on a scratch sequence.
func (e *Engine) probe(n int) (time.Duration, error) {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	e.mu.Lock()
	seq := e.pool.NewSeq()
	_, err := seq.Reserve(n)
	e.mu.Unlock()
	if err != nil {
		return 0, err
	}
	defer func() {
		e.mu.Lock()
		seq.Release()
		e.mu.Unlock()
	}()
	b := backend.Batch{Out: []int32{int32(n - 1)}, BlockSize: e.pool.BlockSize(), Tables: [][]int32{seq.Table()}}
	e.net.solo(&b) // the scratch slot's ring, on a windowed cache
	for i := range n {
		b.Tokens = append(b.Tokens, int32(max(e.model.Tokenizer.BOS(), 0)))
		b.Pos = append(b.Pos, int32(i))
		b.Seq = append(b.Seq, 0)
	}
	best := time.Duration(0)
	for i := range 4 {
		start := time.Now()
		if err := e.net.forward(b); err != nil {
			return 0, err
		}
		if _, err := e.be.Argmax(e.net.logits, 1); err != nil {
			return 0, err
		}
		if d := time.Since(start); i > 0 && (best == 0 || d < best) {
			best = d
		}
	}
	return best, nil
}
