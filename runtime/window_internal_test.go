package runtime

import (
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime/backend"
)

// TestWindowBytesGemma3: Gemma 3 1B's shape at 8192 tokens of context (26
// layers, 4 of them global, one kv head of 256, a window of 512) holds,
// with its sliding layers in rings, the keys and values of its global
// layers plus its windows, against every layer's today. The figures are
// computed from the shape (nothing is allocated): per position and layer
// 2·256·4 = 2 KiB in f32, and a ring of RingBlocks(512, rows, 8) blocks.
func TestWindowBytesGemma3(t *testing.T) {
	s, err := synth.Lookup("gemma3-1b")
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config
	c.Context = 8192
	const perLayer = 8192 * 2048    // one layer's keys and values of a context, f32
	const ringBytes = 22 * 8 * 2048 // a ring block: 8 positions of the 22 sliding layers
	full := int64(26 * perLayer)
	if got := kvBlockBytes(c, 8, backend.KVF32) * 1024; got != full {
		t.Fatalf("the full cache of one context is %d bytes, want 26 layers × %d = %d", got, perLayer, full)
	}
	for _, tc := range []struct {
		name          string
		rows, maxOut  int
		ring, running int
	}{
		// A ring: the window, a step's rows of the sequence and a partial
		// block, in blocks of 8: (512 + rows + 5)/8 + 1.
		{"cpu, one sequence", DefaultBatchTokensCPU, 1, 81, 1},
		{"gpu, one sequence", DefaultBatchTokensGPU, 1, 129, 1},
		// The rings are capped at the sliding layers' share of the full
		// cache: 1024/81 = 12 slots, less the scratch and 2 snapshots.
		{"cpu, default sequences", DefaultBatchTokensCPU, DefaultMaxSeqs, 81, 9},
		{"gpu, default sequences", DefaultBatchTokensGPU, DefaultMaxSeqs, 129, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := planWindows(c, false, 1024, 8, tc.rows, tc.maxOut, backend.KVF32)
			if !w.on() || w.Ring != tc.ring || w.Running != tc.running {
				t.Fatalf("rings of %d blocks for %d sequences, want %d for %d", w.Ring, w.Running, tc.ring, tc.running)
			}
			slots := int64(tc.running + 1 + windowSnapshots)
			if got, want := w.Shape.Bytes(), slots*int64(tc.ring)*ringBytes; got != want {
				t.Errorf("rings of %d bytes, want %d", got, want)
			}
			global := int64(4 * perLayer)
			engine := global + w.Shape.Bytes() // a pool of one context (KVOptions.Tokens 8192)
			_, seq := SequenceKV(c, backend.KVF32, 8192, 8, tc.rows)
			if want := global + int64(tc.ring)*ringBytes; seq != want {
				t.Errorf("one sequence keeps %d bytes, want %d", seq, want)
			}
			t.Logf("8192 tokens: %.1f MB full, %.1f MB for one sequence's global layers and window, %.1f MB for the engine (%d rings)",
				float64(full)/1e6, float64(seq)/1e6, float64(engine)/1e6, slots)
			if engine > full {
				t.Errorf("the engine's caches take %d bytes, more than the full cache's %d", engine, full)
			}
		})
	}
	// Without rings (asked for, or at a context a ring covers) the plan
	// is empty and one sequence keeps every position.
	if w := planWindows(c, true, 1024, 8, 128, 1, backend.KVF32); w.on() {
		t.Errorf("FullWindows still planned rings: %+v", w)
	}
	short := c
	short.Context = 512
	if w := planWindows(short, false, 1024, 8, 128, 1, backend.KVF32); w.on() {
		t.Errorf("a context of 512 still planned rings: %+v", w)
	}
	if f, w := SequenceKV(short, backend.KVF32, 512, 8, 128); f != w {
		t.Errorf("a context of 512: %d bytes windowed, %d full", w, f)
	}
}

// TestWindowBlocks: where a byte budget sizes the pool, the global
// layers' blocks take what the rings leave of it: all of an asked-for
// budget, at most four contexts of the default one, never fewer than the
// full cache's.
func TestWindowBlocks(t *testing.T) {
	s, err := synth.Lookup("gemma3-1b")
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config
	c.Context = 8192
	mem := int64(1 << 30)
	full := int(mem / kvBlockBytes(c, 8, backend.KVF32)) // 2520 blocks of every layer
	w := planWindows(c, false, full, 8, DefaultBatchTokensCPU, 1, backend.KVF32)
	globalBlock := int64(8 * 4 * 2048)
	left := int((mem - w.Shape.Bytes()) / globalBlock)
	if got := windowBlocks(c, w, full, mem, true); got != left {
		t.Errorf("an asked-for GiB: %d blocks, want %d", got, left)
	}
	if got, want := windowBlocks(c, w, full, mem, false), 4*8192/8+1; got != want {
		t.Errorf("the default GiB: %d blocks, want four contexts, %d", got, want)
	}
	many := planWindows(c, false, full, 8, DefaultBatchTokensCPU, DefaultMaxSeqs, backend.KVF32)
	if got := windowBlocks(c, many, full, mem, true); got < full {
		t.Errorf("%d blocks beside %d rings, fewer than the full cache's %d", got, many.Running, full)
	}
}

