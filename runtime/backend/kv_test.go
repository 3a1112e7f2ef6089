package backend_test

import (
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
)

func TestParseKVType(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want backend.KVType
		err  bool
	}{
		{"", backend.KVF32, false}, {"f32", backend.KVF32, false}, {"F16", backend.KVF16, false},
		{"int8", backend.KVInt8, false}, {"q8_0", 0, true}, {"int4", 0, true},
	} {
		got, err := backend.ParseKVType(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseKVType(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// TestKVBytes: a head's record is its values padded to 4, and for int8
// the 4-byte scale; a cache is keys and values of every record.
func TestKVBytes(t *testing.T) {
	for _, tc := range []struct {
		t        backend.KVType
		hd       int
		want     int64
		shapeAll int64 // 2 layers × 3 blocks × 5 slots × 2 heads, keys and values
	}{
		{backend.KVF32, 64, 256, 2 * 2 * 3 * 5 * 2 * 256},
		{backend.KVF16, 64, 128, 2 * 2 * 3 * 5 * 2 * 128},
		{backend.KVInt8, 64, 68, 2 * 2 * 3 * 5 * 2 * 68},
		{backend.KVInt8, 8, 12, 2 * 2 * 3 * 5 * 2 * 12},
		{backend.KVInt8, 13, 20, 2 * 2 * 3 * 5 * 2 * 20},
		{backend.KVF16, 6, 16, 2 * 2 * 3 * 5 * 2 * 16},
		{backend.KVF32, 6, 32, 2 * 2 * 3 * 5 * 2 * 32},
	} {
		if got := tc.t.HeadBytes(tc.hd); got != tc.want {
			t.Errorf("%v head of %d: %d bytes, want %d", tc.t, tc.hd, got, tc.want)
		}
		s := backend.KVShape{Layers: 2, Blocks: 3, BlockSize: 5, Heads: 2, HeadDim: tc.hd, Type: tc.t}
		if got := s.Bytes(); got != tc.shapeAll || s.Check() != nil {
			t.Errorf("%+v: %d bytes (want %d), check %v", s, got, tc.shapeAll, s.Check())
		}
	}
	if err := (backend.KVShape{Layers: 1, Blocks: 1, BlockSize: 1, Heads: 1, HeadDim: 0}).Check(); err == nil {
		t.Error("a head dim of 0 passes Check")
	}
	if err := (backend.KVShape{Layers: 1, Blocks: 1, BlockSize: 1, Heads: 1, HeadDim: 4, Type: 7}).Check(); err == nil {
		t.Error("an unknown type passes Check")
	}
	// No layers: the pool's cache beside windowed caches that hold every
	// layer (a model whose layers all slide), never a windowed one.
	for _, tc := range []struct {
		layers   int
		windowed bool
		ok       bool
	}{{0, false, true}, {0, true, false}, {-1, false, false}, {1, true, true}} {
		s := backend.KVShape{Layers: tc.layers, Blocks: 1, BlockSize: 1, Heads: 1, HeadDim: 4, Windowed: tc.windowed}
		if err := s.Check(); (err == nil) != tc.ok {
			t.Errorf("%+v: check %v, want ok %v", s, err, tc.ok)
		}
	}
}
