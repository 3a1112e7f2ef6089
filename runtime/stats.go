package runtime

import (
	"sync/atomic"

	"github.com/tessera-llm/tessera/runtime/kvcache"
)

// poolStats is the measurements part of an engine: what the scheduler and
// the KV pool did over the engine's life, for Metrics and for
// benchmarks (runtime/eval). steps and prompts are atomic; the rest is
// guarded by Engine.mu.
type poolStats struct {
	steps                       atomic.Int64 // forward passes run by the scheduler (a chain counts each)
	preemptions                 int
	peakBlocks                  int   // most blocks in use at once (benchmarks reset it)
	slotsAllocated, slotsUnused int64 // summed over steps, for the pool's waste
	// prompts counts the prompts rendered and tokenized from text
	// (renderChat, PromptTokensContext, imageTokens): tests check that a
	// request's prompt is encoded once.
	prompts atomic.Int64
}

// observe records the pool's use after a step: the peak of blocks in use,
// and the allocated and unused slots, summed over steps for the
// workload's waste. Called with Engine.mu held.
func (p *poolStats) observe(st kvcache.Stats) {
	p.peakBlocks = max(p.peakBlocks, st.Used)
	p.slotsAllocated += int64(st.AllocatedSlots)
	p.slotsUnused += int64(st.AllocatedSlots - st.UsedSlots)
}

// meanWaste is the pool's waste over the engine's life: allocated but
// unused slots over allocated slots. Called with Engine.mu held.
func (p *poolStats) meanWaste() float64 {
	if p.slotsAllocated == 0 {
		return 0
	}
	return float64(p.slotsUnused) / float64(p.slotsAllocated)
}

// Steps is the number of forward passes the scheduler has run (a chain of
// greedy steps counts each): a benchmark (runtime/eval) divides backend
// counters by it.
func (e *Engine) Steps() int64 { return e.steps.Load() }

// ResetPeakBlocks starts Metrics.PeakBlocks afresh, for a benchmark that
// measures the blocks one run takes.
func (e *Engine) ResetPeakBlocks() {
	e.mu.Lock()
	e.peakBlocks = 0
	e.mu.Unlock()
}

// KVBlockBytes is the size of one block of the engine's KV cache.
func (e *Engine) KVBlockBytes() int64 { return e.kvBlockBytes() }
