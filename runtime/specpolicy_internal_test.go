package runtime

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Step costs as measured (zz probes, 2026-12-06): stories260K on lavapipe,
// where rows up to 8 cost little more than one and 9 take another kernel,
// and on the CPU backend, where a row costs nearly a step.
var (
	lavapipeRows = []time.Duration{0, 2300, 2500, 2900, 3100, 3500, 3600, 3650, 3800, 14500, 15200, 16000} // µs
	cpuRows      = []time.Duration{0, 90, 160, 210, 245, 300, 340, 380, 420, 490, 530, 570}
)

// measured is a stepCosts with plain decoding at plain µs a token and
// rows 1..upTo of table measured.
func measured(table []time.Duration, plain time.Duration, upTo int) *stepCosts {
	c := &stepCosts{}
	c.observePlain(1, 1, plain*time.Microsecond)
	for r := 1; r <= upTo; r++ {
		c.observeRows(1, r, table[r]*time.Microsecond)
	}
	return c
}

// TestChooseDrafts: the draft length a sequence gets from the measured
// costs and its acceptance estimate.
func TestChooseDrafts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		costs *stepCosts
		offer draftOffer
		step  time.Duration // a model draft's step
		want  int
	}{
		{"lavapipe, low acceptance: none", measured(lavapipeRows, 2100, 11), draftOffer{8, 0.1}, 0, 0},
		{"lavapipe, 40%: one", measured(lavapipeRows, 2100, 11), draftOffer{8, 0.4}, 0, 1},
		{"lavapipe, 90%: long, short of the 9-row cliff", measured(lavapipeRows, 2100, 11), draftOffer{8, 0.9}, 0, 7},
		{"lavapipe, 90%, a proposal of 3", measured(lavapipeRows, 2100, 11), draftOffer{3, 0.9}, 0, 3},
		{"lavapipe, nothing proposed", measured(lavapipeRows, 2100, 11), draftOffer{0, 0.9}, 0, 0},
		{"cpu, 60%: none (a row costs nearly a step)", measured(cpuRows, 90, 11), draftOffer{8, 0.6}, 0, 0},
		{"cpu, 95%: long", measured(cpuRows, 90, 11), draftOffer{8, 0.95}, 0, 7},
		{"plain decoding unmeasured: none", &stepCosts{}, draftOffer{8, 0.9}, 0, 0},
		{"only plain measured: explore one row", measured(lavapipeRows, 2100, 0), draftOffer{8, 0.9}, 0, 1},
		{"rows to 3 measured: explore one more", measured(lavapipeRows, 2100, 3), draftOffer{8, 0.9}, 0, 3},
		{"a slow model draft: none", measured(lavapipeRows, 2100, 11), draftOffer{8, 0.7}, 1500 * time.Microsecond, 0},
		{"a fast model draft at 90%", measured(lavapipeRows, 2100, 11), draftOffer{8, 0.9}, 100 * time.Microsecond, 7},
	} {
		ks, best := tc.costs.chooseDrafts(1, []draftOffer{tc.offer}, tc.step)
		if ks[0] != tc.want {
			t.Errorf("%s: k = %d (best alone %d), want %d", tc.name, ks[0], best[0], tc.want)
		}
		if tc.offer.avail > 0 && best[0] < 1 {
			t.Errorf("%s: best alone %d with %d to draft", tc.name, best[0], tc.offer.avail)
		}
	}
	// Two sequences: rows add up, and a sequence that does not pay for
	// its rows is left out while the other drafts.
	c := &stepCosts{}
	c.observePlain(2, 4, 4*1400*time.Microsecond)
	for r := 2; r < len(lavapipeRows); r++ {
		c.observeRows(2, r, lavapipeRows[r]*time.Microsecond)
	}
	ks, _ := c.chooseDrafts(2, []draftOffer{{8, 0.9}, {8, 0.05}}, 0)
	if ks[0] < 4 || ks[1] != 0 || 2+ks[0]+ks[1] > 8 {
		t.Errorf("two sequences, 90%% and 5%%: ks %v", ks)
	}
}

