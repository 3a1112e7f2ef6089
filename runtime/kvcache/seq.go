package kvcache

import "fmt"

// Seq is one sequence's block table. The tokens [0, Len()) have their K/V
// written; Reserve extends the table ahead of writes and Commit advances Len
// over them. A Seq holds pool blocks until Release (or Truncate(0)); one that
// is dropped without it leaks them.
type Seq struct {
	pool   *Pool
	table  []int32  // physical block of each logical block; covers reserved tokens
	tokens []int32  // committed tokens, kept to key blocks as they fill
	nodes  []uint64 // prefix-cache identity of each full block: the parent key of the next
	hashes []uint64 // content hash of each full block (ChainHash, from root), for Events
	cap    int      // tokens reserved: Len() <= cap <= len(table)*BlockSize()
	root   uint64   // the parent key of the first block: the prefix cache's namespace
}

// NewSeq returns an empty sequence drawing from p.
func (p *Pool) NewSeq() *Seq { return &Seq{pool: p} }

// NewSeqIn returns an empty sequence whose blocks are shared only with
// sequences of the same namespace: the K/V of a prefix depend on more than
// its tokens when the model runs with a LoRA adapter. Namespace 0 is
// NewSeq's; others must have the top bit set, so that they never equal a
// block's node.
func (p *Pool) NewSeqIn(namespace uint64) *Seq {
	if namespace != 0 && namespace>>63 == 0 {
		panic("kvcache: a namespace needs its top bit set")
	}
	return &Seq{pool: p, root: namespace}
}

// Len is the number of committed tokens.
func (s *Seq) Len() int { return len(s.tokens) }

// Table is the physical block of each logical block, including blocks
// reserved ahead of Len. It aliases the sequence's state: read it, don't keep it
// across calls that change the sequence.
func (s *Seq) Table() []int32 { return s.table[:len(s.table):len(s.table)] }

// Slot is the physical slot of position pos, which must be committed or
// reserved: block*BlockSize + pos%BlockSize.
func (s *Seq) Slot(pos int) int32 {
	bs := s.pool.blockSize
	if pos < 0 || pos >= len(s.table)*bs {
		panic(fmt.Sprintf("kvcache: slot of position %d outside the %d reserved", pos, len(s.table)*bs))
	}
	return s.table[pos/bs]*int32(bs) + int32(pos%bs)
}

// Share points an empty sequence at the cached blocks of the longest prefix
// of tokens found in the prefix cache and returns how many leading tokens
// need no computing. Only whole blocks are shared, and never the block
// holding the last token: the engine must compute that one to get logits.
// Every token passed counts as a lookup in Stats.
func (s *Seq) Share(tokens []int32) int {
	if len(s.table) != 0 {
		panic("kvcache: Share on a non-empty Seq")
	}
	p, bs := s.pool, s.pool.blockSize
	parent := s.root
	// Block i may be shared while the last token lies beyond it.
	for i := 0; (i+1)*bs < len(tokens); i++ {
		b, ok := p.index[makeKey(parent, tokens[i*bs:(i+1)*bs])]
		if !ok {
			break
		}
		p.retain(b)
		parent = p.blocks[b].node
		s.table = append(s.table, b)
		s.nodes = append(s.nodes, parent)
		s.hashes = append(s.hashes, p.blocks[b].hash)
	}
	n := len(s.table) * bs
	s.tokens = append(s.tokens, tokens[:n]...)
	s.cap = n
	p.lookups += len(tokens)
	p.hits += n
	if n > 0 {
		p.live[s] = struct{}{}
	}
	return n
}

// reservePlan is what Reserve would do; computing it changes nothing, which
// is what makes Reserve atomic and CanReserve cheap.
type reservePlan struct {
	grow  int  // blocks to append to the table
	cow   bool // replace the write block by a private copy
	adopt bool // unregister the write block in place instead of copying it
	need  int  // blocks to allocate
}

func (s *Seq) plan(n int) reservePlan {
	if n < 0 {
		panic(fmt.Sprintf("kvcache: Reserve(%d)", n))
	}
	if n == 0 {
		return reservePlan{}
	}
	p, bs := s.pool, s.pool.blockSize
	pl := reservePlan{grow: max(0, p.BlocksNeeded(len(s.tokens)+n)-len(s.table))}
	if len(s.tokens)%bs != 0 {
		// The next token lands in a block that already holds tokens. After
		// a Truncate into a full block it may be another sequence's too, or
		// still in the prefix cache as that full block: writing would
		// corrupt either.
		blk := &p.blocks[s.table[len(s.tokens)/bs]]
		switch {
		case blk.ref > 1:
			pl.cow = true
		case blk.node != 0 && p.available() > pl.grow:
			// Sole user: copying keeps the cached full block for later
			// prompts, as long as that costs no ErrFull.
			pl.cow = true
		case blk.node != 0:
			pl.adopt = true
		}
	}
	pl.need = pl.grow
	if pl.cow {
		pl.need++
	}
	return pl
}

