package kernel

// Prefetch asks the CPU to bring the cache lines that hold x into its
// caches ahead of their use, and returns at once; it changes no value.
// Attention needs it: a sequence's cache blocks lie anywhere in the pool,
// so each run of positions is a few lines that no hardware prefetcher
// predicts, and a batched decode step, which reads every sequence's keys
// and values once, would otherwise wait on memory run after run.
func Prefetch(x []float32) {
	if len(x) > 0 && hasPrefetch {
		prefetch(&x[0], len(x))
	}
}
