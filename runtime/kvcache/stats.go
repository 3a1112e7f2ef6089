package kvcache

// Stats is a snapshot of the pool's occupancy and prefix-cache efficiency.
type Stats struct {
	// Blocks = Used + Free + Cached. Used blocks are referenced by some
	// sequence; Cached ones by none but still reusable by prefix (evicted
	// when Free is exhausted); Free ones hold nothing of value.
	Blocks, Used, Free, Cached int

	// Over live sequences, each physical block counted once: slots in their
	// blocks, and slots holding a token some sequence committed.
	AllocatedSlots, UsedSlots int
	// Waste is (AllocatedSlots-UsedSlots)/AllocatedSlots, 0 when nothing is
	// allocated. Shared blocks are full, so it comes from each sequence's
	// last partial block and from reserved but uncommitted slots.
	Waste float64

	// Tokens asked for in Share and tokens found in the cache.
	PrefixLookups, PrefixHits int
	HitRate                   float64
}

// Stats walks the live sequences' tables, once per step (the engine keeps
// the peak and the waste): a map only for the blocks several tables share.
func (p *Pool) Stats() Stats {
	st := Stats{
		Blocks:        len(p.blocks),
		Free:          len(p.free),
		Cached:        p.cached.len,
		PrefixLookups: p.lookups,
		PrefixHits:    p.hits,
	}
	st.Used = st.Blocks - st.Free - st.Cached
	st.AllocatedSlots = st.Used * p.blockSize

	// A shared block holds as many tokens as its fullest user committed;
	// a block in one table (most of them) is counted as it is met, so
	// that the engine can take these figures after every step.
	var shared map[int32]int
	for s := range p.live {
		for i, b := range s.table {
			n := min(p.blockSize, max(0, len(s.tokens)-i*p.blockSize))
			if p.blocks[b].ref <= 1 {
				st.UsedSlots += n
				continue
			}
			if shared == nil {
				shared = make(map[int32]int)
			}
			shared[b] = max(shared[b], n)
		}
	}
	for _, n := range shared {
		st.UsedSlots += n
	}
	if st.AllocatedSlots > 0 {
		st.Waste = float64(st.AllocatedSlots-st.UsedSlots) / float64(st.AllocatedSlots)
	}
	if st.PrefixLookups > 0 {
		st.HitRate = float64(st.PrefixHits) / float64(st.PrefixLookups)
	}
	return st
}
