package runtime

import (
	"math"
	"time"

	"github.com/tessera-llm/tessera/runtime/kvcache"
)

// Speculation's policy: at every step, each sequence that may speculate
// drafts the number of tokens k that maximises the expected tokens a
// second of the step, E[accepted+1] / cost(k), and no sequence drafts
// when that expected rate does not beat plain decoding's measured one.
//
// Both sides are measured, not assumed. The cost of a step depends on
// the device far more than on the text: on lavapipe a verification of
// k+1 rows costs 1.1–1.6 plain steps up to 8 rows and 6 past them (a
// different kernel), on the CPU backend nearly k+1 steps, and on WebGPU
// plain decoding chains several steps in one submission that a draft
// breaks. So the engine keeps the measured time of decode steps by their
// shape (stepCosts), shared by its sequences. Acceptance depends on the
// text, so each sequence keeps its own estimate, by n-gram match length
// for prompt lookup (a 4-token match predicts better than a 1-token one).
// Prompt lookup costs nothing to run, so it proposes at every step and a
// proposal that is not drafted is compared with what the step emits
// instead (its "shadow"): the acceptance estimate follows the text while
// drafting is off, and only the costs need an occasional probe.

// minWindow estimates a step's cost as the least of its last few
// observations: other work on the machine only ever adds time, so the
// least is the step's own cost, and one stall does not rule a draft
// length out. A lasting change takes over once the window has passed.
type minWindow struct {
	last [costWindow]float64
	n    int // observations folded in
	v    float64
}

const costWindow = 8

func (c *minWindow) add(x float64) {
	if x <= 0 {
		return
	}
	c.last[c.n%costWindow] = x
	c.n++
	c.v = x
	for _, y := range c.last[:min(c.n, costWindow)] {
		c.v = min(c.v, y)
	}
}

// stepCosts are an engine's measured decode step costs: what a token of
// plain decoding takes, and what one submission of r decode rows takes
// (r = the sequences plus their drafts) in tokens of plain decoding as
// measured at the time. Ratios, not times, since plain steps are
// measured all the time and drafts only while they pay: a machine that
// got busier since (or calmer) would otherwise make old drafts look
// cheap (or dear) against new plain steps. Guarded by Engine.mu.
type stepCosts struct {
	// plain[S] is the seconds a token of each of S sequences in a plain
	// decode step: a step's time, or a chain's over its steps.
	plain []minWindow
	// rows[r] is the time of one submission of r decode rows, drafts and
	// their verification included (a model draft's own steps not), over
	// plain[S] when it ran.
	rows []minWindow
}

func grow(s []minWindow, i int) []minWindow {
	for len(s) <= i {
		s = append(s, minWindow{})
	}
	return s
}

// observePlain records a plain decode step of seqs sequences that ran
// chain steps in d.
func (c *stepCosts) observePlain(seqs, chain int, d time.Duration) {
	c.plain = grow(c.plain, seqs)
	c.plain[seqs].add(d.Seconds() / float64(max(chain, 1)))
}

// observeRows records one submission of rows decode rows, of seqs
// sequences, that took d (nothing before plain decoding is measured).
func (c *stepCosts) observeRows(seqs, rows int, d time.Duration) {
	if p := c.plainPer(seqs); p > 0 {
		c.rows = grow(c.rows, rows)
		c.rows[rows].add(d.Seconds() / p.Seconds())
	}
}

// plainPer is a token's time in plain decoding of seqs sequences, 0
// while unmeasured.
func (c *stepCosts) plainPer(seqs int) time.Duration {
	if seqs < len(c.plain) {
		return time.Duration(c.plain[seqs].v * float64(time.Second))
	}
	return 0
}

// rowCost estimates a submission of r rows beside seqs sequences, at
// plain decoding's current pace (ok is false before plain decoding is
// measured): the measured ratio, or a straight line through the
// measured row counts on either side, or past the largest a line from
// it (around). A plain token stands for seqs rows where they are not
// measured: a lower bound, since a chain's token is cheaper than a
// submission's, so untried shapes look promising enough to be tried.
// More rows never cost less, so a measurement above a larger row
// count's counts at that (a stall, or a busy moment, does not rule a
// draft length out for good); and a row count measured once counts at
// the line's estimate if that is lower, so that a cliff is believed
// when a second step confirms it (lavapipe on a busy machine: one
// 7-row step of 31 ms among steps of 4–5 ms).
func (c *stepCosts) rowCost(seqs, r int) (d time.Duration, ok bool) {
	p := c.plainPer(seqs)
	if p <= 0 {
		return 0, false
	}
	return time.Duration(c.ratio(seqs, r) * float64(p)), true
}

