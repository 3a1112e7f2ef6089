package gpu_test

import (
	"fmt"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
)

// TestWeightsShareBuffers checks that small weights are placed in one
// shared buffer (the device's memory grows by one chunk for all of them)
// while a weight of more than the largest piece keeps a buffer of its
// own, and that each reads as itself wherever it was placed: a table
// embedded from each against the CPU reference.
func TestWeightsShareBuffers(t *testing.T) {
	w := newTwins(t, 8)
	before := w.gpu.Stats().Memory
	// Odd sizes, so that placements after the first are at offsets that
	// alignment moved.
	shapes := [][]int{{40, 96}, {7, 12}, {64, 65}, {3, 4}, {100, 33}}
	var small []pair[backend.Weight]
	for _, s := range shapes {
		small = append(small, w.weight(s, w.random(s[0]*s[1], 1)))
	}
	if grew := w.gpu.Stats().Memory - before; grew != gpu.ArenaChunkMin {
		t.Errorf("%d small weights grew the device's buffers by %d bytes, want one shared chunk of %d", len(shapes), grew, gpu.ArenaChunkMin)
	}
	before = w.gpu.Stats().Memory
	bigShape := []int{1536, 384} // 2.25 MiB: more than a piece
	big := w.weight(bigShape, w.random(bigShape[0]*bigShape[1], 1))
	if grew := w.gpu.Stats().Memory - before; grew != int64(4*bigShape[0]*bigShape[1]) {
		t.Errorf("a weight of %d bytes grew the device's buffers by %d", 4*bigShape[0]*bigShape[1], grew)
	}
	for i, table := range append(small, big) {
		shape := append(shapes, bigShape)[i]
		t.Run(fmt.Sprintf("%dx%d", shape[0], shape[1]), func(t *testing.T) {
			x := w.tensor(8, shape[1], nil)
			toks := tokens(8, shape[0], w.rng)
			toks[0] = int32(shape[0] - 1)
			w.begin(toks, 0)
			w.each(func(b backend.Backend, i int) { b.Embed(x[i], table[i]) })
			w.compare("embed", x, len(toks), 0)
		})
	}
}
