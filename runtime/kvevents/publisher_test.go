package kvevents

import (
	"context"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime"
)

// index is a prefix-cache index rebuilt from events alone, as a router
// keeps one per replica: each block hash with its parent and tokens.
type index struct {
	mu               sync.Mutex
	blocks           map[uint64]entry
	next             uint64 // the sequence number of the next batch
	stored, removed  int
	cleared, batches int
	err              error
}

type entry struct {
	parent  uint64 // 0: first block
	first   bool
	tokens  string
	adapter string
}

func newIndex() *index { return &index{blocks: map[uint64]entry{}} }

func (x *index) apply(seq uint64, b Batch) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if seq != x.next {
		x.err = fmt.Errorf("batch %d after %d", seq, x.next-1)
		return x.err
	}
	x.next++
	x.batches++
	for _, ev := range b.Events {
		switch {
		case ev.Cleared:
			clear(x.blocks)
			x.cleared++
		case ev.Removed != nil:
			for _, h := range ev.Removed.BlockHashes {
				if _, ok := x.blocks[h]; !ok {
					x.err = fmt.Errorf("batch %d removes %x, which is not stored", seq, h)
					return x.err
				}
				delete(x.blocks, h)
				x.removed++
			}
		case ev.Stored != nil:
			s := ev.Stored
			if len(s.TokenIDs) != len(s.BlockHashes)*s.BlockSize || s.Medium != MediumGPU {
				x.err = fmt.Errorf("batch %d: %d hashes of %d tokens with %d tokens, medium %q", seq, len(s.BlockHashes), s.BlockSize, len(s.TokenIDs), s.Medium)
				return x.err
			}
			parent, first := uint64(0), s.ParentHash == nil
			if !first {
				parent = *s.ParentHash
			}
			for i, h := range s.BlockHashes {
				if _, ok := x.blocks[h]; ok {
					x.err = fmt.Errorf("batch %d stores %x again", seq, h)
					return x.err
				}
				e := entry{parent: parent, first: first, tokens: fmt.Sprint(s.TokenIDs[i*s.BlockSize : (i+1)*s.BlockSize])}
				if s.LoRAName != nil {
					e.adapter = *s.LoRAName
				}
				x.blocks[h] = e
				parent, first = h, false
				x.stored++
			}
		}
	}
	return nil
}

// expected is the engine's own index as a publisher of model should
// publish it.
func expected(model string, cached []runtime.KVEvent) map[uint64]entry {
	out := map[uint64]entry{}
	for _, ev := range cached {
		root := rootHash(model, ev.Adapter)
		e := entry{first: ev.First, tokens: fmt.Sprint(ev.Tokens), adapter: ev.Adapter}
		if !ev.First {
			e.parent = blockHash(root, ev.Parent)
		}
		out[blockHash(root, ev.Hash)] = e
	}
	return out
}

// local is the loopback endpoint of a socket bound to every address.
func local(a net.Addr) string {
	return "tcp://127.0.0.1:" + strconv.Itoa(a.(*net.TCPAddr).Port)
}

func testModel(t *testing.T) string {
	t.Helper()
	return filepath.Join("..", "..", "..", "shared", "models", "stories260K.gguf")
}

// TestPublishRebuildsIndex: a subscriber with the real ZeroMQ client
// library, which joins after the engine has cached blocks, rebuilds the
// engine's prefix-cache index exactly from the events alone, over a
// workload on a KV pool so small that blocks are evicted all along; and a
// second subscriber that joins at the end rebuilds it by replay.
func TestPublishRebuildsIndex(t *testing.T) {
	eng, err := runtime.Load(testModel(t), runtime.Options{Device: "cpu", Context: 256, KV: runtime.KVOptions{Tokens: 384}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var systems []string
	for i := range 6 {
		systems = append(systems, fmt.Sprintf("Story %d. Tom and Lily went to the park with %d red balls and a big dog named Max.", i, i+2))
	}
	generate := func(i int) {
		req := runtime.Request{Prompt: systems[i%len(systems)] + fmt.Sprintf(" Then %d birds", i), MaxTokens: 12}
		if _, err := eng.Generate(ctx, req, func(runtime.Token) error { return nil }); err != nil {
			t.Error(err)
		}
	}
	generate(0) // blocks cached before anyone publishes

	p, err := New(ctx, eng, Options{Endpoint: "tcp://*:0", Replay: "tcp://*:0", Model: "story", Topic: "kv@test@story"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pub, replay := local(p.Addr()), local(p.ReplayAddr())
	subscribe := func() (*index, func()) {
		x := newIndex()
		sctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			err := Subscribe(sctx, pub, replay, "kv@test@story", x.apply)
			if sctx.Err() == nil {
				x.mu.Lock()
				x.err = fmt.Errorf("subscribe: %w", err)
				x.mu.Unlock()
			}
		}()
		return x, func() { stop(); <-done }
	}
	live, stopLive := subscribe()
	defer stopLive()

	var wg sync.WaitGroup
	jobs := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range jobs {
				generate(i)
			}
		})
	}
	for i := 1; i < 60; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()

	want := expected("story", eng.CachedKV())
	// The engine is still now, but the publisher sends what it queued
	// from its own goroutine: a subscriber has caught up when it holds
	// every batch sent and its index is the engine's (Next alone can be
	// read before the last events are sent).
	caughtUp := func(x *index) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			x.mu.Lock()
			next, err, same := x.next, x.err, maps.Equal(x.blocks, want)
			x.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if next == p.Next() && same {
				return
			}
			if time.Now().After(deadline) {
				if next != p.Next() {
					t.Fatalf("the subscriber got %d batches of %d", next, p.Next())
				}
				return // compare says how the index differs
			}
		}
	}
	caughtUp(live)
	live.mu.Lock()
	got := maps.Clone(live.blocks)
	stats := fmt.Sprintf("%d batches, %d blocks stored, %d removed, %d cached", live.batches, live.stored, live.removed, len(live.blocks))
	removed, cleared := live.removed, live.cleared
	live.mu.Unlock()
	t.Log(stats)
	if removed == 0 || cleared != 1 {
		t.Fatalf("%d blocks removed, %d clears: want evictions, and one clear at the start", removed, cleared)
	}
	compare(t, got, want)

	late, stopLate := subscribe()
	defer stopLate()
	caughtUp(late)
	late.mu.Lock()
	compare(t, late.blocks, want)
	late.mu.Unlock()
}

