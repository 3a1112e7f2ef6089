package tokenizer

// The merge loops keep their candidates in a binary heap over a slice:
// each merge then costs O(log n) instead of a scan of every pair, which
// made SentencePiece's encoding quadratic in the length of the text.

// lesser is an item that knows whether it comes out of the heap before
// another.
type lesser[T any] interface{ less(T) bool }

// heapPush adds x to the heap h and returns the heap.
func heapPush[T lesser[T]](h []T, x T) []T {
	h = append(h, x)
	for j := len(h) - 1; j > 0; {
		p := (j - 1) / 2
		if !h[j].less(h[p]) {
			break
		}
		h[j], h[p] = h[p], h[j]
		j = p
	}
	return h
}

// heapPop removes the first item of the non-empty heap h and returns it
// and the heap.
func heapPop[T lesser[T]](h []T) (T, []T) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for j := 0; ; {
		l, r, first := 2*j+1, 2*j+2, j
		if l < len(h) && h[l].less(h[first]) {
			first = l
		}
		if r < len(h) && h[r].less(h[first]) {
			first = r
		}
		if first == j {
			break
		}
		h[j], h[first] = h[first], h[j]
		j = first
	}
	return top, h
}
