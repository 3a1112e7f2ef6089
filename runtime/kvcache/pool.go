// Package kvcache is the bookkeeping half of a paged KV cache, after vLLM's
// PagedAttention: the keys and values of every layer live in one pool of
// fixed-size blocks, and each sequence maps its logical blocks to physical
// ones through a block table. Nothing here touches device memory; the engine
// writes K/V into the slots the tables name and performs the block copies
// that Reserve asks for.
//
// Full blocks are registered in a prefix cache keyed exactly on their
// tokens and on the identity of the block before them, so a new sequence
// whose prompt starts like an earlier one can Share those blocks instead of
// recomputing them. A shared block is never written into: Reserve copies it
// first (copy-on-write). Blocks nobody references but that are still in the
// prefix cache stay reusable until the free list runs dry, then the least
// recently used is evicted.
package kvcache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrFull is returned by Reserve when the pool has too few free or evictable
// blocks; the scheduler is expected to preempt or wait.
var ErrFull = errors.New("kvcache: pool full")

// Copy is a block copy the engine must perform (all layers) before writing
// into Dst. Copies must run in the order Reserve returned them, and before
// any write of the same step: a copy's Src may be a cached block that a
// later Reserve evicts and hands out again.
type Copy struct{ Src, Dst int32 }

// Pool owns the physical blocks. It is not safe for concurrent use; the
// engine's scheduler owns it.
type Pool struct {
	blockSize int
	blocks    []block
	free      []int32            // empty blocks (ref 0, unregistered), a stack
	cached    lru                // ref 0 but registered: reusable by prefix, evicted oldest first
	index     map[cacheKey]int32 // the prefix cache: registered blocks by exact key
	lastNode  uint64             // node ids are never reused, so a stale parent can never match
	live      map[*Seq]struct{}  // sequences holding blocks, for Stats
	watch     func(Event)        // told of every change to the prefix cache (Watch), or nil

	lookups, hits int // tokens asked for in Share, tokens found
}

type block struct {
	ref  int32    // block tables referencing it
	node uint64   // prefix-cache identity; 0 when not registered
	key  cacheKey // its index entry when registered
	// When registered, what its events say (Event): its content hash, its
	// namespace, and whether it is first or follows the block hashed parentHash.
	hash, ns, parentHash uint64
	first                bool
}

// cacheKey identifies a full block by everything that determines its K/V:
// the node of the block before it (0 for the first block of a sequence) and
// its own tokens, encoded in a string so map equality is exact comparison.
type cacheKey struct {
	parent uint64
	tokens string
}

func makeKey(parent uint64, tokens []int32) cacheKey {
	b := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(t))
	}
	return cacheKey{parent, string(b)}
}

// NewPool makes a pool of blocks blocks of blockSize tokens each. Slots are
// int32, so blocks*blockSize may not exceed 2^31.
func NewPool(blocks, blockSize int) (*Pool, error) {
	if blocks <= 0 || blockSize <= 0 {
		return nil, fmt.Errorf("kvcache: need a positive block count and size, got %d blocks of %d", blocks, blockSize)
	}
	if int64(blocks)*int64(blockSize) > math.MaxInt32+1 {
		return nil, fmt.Errorf("kvcache: %d blocks of %d tokens overflow int32 slots", blocks, blockSize)
	}
	p := &Pool{
		blockSize: blockSize,
		blocks:    make([]block, blocks),
		free:      make([]int32, blocks),
		cached:    newLRU(blocks),
		index:     make(map[cacheKey]int32),
		live:      make(map[*Seq]struct{}),
	}
	// A stack popped from the end: hand out block 0 first, which keeps
	// tables predictable when reading logs and tests.
	for i := range p.free {
		p.free[i] = int32(blocks - 1 - i)
	}
	return p, nil
}

// BlockSize is the number of tokens per block.
func (p *Pool) BlockSize() int { return p.blockSize }

// Blocks is the number of physical blocks.
func (p *Pool) Blocks() int { return len(p.blocks) }

// BlocksNeeded is the number of blocks that hold tokens tokens.
func (p *Pool) BlocksNeeded(tokens int) int {
	return (tokens + p.blockSize - 1) / p.blockSize
}

// available counts the blocks alloc can hand out: free ones, then evictable.
func (p *Pool) available() int { return len(p.free) + p.cached.len }

// alloc returns a private block with ref 1, evicting the least recently used
// cached block when the free list is empty. Callers check available first.
func (p *Pool) alloc() int32 {
	var b int32
	if n := len(p.free); n > 0 {
		b, p.free = p.free[n-1], p.free[:n-1]
	} else {
		b = p.cached.front()
		if b < 0 {
			panic("kvcache: alloc on a full pool")
		}
		p.cached.remove(b)
		p.unregister(b)
	}
	p.blocks[b].ref = 1
	return b
}

// retain adds a reference to a registered block found in the prefix cache.
func (p *Pool) retain(b int32) {
	if p.blocks[b].ref == 0 {
		p.cached.remove(b)
	}
	p.blocks[b].ref++
}

// release drops a reference. An unreferenced block stays reusable by prefix
// while it is registered; otherwise its contents are worthless and it is free.
func (p *Pool) release(b int32) {
	blk := &p.blocks[b]
	if blk.ref--; blk.ref > 0 {
		return
	}
	if blk.node != 0 {
		p.cached.pushBack(b)
	} else {
		p.free = append(p.free, b)
	}
}

// register records that private block b now holds the full block tokens
// after the block identified by parent, and returns the node that
// identifies this content. If an equal block is already registered (two
// sequences computed the same prefix independently) that one keeps the
// entry and its node is returned; b stays private. The block's content
// hash is h, chained from parentHash (from the namespace ns for a first
// block).
func (p *Pool) register(b int32, parent uint64, tokens []int32, h, ns, parentHash uint64, first bool) uint64 {
	key := makeKey(parent, tokens)
	if other, ok := p.index[key]; ok {
		return p.blocks[other].node
	}
	p.lastNode++
	blk := &p.blocks[b]
	blk.node, blk.key = p.lastNode, key
	blk.hash, blk.ns, blk.parentHash, blk.first = h, ns, parentHash, first
	p.index[key] = b
	if p.watch != nil {
		p.watch(blk.stored())
	}
	return p.lastNode
}

// unregister removes b from the prefix cache. Blocks registered under it
// become unreachable (no key can name its node again) and age out of the LRU.
func (p *Pool) unregister(b int32) {
	blk := &p.blocks[b]
	if p.watch != nil {
		p.watch(Event{Hash: blk.hash, Namespace: blk.ns})
	}
	delete(p.index, blk.key)
	blk.node, blk.key = 0, cacheKey{}
	blk.hash, blk.ns, blk.parentHash, blk.first = 0, 0, 0, false
}
