package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime/kvcache"
	"github.com/tessera-llm/tessera/runtime/kvevents"
)

// preciseRouter is a small precise-prefix router, test code standing in
// for llm-d's precise prefix-cache scorer: it mirrors every replica's
// prefix cache from its KV events alone and sends each request to the
// replica that holds the longest prefix of its prompt, the least busy
// among equals. As llm-d's indexer does, it keys blocks by its own hash of
// their tokens (kvcache.ChainHash, chained from 0), learning from each
// BlockStored which engine hash is which of its keys, since the engine's
// hashes are opaque; and it counts a prompt as cached for a couple of
// seconds on the replica it just sent it to (llm-d's speculative
// indexing), so that a burst of one new prefix does not scatter before
// its first prefill is reported.
type preciseRouter struct {
	replicas  []*mirrorIndex
	tokenize  func(prompt string) ([]int32, error)
	blockSize int
}

// mirrorIndex is one replica's cache as its events tell it.
type mirrorIndex struct {
	proxy    *httputil.ReverseProxy
	inflight atomic.Int64

	mu   sync.Mutex
	keys map[uint64]uint64    // the engine's block hash → the router's key
	have map[uint64]int       // the router's key → blocks cached with it
	spec map[uint64]time.Time // keys just routed here, until when
}

// speculative is how long a routed prompt counts as cached before the
// replica's events say so (llm-d's speculativeTTL default).
const speculative = 2 * time.Second

func newMirrorIndex(target string) (*mirrorIndex, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	return &mirrorIndex{proxy: httputil.NewSingleHostReverseProxy(u), keys: map[uint64]uint64{}, have: map[uint64]int{},
		spec: map[uint64]time.Time{}}, nil
}

// apply takes one batch of the replica's events.
func (m *mirrorIndex) apply(_ uint64, b kvevents.Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range b.Events {
		switch {
		case ev.Cleared:
			clear(m.keys)
			clear(m.have)
		case ev.Removed != nil:
			for _, h := range ev.Removed.BlockHashes {
				if k, ok := m.keys[h]; ok {
					delete(m.keys, h)
					if m.have[k]--; m.have[k] <= 0 {
						delete(m.have, k)
					}
				}
			}
		case ev.Stored != nil:
			s := ev.Stored
			var key uint64
			if s.ParentHash != nil {
				var ok bool
				if key, ok = m.keys[*s.ParentHash]; !ok {
					continue // its prefix is gone: unreachable
				}
			}
			for i, h := range s.BlockHashes {
				key = kvcache.ChainHash(key, s.TokenIDs[i*s.BlockSize:(i+1)*s.BlockSize])
				m.keys[h] = key
				m.have[key]++
			}
		}
	}
	return nil
}

// matched is how many of keys, from the first, the replica holds.
func (m *mirrorIndex) matched(keys []uint64, now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, k := range keys {
		if m.have[k] == 0 && !now.Before(m.spec[k]) {
			return i
		}
	}
	return len(keys)
}

// promptKeys are the router's keys of the prompt's full blocks that a
// replica may share: all but the one holding the last token.
func (r *preciseRouter) promptKeys(prompt string) ([]uint64, error) {
	tokens, err := r.tokenize(prompt)
	if err != nil {
		return nil, err
	}
	var keys []uint64
	var key uint64
	for i := 0; (i+1)*r.blockSize < len(tokens); i++ {
		key = kvcache.ChainHash(key, tokens[i*r.blockSize:(i+1)*r.blockSize])
		keys = append(keys, key)
	}
	return keys, nil
}

func (r *preciseRouter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in struct{ Prompt string }
	if err := json.Unmarshal(body, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	keys, err := r.promptKeys(in.Prompt)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	best, bestMatch := r.replicas[0], -1
	for _, m := range r.replicas {
		n := m.matched(keys, now)
		if n > bestMatch || n == bestMatch && m.inflight.Load() < best.inflight.Load() {
			best, bestMatch = m, n
		}
	}
	best.mu.Lock()
	for _, k := range keys {
		best.spec[k] = now.Add(speculative)
	}
	best.mu.Unlock()
	best.inflight.Add(1)
	defer best.inflight.Add(-1)
	req.Body = io.NopCloser(bytes.NewReader(body))
	best.proxy.ServeHTTP(w, req)
}

// startPreciseRouter subscribes to every replica's KV events and returns
// the router, ready once every subscription has had its first batch.
func startPreciseRouter(t *testing.T, ctx context.Context, replicas, events, replays []string, blockSize int, tokenize func(string) ([]int32, error)) *preciseRouter {
	t.Helper()
	r := &preciseRouter{tokenize: tokenize, blockSize: blockSize}
	var ready sync.WaitGroup
	for i := range replicas {
		m, err := newMirrorIndex(replicas[i])
		if err != nil {
			t.Fatal(err)
		}
		r.replicas = append(r.replicas, m)
		ready.Add(1)
		var once sync.Once
		done := make(chan struct{})
		t.Cleanup(func() { <-done })
		go func() {
			defer close(done)
			err := kvevents.Subscribe(ctx, events[i], replays[i], "kv@", func(seq uint64, b kvevents.Batch) error {
				defer once.Do(ready.Done)
				return m.apply(seq, b)
			})
			if ctx.Err() == nil {
				t.Errorf("replica %d's KV events: %v", i, err)
				once.Do(ready.Done)
			}
		}()
	}
	ready.Wait()
	return r
}

// kvEventArgs gives replica i its own KV event sockets.
func kvEventArgs(ports []string) func(i int) []string {
	return func(i int) []string {
		return []string{"--kv-events", fmt.Sprintf("tcp://*:%s", ports[2*i]), "--kv-events-replay", fmt.Sprintf("tcp://*:%s", ports[2*i+1]),
			"--kv-events-pod", fmt.Sprintf("r%d", i+1)}
	}
}
