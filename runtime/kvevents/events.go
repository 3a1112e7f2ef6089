// Package kvevents publishes an engine's prefix-cache events the way vLLM
// publishes its KV events, so that routers built for vLLM (llm-d's
// precise prefix-cache scorer, Dynamo's KV router) can send each prompt to
// the replica that holds its prefix: batches of BlockStored, BlockRemoved
// and AllBlocksCleared events, encoded with msgpack as vLLM's msgspec
// structs encode, sent on a ZeroMQ PUB socket as (topic, sequence number,
// payload), with a ROUTER socket that replays buffered batches.
//
// The wire format is vLLM v0.28's (vllm/distributed/kv_events.py): a batch
// is an array [ts, events, data_parallel_rank] (EventBatch is array_like);
// each event is a map whose "type" key names it and whose other keys are
// its fields (KVCacheEvent has been map-encoded since vLLM PR 42892; older
// consumers expected arrays). Block hashes are unsigned 64-bit integers,
// as vLLM sends them by default, opaque to consumers (llm-d's indexer
// recomputes its own keys from the token ids) but equal exactly for equal
// content: the model's name, the adapter's and every token of the prefix.
package kvevents

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"

	"github.com/vmihailenco/msgpack/v5"
)

// MediumGPU is the medium of blocks in the engine's own KV cache (vLLM's
// MEDIUM_GPU), whatever the device: the tier llm-d's indexer scores as
// the engine's.
const MediumGPU = "GPU"

// Event is one KV event: exactly one of Stored, Removed and Cleared is set.
type Event struct {
	Stored  *BlockStored
	Removed *BlockRemoved
	Cleared bool // AllBlocksCleared: the whole cache is gone
}

// BlockStored is full blocks entering the cache, each following the one
// before it, the first following ParentHash (nil: a prompt's first block).
type BlockStored struct {
	BlockHashes []uint64
	ParentHash  *uint64
	TokenIDs    []int32 // BlockSize of them per block
	BlockSize   int
	LoRAID      *uint64 // the adapter's id (vLLM deprecates it for LoRAName)
	Medium      string
	LoRAName    *string // the adapter whose sequence computed the blocks
}

// BlockRemoved is blocks leaving the cache.
type BlockRemoved struct {
	BlockHashes []uint64
	Medium      string
}

// Batch is what one message carries: the events of a moment, in order.
type Batch struct {
	TS     float64 // seconds since the epoch
	Events []Event
}

// Encode writes the batch as vLLM's msgspec encoder writes a KVEventBatch
// whose data_parallel_rank its publisher has set to 0: integers in their
// shortest form, floats as float64, an event's keys in its declaration
// order after "type", fields without defaults present even when nil.
func (b Batch) Encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	w := &writer{enc: enc}
	w.arrayLen(3)
	w.do(enc.EncodeFloat64(b.TS))
	w.arrayLen(len(b.Events))
	for _, ev := range b.Events {
		switch {
		case ev.Stored != nil:
			s := ev.Stored
			w.mapLen(8)
			w.key("type", "BlockStored")
			w.str("block_hashes")
			w.uints(s.BlockHashes)
			w.str("parent_block_hash")
			w.optUint(s.ParentHash)
			w.str("token_ids")
			w.arrayLen(len(s.TokenIDs))
			for _, t := range s.TokenIDs {
				w.do(enc.EncodeInt(int64(t)))
			}
			w.str("block_size")
			w.do(enc.EncodeInt(int64(s.BlockSize)))
			w.str("lora_id")
			w.optUint(s.LoRAID)
			w.key("medium", s.Medium)
			w.str("lora_name")
			if s.LoRAName == nil {
				w.do(enc.EncodeNil())
			} else {
				w.str(*s.LoRAName)
			}
		case ev.Removed != nil:
			w.mapLen(3)
			w.key("type", "BlockRemoved")
			w.str("block_hashes")
			w.uints(ev.Removed.BlockHashes)
			w.key("medium", ev.Removed.Medium)
		case ev.Cleared:
			w.mapLen(1)
			w.key("type", "AllBlocksCleared")
		default:
			return nil, fmt.Errorf("kvevents: an event with nothing set")
		}
	}
	w.do(enc.EncodeInt(0)) // data_parallel_rank
	if w.err != nil {
		return nil, fmt.Errorf("kvevents: encode a batch: %w", w.err)
	}
	return buf.Bytes(), nil
}

// writer keeps the first error of a run of encoder calls.
type writer struct {
	enc *msgpack.Encoder
	err error
}

func (w *writer) do(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *writer) arrayLen(n int) { w.do(w.enc.EncodeArrayLen(n)) }
func (w *writer) mapLen(n int)   { w.do(w.enc.EncodeMapLen(n)) }
func (w *writer) str(s string)   { w.do(w.enc.EncodeString(s)) }
func (w *writer) key(k, v string) {
	w.str(k)
	w.str(v)
}

func (w *writer) uints(v []uint64) {
	w.arrayLen(len(v))
	for _, x := range v {
		w.do(w.enc.EncodeUint(x))
	}
}

func (w *writer) optUint(v *uint64) {
	if v == nil {
		w.do(w.enc.EncodeNil())
		return
	}
	w.do(w.enc.EncodeUint(*v))
}

// rootHash names a block chain's origin: the served model's name and the
// adapter's ("" for the base model). Blocks are published under
// blockHash(root, the cache's chain hash), so that replicas serving the
// same model publish the same hash for the same prefix (and different
// models, or adapters, different ones), whatever ids the engine gave its
// adapters.
func rootHash(model, adapter string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(adapter))
	return h.Sum64()
}

// blockHash is a published block hash: FNV-64a of root and the cache's
// chain hash, little-endian.
func blockHash(root, chain uint64) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], root)
	binary.LittleEndian.PutUint64(b[8:], chain)
	h := fnv.New64a()
	h.Write(b[:])
	return h.Sum64()
}