// TestRowCost: measured rows, interpolation, one row of extrapolation
// and no further.
func TestRowCost(t *testing.T) {
	c := &stepCosts{}
	if _, ok := c.rowCost(1, 2); ok {
		t.Error("a cost with nothing measured")
	}
	if f := c.frontier(1); f != 1 {
		t.Errorf("frontier %d with nothing measured", f)
	}
	c.observePlain(1, 4, 8*time.Millisecond) // a chain of 4: 2 ms a token
	for range 3 {
		c.observeRows(1, 2, 3*time.Millisecond)
		c.observeRows(1, 4, 4*time.Millisecond)
	}
	for _, tc := range []struct {
		r    int
		want time.Duration
		ok   bool
	}{
		{1, 2 * time.Millisecond, true}, // plain's token stands for one row
		{2, 3 * time.Millisecond, true},
		{3, 3500 * time.Microsecond, true}, // between 2 and 4
		{4, 4 * time.Millisecond, true},
		{5, 4250 * time.Microsecond, true}, // half the slope from 2 to 4, one row on
		{7, 4750 * time.Microsecond, true}, // three rows on
	} {
		if d, ok := c.rowCost(1, tc.r); d != tc.want || ok != tc.ok {
			t.Errorf("rowCost(%d) = %v, %v, want %v, %v", tc.r, d, ok, tc.want, tc.ok)
		}
	}
	if f := c.frontier(1); f != 4 {
		t.Errorf("frontier %d with rows 2 and 4 measured", f)
	}
	// A stall does not count; a lasting change does, once it fills the
	// window.
	c.observeRows(1, 2, time.Second)
	if d, _ := c.rowCost(1, 2); d != 3*time.Millisecond {
		t.Errorf("after a stall: %v", d)
	}
	// Measured once, a row count is taken at the line's estimate where
	// that is lower; a cliff is believed when measured twice.
	c.observeRows(1, 5, 4700*time.Microsecond)
	if d, _ := c.rowCost(1, 5); d != 4250*time.Microsecond {
		t.Errorf("5 rows measured once at 4.7 ms: %v", d)
	}
	c.observeRows(1, 6, 20*time.Millisecond)
	if d, _ := c.rowCost(1, 6); d != 5050*time.Microsecond { // 4.7 ms and half the slope from 4 to 5 rows
		t.Errorf("6 rows measured once at 20 ms: %v", d)
	}
	c.observeRows(1, 6, 22*time.Millisecond)
	if d, _ := c.rowCost(1, 6); d != 20*time.Millisecond {
		t.Errorf("6 rows measured at 20 and 22 ms: %v", d)
	}
	// More rows never cost less: 3 rows measured slow count at 4's cost.
	for range 3 {
		c.observeRows(1, 3, 10*time.Millisecond)
	}
	if d, _ := c.rowCost(1, 3); d != 4*time.Millisecond {
		t.Errorf("3 rows measured at 10 ms, 4 at 4: %v", d)
	}
	for range costWindow {
		c.observeRows(1, 4, 5*time.Millisecond)
	}
	if d, _ := c.rowCost(1, 4); d != 4700*time.Microsecond { // 5 rows' 4.7 ms
		t.Errorf("4 rows at 5 ms for a window: %v", d)
	}
	// Rows are kept against plain decoding's pace when they ran: a machine
	// twice as busy since doubles them.
	for range costWindow {
		c.observePlain(1, 4, 16*time.Millisecond)
	}
	if d, _ := c.rowCost(1, 4); d != 9400*time.Microsecond {
		t.Errorf("4 rows after plain decoding slowed from 2 to 4 ms: %v", d)
	}
}

// policySim runs the policy over a scripted text and device: the
// acceptance of the text at each step (each draft token accepted with
// that chance after the ones before it), the device's true cost of r
// rows (with ±15% noise) and plain decoding's chain. It returns, per
// step, the draft length chosen, and the simulated time over the time
// plain decoding would have taken for the same tokens.
type policySim struct {
	rows  []time.Duration // µs, by rows
	chain int             // plain steps a submission
	plain time.Duration   // µs a token of plain decoding
}

func (d policySim) run(alpha func(step int) float64, steps int) (ks []int, speedup float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func(x time.Duration) time.Duration {
		return time.Duration(float64(x*time.Microsecond) * (0.85 + 0.3*rng.Float64()))
	}
	c := &stepCosts{}
	p := newSpec()
	var spent, plain time.Duration
	tokens := 0
	for i := range steps {
		a := alpha(i)
		// The text: how many of an 8-token proposal the target agrees with.
		agree := 0
		for agree < 8 && rng.Float64() < a {
			agree++
		}
		proposal := []int32{1, 2, 3, 4, 5, 6, 7, 8}
		target := slices.Clone(proposal[:agree])
		target = append(target, 100, 101, 102, 103, 104, 105, 106, 107, 108)
		k := 0
		if i > 0 { // the first step reads the prompt
			ks, best := c.chooseDrafts(1, []draftOffer{{8, p.alpha(4)}}, 0)
			k = ks[0]
			if k == 0 && p.plainRun >= p.probeAt {
				k = best[0]
				p.probeAt = min(2*p.probeAt, maxProbe)
			} else if k > 0 {
				p.probeAt = firstProbe
			}
		}
		if k > 0 {
			acc := min(agree, k)
			took := noise(d.rows[1+k])
			c.observeRows(1, 1+k, took)
			spent += took
			tokens += acc + 1
			p.observe(i, target[:acc+1], k, 4, acc)
		} else {
			took := noise(time.Duration(d.chain) * d.plain)
			c.observePlain(1, d.chain, took)
			if d.chain == 1 {
				c.observeRows(1, 1, took)
			}
			spent += took
			tokens += d.chain
			p.shadow, p.shadowN, p.shadowAt = proposal, 4, i
			p.observe(i, target[:d.chain], 0, 0, 0)
		}
		ks = append(ks, k)
	}
	plain = time.Duration(tokens) * d.plain * time.Microsecond
	return ks, float64(plain) / float64(spent)
}