// ratio is rowCost in plain tokens.
func (c *stepCosts) ratio(seqs, r int) float64 {
	est := c.around(seqs, r)
	if r >= len(c.rows) || c.rows[r].n == 0 {
		return est
	}
	m := c.rows[r]
	x := m.v
	for _, y := range c.rows[r+1:] {
		if y.n > 0 {
			x = min(x, y.v)
		}
	}
	if m.n < 2 {
		x = min(x, est)
	}
	return x
}

// frontier is the largest row count measured beside seqs sequences (at
// least seqs): drafts explore one row past it at a time, so that a
// cliff costs a step or two to find.
func (c *stepCosts) frontier(seqs int) int {
	for r := len(c.rows) - 1; r > seqs; r-- {
		if c.rows[r].n > 0 {
			return r
		}
	}
	return seqs
}

// around estimates r rows, in plain tokens, from the row counts
// measured on either side of r (rowCost).
func (c *stepCosts) around(seqs, r int) float64 {
	type point struct {
		r int
		x float64
	}
	if r <= seqs {
		return 1
	}
	var below []point // the two nearest measured under r, nearest first
	for i := min(r, len(c.rows)) - 1; i > seqs && len(below) < 2; i-- {
		if c.rows[i].n > 0 {
			below = append(below, point{i, c.rows[i].v})
		}
	}
	if len(below) < 2 {
		if seqs < len(c.rows) && c.rows[seqs].n > 0 {
			below = append(below, point{seqs, c.rows[seqs].v})
		} else {
			below = append(below, point{seqs, 1})
		}
	}
	lo := below[0]
	for i := r + 1; i < len(c.rows); i++ {
		if c.rows[i].n > 0 { // between two measured: interpolate
			return lo.x + (c.rows[i].v-lo.x)*float64(r-lo.r)/float64(i-lo.r)
		}
	}
	// Past the largest measured the line is optimistic, half the slope of
	// the last two (a tenth of a step a row from one point): costs tend to
	// flatten with rows (the CPU's 1, 1.8, 2.3, 2.7 steps for 1–4 rows; a
	// GPU's kernels by blocks of rows), and a draft length that would pay
	// is found only by trying it; one that does not is measured once or
	// twice and no longer guessed.
	slope := lo.x / 10
	if len(below) == 2 {
		slope = max(0, (lo.x-below[1].x)/float64(2*(lo.r-below[1].r)))
	}
	return lo.x + float64(slope*float64(r-lo.r))
}

// acceptance estimates the chance that a draft token is accepted when
// the ones before it were: accepted tokens over tokens tried (each
// accepted one, and the first rejected), decayed so that the last 20
// or so count, starting from a prior worth weight tries.
type acceptance struct{ hit, tried float64 }

const acceptDecay = 0.95

// observe records a draft that had accepted tokens accepted of tried
// tried.
func (a *acceptance) observe(accepted, tried int) {
	for i := range tried {
		// Rounded products: Go would fuse them with the additions on
		// arm64 (docs/DECISIONS.md, "No fused multiply-adds").
		a.hit = float64(a.hit * acceptDecay)
		a.tried = float64(a.tried*acceptDecay) + 1
		if i < accepted {
			a.hit++
		}
	}
}

func (a acceptance) rate(prior float64, weight float64) float64 {
	return (a.hit + float64(weight*prior)) / (a.tried + weight)
}

// firstAcceptance is a sequence's acceptance estimate before anything is
// tried: low, so that the first steps' shadows (free) rather than drafts
// (not) show a text that pays. A model draft's first step is a probe.
const firstAcceptance = 0.25

// expectedTokens is what a step that verifies k drafts emits on average
// when each is accepted with chance alpha after the ones before it: the
// accepted drafts and the target's own token, 1 + α + … + α^k.
func expectedTokens(alpha float64, k int) float64 {
	if alpha >= 1 {
		return float64(k + 1)
	}
	return (1 - math.Pow(alpha, float64(k+1))) / (1 - alpha)
}

// draftGain is how much faster than plain decoding the expected rate of
// drafting must be before a step drafts: the estimates are noisy, and
// losing is worse than not winning.
const draftGain = 1.05

// draftOffer is what a sequence could draft this step.
type draftOffer struct {
	avail int     // tokens it may draft (a lookup's proposal, or the room left)
	alpha float64 // its acceptance estimate for them
}

