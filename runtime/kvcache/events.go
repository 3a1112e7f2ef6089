package kvcache

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// Event is a change to the prefix cache: a full block entering it
// (Commit registering it) or leaving it (eviction, or a Truncate or
// Reserve that must write into it). Watching them lets another process
// mirror which prefixes this pool holds, as routers that send a prompt to
// the replica caching its prefix do with vLLM's KV events.
type Event struct {
	// Stored is true when the block entered the cache, false when it left.
	Stored bool
	// Hash identifies the block by content: ChainHash of its tokens after
	// the hash of the block before it, from the namespace of the sequence
	// that computed it. Two blocks registered at once may share a hash
	// (one whose parent was evicted and computed again, under a new
	// identity, next to the orphan that still waits for eviction), so a
	// mirror counts them.
	Hash uint64
	// Namespace is that sequence's namespace (0 for NewSeq's).
	Namespace uint64
	// For a stored block: First when it is a sequence's first block, else
	// Parent is the hash of the block before it; Tokens are its tokens.
	First  bool
	Parent uint64
	Tokens []int32
}

// Watch calls fn with every later change to the prefix cache, in order, as
// the change is made (so under whatever lock guards the pool: fn must be
// quick and must not use the pool). A nil fn stops watching. Cached gives
// the state to start from.
func (p *Pool) Watch(fn func(Event)) { p.watch = fn }

// Cached returns every block in the prefix cache now, as Stored events,
// parents before their children.
func (p *Pool) Cached() []Event {
	var blocks []int32
	for _, b := range p.index {
		blocks = append(blocks, b)
	}
	// Node ids grow, and a block registers after the block before it.
	slices.SortFunc(blocks, func(a, b int32) int { return cmp.Compare(p.blocks[a].node, p.blocks[b].node) })
	events := make([]Event, len(blocks))
	for i, b := range blocks {
		events[i] = p.blocks[b].stored()
	}
	return events
}

// stored is the Stored event of a registered block.
func (blk *block) stored() Event {
	tokens := make([]int32, len(blk.key.tokens)/4)
	for i := range tokens {
		tokens[i] = int32(binary.LittleEndian.Uint32([]byte(blk.key.tokens[4*i:])))
	}
	return Event{Stored: true, Hash: blk.hash, Namespace: blk.ns, First: blk.first, Parent: blk.parentHash, Tokens: tokens}
}

// ChainHash is the hash of a block of tokens following a block whose hash
// is parent (for a sequence's first block, its namespace): FNV-64a of the
// canonical CBOR encoding of [parent, tokens, null]. That is how llm-d's KV
// indexer (llm-d-kv-cache's TokensToKVBlockKeys) keys blocks, a 64-bit
// content hash chained over the whole prefix, so equal hashes mean equal
// prefixes in one namespace. Tokens are encoded as unsigned, as token ids
// are.
func ChainHash(parent uint64, tokens []int32) uint64 {
	var buf [9]byte
	h := fnv.New64a()
	h.Write([]byte{0x83}) // an array of 3
	h.Write(cborUint(buf[:0], 0, parent))
	h.Write(cborUint(buf[:0], 4, uint64(len(tokens)))) // an array of len(tokens)
	for _, t := range tokens {
		h.Write(cborUint(buf[:0], 0, uint64(uint32(t))))
	}
	h.Write([]byte{0xf6}) // null: no extra keys
	return h.Sum64()
}

// cborUint appends the shortest CBOR head of major type major (0: an
// unsigned integer, 4: an array's length) with argument v, as canonical
// CBOR requires.
func cborUint(b []byte, major byte, v uint64) []byte {
	m := major << 5
	switch {
	case v < 24:
		return append(b, m|byte(v))
	case v <= 0xff:
		return append(b, m|24, byte(v))
	case v <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(v))
	case v <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), v)
}
