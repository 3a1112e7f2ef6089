package kvcache

// lru is an intrusive doubly linked list of block ids, oldest first. The
// pool keeps its cached blocks (refcount 0, still in the prefix cache) here so
// that reusing one (a prefix hit) or evicting the oldest are both O(1) without
// allocating. Index n of prev/next is the sentinel.
type lru struct {
	prev, next []int32
	len        int
}

func newLRU(n int) lru {
	l := lru{prev: make([]int32, n+1), next: make([]int32, n+1)}
	l.prev[n], l.next[n] = int32(n), int32(n)
	return l
}

func (l *lru) sentinel() int32 { return int32(len(l.next) - 1) }

// pushBack makes b the most recently used block.
func (l *lru) pushBack(b int32) {
	s := l.sentinel()
	last := l.prev[s]
	l.next[last], l.prev[b] = b, last
	l.next[b], l.prev[s] = s, b
	l.len++
}

func (l *lru) remove(b int32) {
	p, n := l.prev[b], l.next[b]
	l.next[p], l.prev[n] = n, p
	l.len--
}

// front returns the least recently used block, or -1 when the list is empty.
func (l *lru) front() int32 {
	if l.len == 0 {
		return -1
	}
	return l.next[l.sentinel()]
}