// CanReserve reports whether Reserve(n) would succeed, without allocating.
func (s *Seq) CanReserve(n int) bool { return s.plan(n).need <= s.pool.available() }

// Reserve makes room for n more tokens after Len(); reserving again before
// Commit does not add up (room is always counted from Len). It allocates
// blocks as needed, evicting cached ones when the free list is empty, and if
// the block the next token goes into is shared or registered in the prefix
// cache, it replaces it by a private copy and returns the copy for the
// engine to perform. (When that block is registered but used by nobody
// else and the pool has no block to spare, it is taken out of the cache
// instead of copied.) On ErrFull nothing changes.
func (s *Seq) Reserve(n int) ([]Copy, error) {
	pl := s.plan(n)
	p, bs := s.pool, s.pool.blockSize
	if pl.need > p.available() {
		return nil, ErrFull
	}
	var copies []Copy
	if i := len(s.tokens) / bs; pl.cow {
		// Allocate before releasing: the source must not be evicted and
		// handed back as its own copy.
		src, dst := s.table[i], p.alloc()
		s.table[i] = dst
		p.release(src)
		copies = []Copy{{Src: src, Dst: dst}}
	} else if pl.adopt {
		p.unregister(s.table[i])
	}
	for range pl.grow {
		s.table = append(s.table, p.alloc())
	}
	s.cap = max(s.cap, len(s.tokens)+n)
	if len(s.table) > 0 {
		p.live[s] = struct{}{}
	}
	return copies, nil
}

// Commit records that tokens, which were reserved, now have their K/V
// written. Each block this fills is registered in the prefix cache under its
// exact prefix so later sequences can Share it; if an equal block is
// already registered, that one stays the cached copy and this one private.
func (s *Seq) Commit(tokens []int32) {
	if len(s.tokens)+len(tokens) > s.cap {
		panic(fmt.Sprintf("kvcache: Commit of %d tokens at %d exceeds the %d reserved", len(tokens), len(s.tokens), s.cap))
	}
	p, bs := s.pool, s.pool.blockSize
	s.tokens = append(s.tokens, tokens...)
	for i := len(s.nodes); (i+1)*bs <= len(s.tokens); i++ {
		parent, parentHash := s.root, s.root
		if i > 0 {
			parent, parentHash = s.nodes[i-1], s.hashes[i-1]
		}
		tokens := s.tokens[i*bs : (i+1)*bs]
		h := ChainHash(parentHash, tokens)
		s.nodes = append(s.nodes, p.register(s.table[i], parent, tokens, h, s.root, parentHash, i == 0))
		s.hashes = append(s.hashes, h)
	}
}

// Truncate rolls back to n <= Len() committed tokens and drops any
// reservation. Blocks past n are released, last first so that the cache
// evicts a prefix's tail before its head. If the block now holding the last
// token was a registered full block, it leaves the cache when this sequence
// is its only user, so it can be written into again; with other users it
// stays cached and the next Reserve copies it.
func (s *Seq) Truncate(n int) {
	if n < 0 || n > len(s.tokens) {
		panic(fmt.Sprintf("kvcache: Truncate(%d) of a sequence of %d tokens", n, len(s.tokens)))
	}
	p, bs := s.pool, s.pool.blockSize
	keep := p.BlocksNeeded(n)
	for i := len(s.table) - 1; i >= keep; i-- {
		p.release(s.table[i])
	}
	s.table, s.tokens, s.nodes, s.hashes, s.cap = s.table[:keep], s.tokens[:n], s.nodes[:n/bs], s.hashes[:n/bs], n
	if n%bs != 0 {
		if b := s.table[keep-1]; p.blocks[b].node != 0 && p.blocks[b].ref == 1 {
			p.unregister(b)
		}
	}
	if keep == 0 {
		delete(p.live, s)
	}
}

// Release frees everything the sequence holds; it is empty afterwards and
// may be reused.
func (s *Seq) Release() { s.Truncate(0) }
