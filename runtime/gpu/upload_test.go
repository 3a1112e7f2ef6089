package gpu_test

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// writeCounter counts the device's Writes: each costs wgpu a staging
// buffer of its own.
type writeCounter struct {
	webgpu.Device
	writes int
}

func (d *writeCounter) Write(b webgpu.Buffer, offset int64, data []byte) error {
	d.writes++
	return d.Device.Write(b, offset, data)
}

// TestStepWritesOnce checks that a step's small writes (its tokens,
// positions, slots) reach the device in one Write, and a chain's later
// steps' in the same one, while each step still reads its own: a table
// whose row t has its largest value at column next(t) is embedded and
// its argmax taken, step after step and in a chain of three steps, where
// each step embeds the token the step before it kept.
func TestStepWritesOnce(t *testing.T) {
	const vocab = 64
	next := func(tok int32) int32 { return (tok*7 + 3) % vocab }
	dev := &writeCounter{Device: gputest.Open(t)}
	b, err := gpu.NewBackend(dev, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	raw := make([]byte, 4*vocab*vocab)
	for r := range int32(vocab) {
		binary.LittleEndian.PutUint32(raw[4*(r*vocab+next(r)):], math.Float32bits(1))
	}
	table, err := b.Upload(models.NewTensor("table", []int{vocab, vocab}, dtype.F32, func() ([]byte, error) { return raw, nil }))
	if err != nil {
		t.Fatal(err)
	}
	x, err := b.NewTensor(4, vocab)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(toks []int32, pos int32) backend.Batch {
		return backend.Batch{Tokens: toks, Pos: []int32{pos, pos + 3}, Seq: []int32{0, 1}, Tables: [][]int32{{0}, {1}}, BlockSize: 16, Out: []int32{0, 1}}
	}

	toks := []int32{5, 9}
	for step := range int32(4) {
		dev.writes = 0
		if err := b.Begin(batch(toks, step)); err != nil {
			t.Fatal(err)
		}
		b.Embed(x, table)
		ids, err := b.Argmax(x, 2)
		if err != nil {
			t.Fatal(err)
		}
		if want := []int32{next(toks[0]), next(toks[1])}; !slices.Equal(ids, want) {
			t.Fatalf("step %d of tokens %v: argmax %v, want %v", step, toks, ids, want)
		}
		if step > 0 && dev.writes != 1 { // the first step also writes its calls' parameters
			t.Errorf("step %d wrote the device %d times, want once", step, dev.writes)
		}
		toks = ids
	}

	dev.writes = 0
	want := []int32{}
	for step := range int32(3) {
		begin := b.BeginChained
		if step == 0 {
			begin = b.Begin
		}
		if err := begin(batch(toks, 10+step)); err != nil {
			t.Fatal(err)
		}
		b.Embed(x, table)
		b.Keep(x, 2)
		toks = []int32{next(toks[0]), next(toks[1])}
		want = append(want, toks...)
	}
	kept, err := b.Kept()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kept, want) {
		t.Errorf("a chain of 3 steps kept %v, want %v", kept, want)
	}
	if dev.writes != 1 {
		t.Errorf("a chain of 3 steps wrote the device %d times, want once", dev.writes)
	}
	// The host's time was measured, and the platform's part is within it.
	if st := b.Stats(); st.Host <= 0 || st.HostPlatform <= 0 || st.HostPlatform > st.Host {
		t.Errorf("host time %v, of it in the platform %v", st.Host, st.HostPlatform)
	}
}
