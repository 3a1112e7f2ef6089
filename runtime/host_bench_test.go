package runtime

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// BenchmarkHostStep measures what the host spends a dispatch recording
// and submitting a decode step of stories260K on WebGPU
// (backend.Stats.Host): the cost no GPU hides (issue 49). Each step is
// waited for outside the measurement; the figures are the median and the
// least of the steps, the least being what an idle machine would see.
func BenchmarkHostStep(b *testing.B) {
	eng, err := Load(filepath.Join("..", "..", "shared", "models", "stories260K.gguf"), Options{Device: "webgpu", Quant: "f32", Context: 64, NoSelfCheck: true})
	if errors.Is(err, webgpu.ErrNoAdapter) {
		gputest.NoDevice(b, err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	n, be := eng.net, eng.be
	step := backend.Batch{Tokens: []int32{5}, Pos: []int32{3}, Seq: []int32{0}, Tables: [][]int32{{0}}, BlockSize: eng.pool.BlockSize(), Out: []int32{0}}
	run := func() (time.Duration, int) {
		s0 := be.Stats()
		if err := n.forward(step); err != nil {
			b.Fatal(err)
		}
		if _, err := be.Argmax(n.logits, 1); err != nil {
			b.Fatal(err)
		}
		s1 := be.Stats()
		return s1.Host - s0.Host, s1.Dispatches - s0.Dispatches
	}
	run() // compiles the pipelines
	var per []float64
	b.ResetTimer()
	for range b.N {
		h, d := run()
		per = append(per, float64(h)/float64(time.Microsecond)/float64(d))
	}
	slices.Sort(per)
	b.ReportMetric(per[len(per)/2], "host-µs/dispatch")
	b.ReportMetric(per[0], "least-host-µs/dispatch")
}
