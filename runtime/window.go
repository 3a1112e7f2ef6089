package runtime

import (
	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// Sliding-window layers keep only their window (issue 42). A sliding layer
// attends to the last SlidingWindow positions, so it never reads a key
// older than that: its cache need not follow the sequence. The engine
// keeps the model's sliding layers in a cache of their own
// (backend.KVShape.Windowed) where each running sequence has a ring of
// R blocks (backend.RingBlocks: the window, the rows one step stores for
// the sequence and a partial block), logical block j at ring entry
// slot·R + j mod R (backend.RingTable); the global layers stay in the
// pool's cache, whose blocks now hold their keys and values alone. The
// kernels are unchanged: they read positions from the window's start on,
// which are always among the ring's R blocks, through the ring tables.
//
// A ring is a sequence slot, the slots the recurrent states of Qwen3.5's
// linear layers use (stateSlots in linear.go): taken at admission, given
// back when the sequence finishes or is preempted (it is recomputed from
// position 0, which rewrites its window), a scratch slot for one-off
// passes (solo), and prefix snapshots: the ring at a prompt's last whole
// block, copied block by block, which a prefix-cache hit restores, so a
// hit is taken only where the window at its position was kept.
//
// Speculative rollback stays correct: a step's rows, drafts included, are
// counted in R, so the positions a rolled-back sequence reads next (from
// its kept length minus the window on) were not overwritten by the draft.
//
// Memory: each ring slot costs R·BlockSize positions of every sliding
// layer whatever the sequence's length, so the rings are capped at what
// the full cache would have spent on the sliding layers (never more bytes
// than before: fewer running sequences where the rings run out, see
// Budgets). Where a byte budget sizes the pool (no KVOptions.Tokens), the
// pool's blocks, which hold the global layers alone, take what the rings
// leave of it: all of an explicit KVOptions.Memory (more context for the
// bytes), and of the default budget at most its four contexts (the same
// context for fewer bytes: windowBlocks). With
// KVOptions.FullWindows, or where rings cannot pay (a context within the
// ring, a model with linear layers), every layer keeps the whole sequence
// as before.
//
// A model whose every layer slides (Mistral with its window, a Gemma 3
// file whose sliding_window_pattern is 0) keeps rings alone: the pool's
// cache has no layers (backend.KVShape), so its blocks cost nothing and
// only number the sequences' positions, for the block tables the rings
// follow, admission, preemption and the prefix cache, all unchanged. The
// rings are sized as above, from the budget's blocks of every layer; the
// pool then gets at least four contexts of blocks (windowBlocks), so that
// a byte budget below one context of every layer still runs the whole
// context in a window's memory.

// windowSnapshots is how many prompt-prefix rings an engine keeps for the
// prefix cache: fewer than the recurrent states' stateSnapshots, a ring
// being a window of every sliding layer; fewer still (down to none) where
// the budget buys only two or three rings (planWindows).
const windowSnapshots = 2

// windowing is the windowed cache an engine gives its sliding layers: zero
// (Shape.Layers 0) when every layer keeps the whole sequence.
type windowing struct {
	Shape   backend.KVShape // Blocks = slots·Ring
	Ring    int             // blocks of one sequence's ring
	Running int             // sequences that run at once: a ring each
}

// on reports whether the sliding layers keep their windows only.
func (w windowing) on() bool { return w.Shape.Layers > 0 }

// kvLayerKinds lists the layers of c that store keys and values, the
// global ones and the sliding ones, in order (not the linear layers, nor
// Gemma 4's shared ones).
func kvLayerKinds(c models.Config) (global, sliding []int) {
	for l := range c.Layers {
		if c.LayerLinear(l) || c.KVSource(l) != l {
			continue
		}
		if c.LayerSliding(l) {
			sliding = append(sliding, l)
		} else {
			global = append(global, l)
		}
	}
	return global, sliding
}

// kvTokenBytes is the keys and values of one position in the given layers.
func kvTokenBytes(c models.Config, layers []int, t backend.KVType) int64 {
	var total int64
	for _, l := range layers {
		total += backend.KVShape{Layers: 1, Blocks: 1, BlockSize: 1, Heads: c.LayerKVHeads(l), HeadDim: c.LayerHeadDim(l), Type: t}.Bytes()
	}
	return total
}

// planWindows sizes the windowed cache of c's sliding layers beside a
// pool of blocks blocks (the count that would hold every layer), for steps
// of maxBatch rows and maxOut sequences: zero where the rings cannot pay
// or full asks for the whole cache.
func planWindows(c models.Config, full bool, blocks, blockSize, maxBatch, maxOut int, t backend.KVType) windowing {
	_, sliding := kvLayerKinds(c)
	if full || len(sliding) == 0 || c.Linear.On() || c.SlidingWindow <= 0 {
		return windowing{}
	}
	ring := backend.RingBlocks(c.SlidingWindow, maxBatch, blockSize)
	if ring >= (c.Context+blockSize-1)/blockSize {
		return windowing{} // a ring as long as the context saves nothing
	}
	slots := blocks / ring // the sliding layers' share of the full cache, in rings
	// Fewer prefix snapshots where the rings are few (a large window in a
	// small budget): a running sequence and the scratch ring come first.
	snapshots := max(0, min(windowSnapshots, slots-2))
	running := min(maxOut, slots-1-snapshots)
	if running < 1 {
		return windowing{}
	}
	slots = running + 1 + snapshots
	l := sliding[0]
	return windowing{Ring: ring, Running: running, Shape: backend.KVShape{Layers: len(sliding), Blocks: slots * ring, BlockSize: blockSize,
		Heads: c.LayerKVHeads(l), HeadDim: c.LayerHeadDim(l), Type: t, Windowed: true}}
}

// windowBlocks is the pool's blocks beside the rings of w where a byte
// budget mem sizes it (see the memory paragraph above): what the rings
// leave of mem in blocks of the global layers, at most the default
// budget's four contexts when budget is the default (not asked for). It
// is never below blocks, the count of the full cache for mem, since the
// rings take at most the sliding layers' share of that. Without global
// layers the blocks cost nothing: four contexts of them, at least.
func windowBlocks(c models.Config, w windowing, blocks int, mem int64, asked bool) int {
	global, _ := kvLayerKinds(c)
	s := w.Shape
	if len(global) == 0 {
		return max(blocks, 4*c.Context/s.BlockSize+1)
	}
	n := int((mem - s.Bytes()) / (int64(s.BlockSize) * kvTokenBytes(c, global, s.Type)))
	if !asked {
		n = min(n, 4*c.Context/s.BlockSize+1)
	}
	return max(n, blocks)
}

// windows sets the batch's ring tables, one per sequence from its slot in
// States, on a model whose sliding layers keep their windows only.
func (n *llama) windows(b *backend.Batch) {
	if n.win == nil {
		return
	}
	b.Windows = make([][]int32, len(b.Tables))
	for s, t := range b.Tables {
		b.Windows[s] = backend.RingTable(nil, int(b.States[s]), n.ring, len(t))
	}
}

// copyRing copies sequence slot src's ring to slot dst in the windowed
// cache (a prefix snapshot kept, or restored).
func (n *llama) copyRing(src, dst int) {
	for j := range n.ring {
		n.be.CopyBlock(n.win, src*n.ring+j, dst*n.ring+j)
	}
}

// WindowBytes is what the sliding layers' rings take (0 where every layer
// keeps the whole sequence); KVBytes includes it.
func (e *Engine) WindowBytes() int64 {
	if e.net.win == nil {
		return 0
	}
	return e.net.win.Shape().Bytes()
}

// SequenceKV is what one sequence of context tokens holds in the KV
// cache of c, stored as t in blocks of blockSize, in steps of up to rows
// tokens: full with every layer keeping every position, windowed with the
// sliding layers keeping a ring of their window (equal to full for a
// model without sliding layers, or where a ring is as long as the
// context). Neither counts the scratch ring or the prefix snapshots.
func SequenceKV(c models.Config, t backend.KVType, context, blockSize, rows int) (full, windowed int64) {
	global, sliding := kvLayerKinds(c)
	blocks := int64((context + blockSize - 1) / blockSize)
	g := blocks * int64(blockSize) * kvTokenBytes(c, global, t)
	full = g + blocks*int64(blockSize)*kvTokenBytes(c, sliding, t)
	if len(sliding) == 0 || c.Linear.On() || c.SlidingWindow <= 0 {
		return full, full
	}
	ring := int64(backend.RingBlocks(c.SlidingWindow, rows, blockSize))
	if ring >= blocks {
		return full, full
	}
	return full, g + ring*int64(blockSize)*kvTokenBytes(c, sliding, t)
}

// PoolKV is what an engine's KV caches take for a pool of context tokens
// of c in f32 (KVOptions.Tokens = context) with budgets b resolved:
// every layer's positions, or where the sliding layers keep their windows
// only, the global layers' plus the rings (window of kv).
func PoolKV(c models.Config, context int, b Budgets) (kv, window int64) {
	blocks := (context + DefaultBlockSize - 1) / DefaultBlockSize
	kv = int64(blocks) * kvBlockBytes(c, DefaultBlockSize, backend.KVF32)
	cc := c
	cc.Context = context // the rings pay where the context is longer
	w := planWindows(cc, false, blocks, DefaultBlockSize, b.MaxBatchTokens, min(b.MaxBatchTokens, b.MaxSeqs), backend.KVF32)
	if !w.on() {
		return kv, 0
	}
	global, _ := kvLayerKinds(c)
	window = w.Shape.Bytes()
	return int64(blocks)*DefaultBlockSize*kvTokenBytes(c, global, backend.KVF32) + window, window
}
