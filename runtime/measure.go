package runtime

// What runtime/eval's measurements (Bench) read of an engine and the
// switches they flip to compare runs. Serving never calls these.

// Steps is the number of forward passes the scheduler has run (a chain of
// greedy steps counts each): a benchmark divides backend counters by it.
func (e *Engine) Steps() int64 { return e.steps.Load() }

// DraftName names the engine's speculative draft: "ngram" or the draft
// model's path; "" without one.
func (e *Engine) DraftName() string {
	if e.drafter == nil {
		return ""
	}
	return e.draftName
}

// SetSpeculation turns speculative decoding off (on: false) or back on,
// for an engine with a draft: a benchmark compares the two on the same
// target. Sequences already running follow it from their next step.
func (e *Engine) SetSpeculation(on bool) {
	e.mu.Lock()
	e.specOff = !on
	e.mu.Unlock()
}

// SetPrefixCache turns the use of the prefix cache by new sequences off
// (on: false) or back on: a benchmark measures what sharing a prompt's
// blocks saves.
func (e *Engine) SetPrefixCache(on bool) {
	e.mu.Lock()
	e.noPrefixCache = !on
	e.mu.Unlock()
}

// ResetPeakBlocks starts Metrics.PeakBlocks afresh, for a benchmark that
// measures the blocks one run takes.
func (e *Engine) ResetPeakBlocks() {
	e.mu.Lock()
	e.peakBlocks = 0
	e.mu.Unlock()
}

// KVBlockBytes is the size of one block of the engine's KV cache.
func (e *Engine) KVBlockBytes() int64 { return e.kvBlockBytes() }