// chooseDrafts picks each offer's draft length for a step of seqs
// decoding sequences: offers are taken in turn, each with the k that
// gives the step the highest expected tokens a second (the tokens of
// all the sequences over the rows' cost and draftStep a drafted token),
// kept if it raises the step's rate; then, unless the step's rate beats
// plain decoding's by draftGain, nothing is drafted. A k whose rows lie
// past the measured ones is estimated on the line (rowCost) but drafted
// only up to one row past them: the step explores towards it. best is
// each offer's best k on its own (≥ 1 where it has anything to draft),
// for a probe or a forced speculation.
func (c *stepCosts) chooseDrafts(seqs int, offers []draftOffer, draftStep time.Duration) (ks, best []int) {
	ks, best = make([]int, len(offers)), make([]int, len(offers))
	tokens, rows, draft := float64(seqs), seqs, time.Duration(0)
	base, ok := c.rowCost(seqs, seqs)
	if !ok {
		for i, o := range offers {
			best[i] = min(o.avail, 1)
		}
		return ks, best
	}
	rate := tokens / base.Seconds()
	reach := c.frontier(seqs) + 1 // the most rows a step may have
	for i, o := range offers {
		bestRate := 0.0
		for k := 1; k <= o.avail; k++ {
			cost, _ := c.rowCost(seqs, rows+k)
			r := (tokens + expectedTokens(o.alpha, k) - 1) / (cost + max(draft, time.Duration(k)*draftStep)).Seconds()
			if r > bestRate {
				best[i], bestRate = k, r
			}
		}
		best[i] = max(min(best[i], reach-rows), min(o.avail, 1))
		if bestRate > rate && best[i] > 0 {
			ks[i] = best[i]
			tokens += expectedTokens(o.alpha, ks[i]) - 1
			rows += ks[i]
			draft = max(draft, time.Duration(ks[i])*draftStep)
			rate = bestRate
		}
	}
	if p := c.plainPer(seqs); p <= 0 || rate < draftGain*float64(seqs)/p.Seconds() {
		clear(ks)
	}
	return ks, best
}

const (
	firstProbe = 64   // plain tokens after which a sequence drafts once, at first
	maxProbe   = 2048 // the longest plain run between probes
)

// spec is a sequence's speculation state: its acceptance estimates, the
// proposal it did not draft (to score it against what came instead), and
// when it next drafts whatever the estimates say, to measure again.
type spec struct {
	// accept is the acceptance estimate by the n-gram match length of the
	// proposal ([0]: a model draft's), each starting from pooled, the
	// estimate over every length.
	accept [ngramMax + 1]acceptance
	pooled acceptance
	// shadow is a proposal that was not drafted, of a match of shadowN
	// tokens, made when the sequence held shadowAt tokens: compared with
	// the tokens the next step emits at that length (a sequence left out
	// of its step, or preempted, drops it).
	shadow            []int32
	shadowN, shadowAt int
	// plainRun counts the tokens decoded since the sequence last drafted;
	// at probeAt it drafts once whatever the estimates say (a model
	// draft's acceptance, or stale costs, are measured only so), and
	// probeAt grows while probes lose.
	plainRun, probeAt int
	draft             *kvcache.Seq // model drafts: the draft's cache of this sequence
	stored            int          // tokens in the draft's cache
}

func newSpec() *spec { return &spec{probeAt: firstProbe} }

// alpha is the acceptance estimate of a proposal from a match of match
// tokens: its length's own tries, with the pooled estimate as the prior
// worth four tries (a length seen rarely borrows from the others; one
// lucky try of a rare length does not start drafting on a text that
// accepts little).
func (p *spec) alpha(match int) float64 {
	return p.accept[match].rate(p.pooled.rate(firstAcceptance, 2), 4)
}

// observe records what a step gave the sequence, which held at tokens
// before it: emitted tokens after a draft of drafted tokens from a match
// of match tokens, accepted of them, or none drafted.
func (p *spec) observe(at int, emitted []int32, drafted, match, accepted int) {
	if drafted > 0 {
		tried := accepted
		if accepted < drafted {
			tried++
		}
		p.accept[match].observe(accepted, tried)
		p.pooled.observe(accepted, tried)
		p.plainRun, p.shadow = 0, nil
		return
	}
	p.plainRun += len(emitted)
	if p.shadow == nil || p.shadowAt != at {
		p.shadow = nil
		return
	}
	n := min(len(p.shadow), len(emitted))
	a := 0
	for a < n && p.shadow[a] == emitted[a] {
		a++
	}
	tried := a
	if a < n {
		tried++
	}
	p.accept[p.shadowN].observe(a, tried)
	p.pooled.observe(a, tried)
	p.shadow = nil
}
