package runtime

import "github.com/tessera-llm/tessera/runtime/kvcache"

// KVEvent is a change to an engine's prefix cache (WatchKVCache): a block
// stored or removed, with the LoRA adapter its sequence ran with.
type KVEvent struct {
	kvcache.Event
	// Adapter names the adapter (Request.Adapters; several make a
	// composite, named by its parts) whose sequences computed the block,
	// "" for the base model; AdapterID is that load of it, never reused
	// in the engine's life.
	Adapter   string
	AdapterID uint64
}

// WatchKVCache calls fn with every later change to the engine's prefix
// cache, in order, and returns the blocks it caches now (as stored events,
// parents first), so that a watcher mirrors the cache exactly from its
// start. fn runs on the goroutine that changes the cache, with the
// engine's lock held: it must be quick and must not call the engine. A nil
// fn stops watching. One watcher at a time: a second replaces the first.
func (e *Engine) WatchKVCache(fn func(KVEvent)) []KVEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	if fn == nil {
		e.pool.Watch(nil)
		return nil
	}
	e.pool.Watch(func(ev kvcache.Event) { fn(e.kvEvent(ev)) })
	return e.cachedKV()
}

// CachedKV returns the blocks the engine's prefix cache holds now, as
// stored events, parents first: what a watcher's mirror should hold.
func (e *Engine) CachedKV() []KVEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cachedKV()
}

func (e *Engine) cachedKV() []KVEvent {
	cached := e.pool.Cached()
	out := make([]KVEvent, len(cached))
	for i, ev := range cached {
		out[i] = e.kvEvent(ev)
	}
	return out
}

// kvEvent adds its adapter to a cache event. Called with e.mu held.
func (e *Engine) kvEvent(ev kvcache.Event) KVEvent {
	out := KVEvent{Event: ev}
	if a, ok := e.kvAdapters[ev.Namespace]; ok {
		out.Adapter, out.AdapterID = a.name, a.id
	}
	return out
}

// newSeqIn starts a sequence in the prefix-cache namespace of adapter a at
// scale s, remembering whose it is for the cache's events (a namespace
// outlives its adapter's unloading while its blocks stay cached). Called
// with e.mu held.
func (e *Engine) newSeqIn(a *adapterEntry, s float32) *kvcache.Seq {
	ns := a.namespace(s)
	if _, ok := e.kvAdapters[ns]; !ok {
		if e.kvAdapters == nil {
			e.kvAdapters = make(map[uint64]kvAdapter)
		}
		e.kvAdapters[ns] = kvAdapter{a.name, a.id}
	}
	return e.pool.NewSeqIn(ns)
}

// kvAdapter is the adapter of a prefix-cache namespace.
type kvAdapter struct {
	name string
	id   uint64
}

// MaxDraft is the most draft tokens speculative decoding proposes at once.
const MaxDraft = maxDraft

// SpecMetrics count speculative decoding's proposals over the engine's
// life, as vLLM's spec_decode counters do: proposals verified, the draft
// tokens they held, those accepted, and at each position i how many
// proposals had their token i accepted (with the ones before it).
type SpecMetrics struct {
	Drafts, DraftTokens, Accepted int64
	AcceptedAt                    [MaxDraft]int64
}

// observe counts one verified proposal of n tokens, the first accepted of
// which the target agreed with.
func (m *SpecMetrics) observe(n, accepted int) {
	m.Drafts++
	m.DraftTokens += int64(n)
	m.Accepted += int64(accepted)
	for i := range min(accepted, MaxDraft) {
		m.AcceptedAt[i]++
	}
}