func compare(t *testing.T, got, want map[uint64]entry) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("the engine caches nothing")
	}
	for h, e := range want {
		if g, ok := got[h]; !ok || g != e {
			t.Errorf("block %x: events say %+v (%v), the engine %+v", h, g, ok, e)
		}
	}
	for _, h := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[h]; !ok {
			t.Errorf("block %x is in the events' index, not in the engine's", h)
		}
	}
}

// fakeSource is a cache whose events a test makes up.
type fakeSource struct {
	mu     sync.Mutex
	fn     func(runtime.KVEvent)
	cached []runtime.KVEvent
}

func (f *fakeSource) WatchKVCache(fn func(runtime.KVEvent)) []runtime.KVEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fn = fn
	return f.cached
}

func (f *fakeSource) KVBlockSize() int { return 2 }

func (f *fakeSource) emit(evs ...runtime.KVEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ev := range evs {
		f.fn(ev)
	}
}

// TestPublishBatches: consecutive blocks of a chain go in one BlockStored
// with the adapter's name and id; a hash cached twice is stored and
// removed once; and a publisher that falls behind drops what it held and
// sends the cache again after AllBlocksCleared.
func TestPublishBatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := &fakeSource{}
	p, err := New(ctx, src, Options{Endpoint: "tcp://*:0", Replay: "tcp://*:0", Model: "m", MaxPending: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	batches := make(chan Batch, 16)
	go Subscribe(ctx, local(p.Addr()), local(p.ReplayAddr()), "kv@", func(_ uint64, b Batch) error {
		batches <- b
		return nil
	})
	next := func() Batch {
		t.Helper()
		select {
		case b := <-batches:
			return b
		case <-ctx.Done():
			t.Fatal("no batch")
		}
		return Batch{}
	}
	if b := next(); len(b.Events) != 1 || !b.Events[0].Cleared {
		t.Fatalf("first batch %+v, want AllBlocksCleared alone", b)
	}
	stored := func(h, parent uint64, first bool, adapter string, tokens ...int32) runtime.KVEvent {
		ev := runtime.KVEvent{Adapter: adapter, AdapterID: 9}
		ev.Stored, ev.Hash, ev.Parent, ev.First, ev.Tokens = true, h, parent, first, tokens
		return ev
	}
	removed := func(h uint64, adapter string) runtime.KVEvent {
		ev := runtime.KVEvent{Adapter: adapter}
		ev.Hash = h
		return ev
	}
	root := rootHash("m", "sql")
	src.emit(stored(1, 0, true, "sql", 1, 2), stored(2, 1, false, "sql", 3, 4), stored(2, 1, false, "sql", 3, 4))
	b := next()
	if len(b.Events) != 1 || b.Events[0].Stored == nil {
		t.Fatalf("got %+v, want one BlockStored", b.Events)
	}
	s := b.Events[0].Stored
	if !slices.Equal(s.BlockHashes, []uint64{blockHash(root, 1), blockHash(root, 2)}) || s.ParentHash != nil ||
		!slices.Equal(s.TokenIDs, []int32{1, 2, 3, 4}) || s.BlockSize != 2 || *s.LoRAName != "sql" || *s.LoRAID != 9 {
		t.Errorf("stored %+v", s)
	}
	src.emit(removed(2, "sql")) // one of two copies: nothing to send
	src.emit(removed(2, "sql"), removed(1, "sql"))
	b = next()
	if len(b.Events) != 1 || b.Events[0].Removed == nil || !slices.Equal(b.Events[0].Removed.BlockHashes, []uint64{blockHash(root, 2), blockHash(root, 1)}) {
		t.Fatalf("got %+v, want the two blocks removed", b.Events)
	}
	// Falling behind: past MaxPending events waiting, add drops them...
	q := &Publisher{opts: Options{MaxPending: 4}, gen: 1, wake: make(chan struct{}, 1)}
	for i := range 6 {
		q.add(1, stored(uint64(10+i), 0, true, "", 1, 1))
	}
	if !q.overflow || q.pending != nil {
		t.Fatalf("after 6 events with room for 4: overflow %v, %d pending", q.overflow, len(q.pending))
	}
	// ...and the publisher sends the whole cache again.
	src.mu.Lock()
	src.cached = []runtime.KVEvent{stored(5, 0, true, "", 9, 9)}
	src.mu.Unlock()
	p.mu.Lock()
	p.overflow = true
	p.wake <- struct{}{}
	p.mu.Unlock()
	b = next()
	if len(b.Events) != 2 || !b.Events[0].Cleared || b.Events[1].Stored == nil || b.Events[1].Stored.BlockHashes[0] != blockHash(rootHash("m", ""), 5) {
		t.Fatalf("after falling behind: %+v, want AllBlocksCleared and the cache", b.Events)
	}
}