// TestWindowBytesMistral: Mistral 7B v0.1's shape (32 layers, 8 kv heads
// of 128, a window of 4096 on every layer) keeps one sequence's ring of
// its window whatever the context, and an engine's caches (PoolKV, what
// `tessera bench` estimates for a pool of one context) are its rings
// alone, the pool's blocks holding no layer: the same bytes at 32768 and
// at 131072 tokens (rings for 4 running sequences, the scratch one and
// two snapshots), where every position kept grows fourfold. Nothing is
// allocated.
func TestWindowBytesMistral(t *testing.T) {
	c := models.Config{Arch: "mistral", Dim: 4096, FFN: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 32000, Context: 32768, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 128, Rope: models.RopeHalves,
		SlidingWindow: 4096, LocalRopeTheta: 10000}
	c.Sliding = make([]bool, c.Layers)
	for l := range c.Sliding {
		c.Sliding[l] = true
	}
	const perPos = 32 * 2 * 8 * 128 * 4 // every layer's keys and values of a position, f32: 256 KiB
	ring := backend.RingBlocks(4096, DefaultBatchTokensCPU, 8)
	b := Budgets{MaxBatchTokens: DefaultBatchTokensCPU, MaxSeqs: 4}
	var pools [2]int64
	for i, ctx := range []int{32768, 131072} {
		full, win := SequenceKV(c, backend.KVF32, ctx, 8, DefaultBatchTokensCPU)
		if full != int64(ctx)*perPos || win != int64(ring*8)*perPos {
			t.Errorf("%d tokens: one sequence keeps %d bytes of %d, want a ring's %d of %d", ctx, win, full, int64(ring*8)*perPos, int64(ctx)*perPos)
		}
		kv, window := PoolKV(c, ctx, b)
		if kv != window || window != int64((4+1+windowSnapshots)*ring*8)*perPos {
			t.Errorf("%d tokens: a pool of one context takes %d bytes, %d of them rings; want 7 rings alone", ctx, kv, window)
		}
		pools[i] = kv
		t.Logf("%d tokens: one sequence %.0f MiB (%.0f MiB with every position), the engine's caches %.0f MiB", ctx,
			float64(win)/(1<<20), float64(full)/(1<<20), float64(kv)/(1<<20))
	}
	if pools[0] != pools[1] {
		t.Errorf("the caches grew with the context: %d → %d bytes", pools[0], pools[1])
	}
	// A byte budget buys rings from the blocks of every layer it would
	// have held; the pool's blocks, holding nothing, number four contexts.
	blocks := int((5 << 30) / (8 * perPos)) // 5 GiB of every layer: 2560 blocks, under one context of 32768
	w := planWindows(c, false, blocks, 8, DefaultBatchTokensCPU, 4, backend.KVF32)
	if !w.on() || w.Running != 1 || w.Shape.Layers != 32 {
		t.Fatalf("5 GiB: %+v, want rings of every layer for one running sequence", w)
	}
	if got, want := windowBlocks(c, w, blocks, 5<<30, true), 4*32768/8+1; got != want {
		t.Errorf("the pool beside rings of every layer: %d blocks, want four contexts, %d", got, want)
	}
}

// TestWindowSnapshotsFew: where a budget buys few rings (a large window),
// one running sequence and the scratch ring come before the prefix
// snapshots: 2 rings run one sequence without snapshots, 3 with one, 4
// with both, and one ring runs nothing (every position kept).
func TestWindowSnapshotsFew(t *testing.T) {
	c := models.Config{Arch: "mistral", Dim: 4096, FFN: 14336, Layers: 32, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 32000, Context: 32768, NormEps: 1e-5, RopeTheta: 10000, RopeDim: 128, Rope: models.RopeHalves,
		SlidingWindow: 4096, LocalRopeTheta: 10000, Sliding: make([]bool, 32)}
	for l := range c.Sliding {
		c.Sliding[l] = true
	}
	ring := backend.RingBlocks(4096, DefaultBatchTokensCPU, 8)
	for rings, want := range map[int][2]int{1: {0, 0}, 2: {1, 0}, 3: {1, 1}, 4: {1, 2}, 5: {2, 2}, 9: {4, 2}} {
		w := planWindows(c, false, rings*ring+ring/2, 8, DefaultBatchTokensCPU, 4, backend.KVF32)
		snapshots := 0
		if w.on() {
			snapshots = w.Shape.Blocks/w.Ring - w.Running - 1
		}
		if w.Running != want[0] || snapshots != want[1] || w.on() && w.Ring != ring {
			t.Errorf("%d rings' blocks: %d running, %d snapshots (rings of %d), want %d and %d", rings, w.Running, snapshots, w.Ring, want[0], want[1])
		}
	}
}