// TestSpecPolicy: on scripted texts and devices, low acceptance turns
// drafting off (within a few percent of plain decoding), high acceptance
// keeps long drafts (short of a cost cliff), and a change of regime is
// followed both ways.
func TestSpecPolicy(t *testing.T) {
	lavapipe := policySim{rows: lavapipeRows, chain: 4, plain: 2100}
	cpu := policySim{rows: cpuRows, chain: 1, plain: 90}
	const steps = 600
	drafting := func(ks []int) float64 {
		n := 0
		for _, k := range ks {
			if k > 0 {
				n++
			}
		}
		return float64(n) / float64(len(ks))
	}
	mean := func(ks []int) float64 {
		n, s := 0, 0
		for _, k := range ks {
			if k > 0 {
				n, s = n+1, s+k
			}
		}
		return float64(s) / float64(max(n, 1))
	}
	constant := func(a float64) func(int) float64 { return func(int) float64 { return a } }
	for _, tc := range []struct {
		name         string
		dev          policySim
		alpha        float64
		minSpeedup   float64
		maxDrafting  float64 // of the steps
		minMeanDraft float64
	}{
		{"lavapipe 10%", lavapipe, 0.1, 0.97, 0.1, 0},
		{"lavapipe 40%", lavapipe, 0.4, 0.97, 1, 0},
		{"lavapipe 75%", lavapipe, 0.75, 1.3, 1, 2.5},
		{"lavapipe 95%", lavapipe, 0.95, 2, 1, 6},
		{"cpu 50%", cpu, 0.5, 0.97, 0.1, 0},
		{"cpu 95%", cpu, 0.95, 1.3, 1, 2.5},
	} {
		ks, speedup := tc.dev.run(constant(tc.alpha), steps)
		t.Logf("%s: %.2fx plain, drafting %.0f%% of steps, %.1f tokens a draft", tc.name, speedup, 100*drafting(ks), mean(ks))
		if speedup < tc.minSpeedup || drafting(ks) > tc.maxDrafting || mean(ks) < tc.minMeanDraft {
			t.Errorf("%s: %.2fx plain, drafting %.0f%% of steps, %.1f tokens a draft; want ≥ %.2fx, ≤ %.0f%%, ≥ %.1f",
				tc.name, speedup, 100*drafting(ks), mean(ks), tc.minSpeedup, 100*tc.maxDrafting, tc.minMeanDraft)
		}
		if tc.dev.rows[9] > 3*tc.dev.rows[8] {
			cliff := 0
			for _, k := range ks {
				if k >= 8 {
					cliff++
				}
			}
			if cliff > 3 {
				t.Errorf("%s: %d steps past the 9-row cliff", tc.name, cliff)
			}
		}
	}
	// Regime changes: 90%, then 5%, then 90% again.
	phase := func(i int) float64 {
		if i >= 200 && i < 400 {
			return 0.05
		}
		return 0.9
	}
	ks, _ := lavapipe.run(phase, steps)
	for _, c := range []struct {
		from, to int
		min, max float64
	}{
		{20, 200, 0.9, 1},  // drafting
		{240, 400, 0, 0.1}, // off within 40 steps
		{440, 600, 0.9, 1}, // on again within 40 steps
	} {
		if d := drafting(ks[c.from:c.to]); d < c.min || d > c.max {
			t.Errorf("steps %d–%d: drafting %.0f%% of them, want %.0f–%.0f%%", c.from, c.to, 100*d, 100*c.min, 100*c.max)
		}
	}
}

