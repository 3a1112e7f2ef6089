package cpu

import (
	"math"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/cpu/internal/kernel"
	"github.com/x448/float16"
)

// KV is a paged cache. Its records (a key or a value of one kv head at one
// slot) are ordered by layer, block, kv head and slot within the block:
// record ((l·blocks + b)·heads + h)·blockSize + o holds head h at offset o
// of block b in layer l, so that the positions of a block that attention
// reads for one kv head are consecutive records (one stretch of memory,
// not interleaved with the other heads'), and a block of a layer is
// blockRecords consecutive records for copy on write.
type KV struct {
	shape backend.KVShape
	K, V  KVStore
}

func (c *KV) Layers() int            { return c.shape.Layers }
func (c *KV) Blocks() int            { return c.shape.Blocks }
func (c *KV) BlockSize() int         { return c.shape.BlockSize }
func (c *KV) Shape() backend.KVShape { return c.shape }

// record is the record of kv head h at slot slot of layer l.
func (c *KV) record(l, slot, h int) int {
	bs := c.shape.BlockSize
	return ((l*c.shape.Blocks+slot/bs)*c.shape.Heads+h)*bs + slot%bs
}
func (c *KV) blockRecords() int { return c.shape.BlockSize * c.shape.Heads }

// KVStore holds the keys (or the values) of every record of a cache in
// its type: f32 values, f16 halves, or int8 codes with a scale per record.
// Attention reads it through dot and axpy, which compute on the stored
// values directly (an int8 record's scale multiplies its sum once).
//
// f32 keys shorter than kernel.Block values are stored by tile: the tile
// records of one block and kv head (consecutive records) are kept value by
// value, value i of record r at (r - r%tile)·hd + i·tile + r%tile, so that
// value i of consecutive positions is a row of memory and the scores of a
// run of positions are one kernel.AxpyRows over the query's values (such
// a dot product is DotF32's plain sequential sum either way).
type KVStore struct {
	typ   backend.KVType
	hd    int // values per record
	tile  int // records per tile of f32 keys stored value by value; 0: record by record
	f32   []float32
	f16   []uint16
	i8    []int8
	scale []float32
}

// newKVStore holds records of hd values in type t, in tiles of
// blockSize records where keys is set and tiles serve (see KVStore).
func newKVStore(t backend.KVType, records, hd, blockSize int, keys bool) KVStore {
	s := KVStore{typ: t, hd: hd}
	switch t {
	case backend.KVF16:
		s.f16 = make([]uint16, records*hd)
	case backend.KVInt8:
		s.i8, s.scale = make([]int8, records*hd), make([]float32, records)
	default:
		s.f32 = make([]float32, records*hd)
		if keys && hd < kernel.Block {
			s.tile = blockSize
		}
	}
	return s
}

// bytes is what the store holds.
func (s *KVStore) bytes() int64 {
	return 4*int64(len(s.f32)) + 2*int64(len(s.f16)) + int64(len(s.i8)) + 4*int64(len(s.scale))
}

// put stores x (hd values) as record r.
func (s *KVStore) put(r int, x []float32) {
	at := r * s.hd
	switch s.typ {
	case backend.KVF16:
		for i, v := range x {
			s.f16[at+i] = KVHalf(v)
		}
	case backend.KVInt8:
		s.scale[r] = QuantizeKV8(s.i8[at:at+s.hd], x)
	default:
		if s.tile > 0 {
			at, o := (r-r%s.tile)*s.hd, r%s.tile
			for i, v := range x {
				s.f32[at+i*s.tile+o] = v
			}
			return
		}
		copy(s.f32[at:at+s.hd], x)
	}
}

// copyRecords copies n records from src to dst (copy on write of a
// block: whole tiles).
func (s *KVStore) copyRecords(dst, src, n int) {
	a, b, m := dst*s.hd, src*s.hd, n*s.hd
	switch s.typ {
	case backend.KVF16:
		copy(s.f16[a:a+m], s.f16[b:b+m])
	case backend.KVInt8:
		copy(s.i8[a:a+m], s.i8[b:b+m])
		copy(s.scale[dst:dst+n], s.scale[src:src+n])
	default:
		copy(s.f32[a:a+m], s.f32[b:b+m])
	}
}

// dot is q·(record r).
func (s *KVStore) dot(q []float32, r int) float32 {
	at := r * s.hd
	switch s.typ {
	case backend.KVF16:
		return kernel.DotF16(q, s.f16[at:at+s.hd])
	case backend.KVInt8:
		var sum float32
		for i, c := range s.i8[at : at+s.hd] {
			sum += float32(q[i] * float32(c))
		}
		return s.scale[r] * sum
	}
	if s.tile > 0 { // below kernel.Block values DotF32 is this sum
		at, o := (r-r%s.tile)*s.hd, r%s.tile
		var sum float32
		for i, v := range q[:s.hd] {
			sum += float32(v * s.f32[at+i*s.tile+o])
		}
		return sum
	}
	return Dot(q, s.f32[at:at+s.hd])
}

// axpy adds a·(record r) to out.
func (s *KVStore) axpy(out []float32, a float32, r int) {
	at := r * s.hd
	switch s.typ {
	case backend.KVF16:
		for i, h := range s.f16[at : at+s.hd] {
			out[i] += float32(a * float16.Frombits(h).Float32())
		}
	case backend.KVInt8:
		as := a * s.scale[r]
		for i, c := range s.i8[at : at+s.hd] {
			out[i] += float32(as * float32(c))
		}
	default:
		kernel.Axpy(out, a, s.f32[at:at+s.hd])
	}
}

// QuantizeKV8 sets codes to the int8 codes of x and returns their scale,
// so that x[i] ≈ scale·codes[i]: symmetric, scale = max|x|/127, each code
// x[i]·(127/max|x|) rounded to the nearest (ties to even) and clamped to
// -127..127. A head of zeros has scale 0. It is the twin of kv_put in
// shaders/kv.inc.wgsl.
func QuantizeKV8(codes []int8, x []float32) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	var inv float32
	if amax > 0 {
		inv = 127 / amax
	}
	for i, v := range x {
		codes[i] = int8(max(-127, min(127, math.RoundToEven(float64(v*inv)))))
	}
	return amax / 127
}

// KVHalf is v as an f16 cache holds it: the nearest half (ties to even),
// clamped to the finite range so that a large value does not become Inf.
func KVHalf(v float32) uint16 {
	const top = 65504
	return dtype.HalfBits(max(-top, min(v, top)))
}
