package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// TestDecodeStepAllocations: a steady decode step on WebGPU allocates
// nothing a dispatch (issue 49): everything a dispatch binds is built
// once and cached, so the Go allocations of a step do not grow with the
// model's layers. Two depths of the same synthetic model are compared;
// what a step allocates whatever its depth (the step's buffers, the
// binding's submission) is allowed.
func TestDecodeStepAllocations(t *testing.T) {
	allocs := map[int]float64{}
	dispatches := map[int]int{}
	for _, layers := range []int{2, 14} {
		s, err := synth.Lookup("tiny")
		if err != nil {
			t.Fatal(err)
		}
		s.Config.Layers = layers
		path := filepath.Join(t.TempDir(), "tiny.gguf")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := synth.Write(f, s, dtype.F32, 3); err != nil {
			t.Fatal(err)
		}
		f.Close()
		eng, err := Load(path, Options{Device: "webgpu", Context: 64, NoSelfCheck: true})
		if errors.Is(err, webgpu.ErrNoAdapter) {
			gputest.NoDevice(t, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		n, be := eng.net, eng.be
		step := backend.Batch{Tokens: []int32{5}, Pos: []int32{3}, Seq: []int32{0}, Tables: [][]int32{{0}}, BlockSize: eng.pool.BlockSize(), Out: []int32{0}}
		run := func() {
			if err := n.forward(step); err != nil {
				t.Fatal(err)
			}
			if _, err := be.Argmax(n.logits, 1); err != nil {
				t.Fatal(err)
			}
		}
		run() // builds the pipelines and bind groups
		d0 := be.Stats().Dispatches
		run()
		dispatches[layers] = be.Stats().Dispatches - d0
		allocs[layers] = testing.AllocsPerRun(30, run)
		eng.Close()
		t.Logf("%d layers: %d dispatches, %.0f allocations a step", layers, dispatches[layers], allocs[layers])
	}
	perDispatch := (allocs[14] - allocs[2]) / float64(dispatches[14]-dispatches[2])
	if dispatches[14] <= dispatches[2] {
		t.Fatalf("14 layers ran %d dispatches a step, 2 layers %d", dispatches[14], dispatches[2])
	}
	if perDispatch > 0.1 {
		t.Errorf("a decode step allocates %.2f times a dispatch (%.0f at %d dispatches, %.0f at %d); want none",
			perDispatch, allocs[2], dispatches[2], allocs[14], dispatches[14])
	}
}