// TestAcceptance: the estimate follows the last 20 or so tokens tried.
func TestAcceptance(t *testing.T) {
	var a acceptance
	if a.rate(0.25, 2) != 0.25 {
		t.Errorf("prior %g", a.rate(0.25, 2))
	}
	for range 40 {
		a.observe(3, 3)
	}
	if r := a.rate(0.25, 2); r < 0.9 {
		t.Errorf("after 120 accepted: %g", r)
	}
	for range 20 {
		a.observe(0, 1)
	}
	if r := a.rate(0.25, 2); r > 0.45 {
		t.Errorf("after 20 rejected: %g", r)
	}
	// A match length seen rarely borrows the others' estimate.
	p := newSpec()
	if r := p.alpha(3); r != firstAcceptance {
		t.Errorf("before anything: %g", r)
	}
	for range 10 {
		p.observe(0, []int32{1, 2, 3, 4}, 3, 1, 3)
	}
	if r1, r4 := p.alpha(1), p.alpha(4); r1 < 0.8 || r4 < 0.7 || r4 >= r1 {
		t.Errorf("after 30 accepted on 1-token matches: %g for those, %g for 4-token ones", r1, r4)
	}
}

// TestSpecObserve: a drafted step and a shadow proposal are scored
// alike, and plain tokens count towards the next probe.
func TestSpecObserve(t *testing.T) {
	p := newSpec()
	var want acceptance
	p.shadow, p.shadowN, p.shadowAt = []int32{5, 6, 7}, 3, 10
	p.observe(10, []int32{5, 6, 9, 9}, 0, 0, 0) // a chain of 4: 2 accepted, the third rejected
	if want.observe(2, 3); p.accept[3] != want || p.plainRun != 4 || p.shadow != nil {
		t.Errorf("shadow scored as %+v, want %+v; plain run %d", p.accept[3], want, p.plainRun)
	}
	p.shadow, p.shadowN, p.shadowAt = []int32{5, 6, 7}, 1, 14
	p.observe(14, []int32{5}, 0, 0, 0) // one token: one accepted, nothing known past it
	if p.accept[1] != (acceptance{1, 1}) || p.plainRun != 5 {
		t.Errorf("a one-token step scored as %+v", p.accept[1])
	}
	p.shadow, p.shadowN, p.shadowAt = []int32{5, 6, 7}, 2, 15
	p.observe(17, []int32{5}, 0, 0, 0) // a shadow from another length: dropped unscored
	if p.accept[2] != (acceptance{}) || p.shadow != nil {
		t.Errorf("a stale shadow was scored: %+v", p.accept[2])
	}
	p.observe(18, []int32{1, 2}, 4, 2, 1) // a draft of 4, the second rejected
	want = acceptance{}
	if want.observe(1, 2); p.accept[2] != want || p.plainRun != 0 {
		t.Errorf("a draft of 4 with 1 accepted: %+v, want %+v; plain run %d", p.accept[2], want, p.plainRun)
	}
	p.observe(20, []int32{7, 7, 7}, 2, 0, 2) // all accepted: nothing rejected
	if p.accept[0] != (acceptance{1.95, 1.95}) {
		t.Errorf("a draft of 2, both accepted: %+v", p.accept[0])
	}
}

// TestVerifyOneHotKeepsStream: a deterministic draft verified under
// sampling gives exactly the tokens plain decoding with the same seed
// gives, whatever is drafted, right or wrong.
func TestVerifyOneHotKeepsStream(t *testing.T) {
	const vocab = 16
	logits := func(hist []int32) []float32 { // the "model": any deterministic function of the history
		r := rand.New(rand.NewPCG(uint64(len(hist)), uint64(hist[len(hist)-1])))
		l := make([]float32, vocab)
		for i := range l {
			l[i] = float32(r.NormFloat64())
		}
		return l
	}
	opts := SamplerOptions{Temperature: 1, TopP: 0.95, Seed: 11}
	plain := NewSampler(opts)
	want := []int32{1}
	for len(want) < 200 {
		want = append(want, int32(plain.Sample(logits(want), want)))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	spec := NewSampler(opts)
	got := []int32{1}
	for len(got) < 200 {
		k := 1 + rng.IntN(4)
		var draft []int32
		for i := range k { // right with chance 1/2 at each position
			if p := len(got) + i; p < len(want) && rng.IntN(2) == 0 {
				draft = append(draft, want[p])
			} else {
				draft = append(draft, int32(rng.IntN(vocab)))
			}
		}
		rows := make([][]float32, k+1)
		hist := slices.Clone(got)
		for i := range rows {
			rows[i] = logits(hist)
			if i < k {
				hist = append(hist, draft[i])
			}
		}
		got = append(got, verifySampled(spec, got, draft, nil, rows)...)
	}
	if !slices.Equal(got[:200], want) {
		t.Fatalf("speculative sampling left plain decoding's tokens:\n got %v\nwant %v", got[:200], want)
	}
}
