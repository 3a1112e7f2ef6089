package kvevents

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// TestEncodeAsMsgspec: a batch encodes byte for byte as vLLM v0.28's
// msgspec encoder writes its KVEventBatch (array-like batch with the
// publisher's data_parallel_rank 0, each event a map tagged by "type",
// keys in declaration order, positive integers in their shortest unsigned
// form, the float as float64, nil fields without defaults present). The
// expected bytes are written from the MessagePack spec, not by the
// encoder under test.
func TestEncodeAsMsgspec(t *testing.T) {
	parent := uint64(7)
	name, id := "sql", uint64(3)
	for _, tc := range []struct {
		name  string
		batch Batch
		want  string
	}{
		{"cleared", Batch{TS: 1.5, Events: []Event{{Cleared: true}}},
			"93 cb3ff8000000000000 91 81 a474797065 b0416c6c426c6f636b73436c6561726564 00"},
		{"stored, first block", Batch{TS: 1.5, Events: []Event{{Stored: &BlockStored{BlockHashes: []uint64{1, 300}, TokenIDs: []int32{5, 200},
			BlockSize: 1, Medium: MediumGPU}}}},
			"93 cb3ff8000000000000 91 88 a474797065 ab426c6f636b53746f726564" +
				" ac626c6f636b5f686173686573 92 01 cd012c" +
				" b1706172656e745f626c6f636b5f68617368 c0" +
				" a9746f6b656e5f696473 92 05 ccc8" +
				" aa626c6f636b5f73697a65 01" +
				" a76c6f72615f6964 c0" +
				" a66d656469756d a3475055" +
				" a96c6f72615f6e616d65 c0 00"},
		{"stored after a parent, with an adapter", Batch{TS: 0.25, Events: []Event{{Stored: &BlockStored{BlockHashes: []uint64{70000}, ParentHash: &parent,
			TokenIDs: []int32{128000}, BlockSize: 1, LoRAID: &id, Medium: MediumGPU, LoRAName: &name}}}},
			"93 cb3fd0000000000000 91 88 a474797065 ab426c6f636b53746f726564" +
				" ac626c6f636b5f686173686573 91 ce00011170" +
				" b1706172656e745f626c6f636b5f68617368 07" +
				" a9746f6b656e5f696473 91 ce0001f400" +
				" aa626c6f636b5f73697a65 01" +
				" a76c6f72615f6964 03" +
				" a66d656469756d a3475055" +
				" a96c6f72615f6e616d65 a373716c 00"},
		{"removed", Batch{TS: 1.5, Events: []Event{{Removed: &BlockRemoved{BlockHashes: []uint64{^uint64(0)}, Medium: MediumGPU}}}},
			"93 cb3ff8000000000000 91 83 a474797065 ac426c6f636b52656d6f766564" +
				" ac626c6f636b5f686173686573 91 cfffffffffffffffff" +
				" a66d656469756d a3475055 00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.batch.Encode()
			if err != nil {
				t.Fatal(err)
			}
			want, err := hex.DecodeString(strings.ReplaceAll(tc.want, " ", ""))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("encoded\n%x\nwant\n%x", got, want)
			}
		})
	}
	if _, err := (Batch{Events: []Event{{}}}).Encode(); err == nil {
		t.Error("an empty event encoded")
	}
}

// TestOffsetEndpoint: each model's publisher gets its own port, as vLLM's
// data-parallel ranks do.
func TestOffsetEndpoint(t *testing.T) {
	for _, tc := range []struct {
		ep   string
		i    int
		want string
		err  bool
	}{
		{"tcp://*:5557", 0, "tcp://*:5557", false},
		{"tcp://*:5557", 2, "tcp://*:5559", false},
		{"tcp://[::]:5557", 1, "tcp://[::]:5558", false},
		{"ipc:///tmp/kv", 1, "ipc:///tmp/kv_1", false},
		{"tcp://*:0", 1, "", true},
	} {
		got, err := OffsetEndpoint(tc.ep, tc.i)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("OffsetEndpoint(%q, %d) = %q, %v; want %q", tc.ep, tc.i, got, err, tc.want)
		}
	}
}
