package runtime

import (
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// BenchmarkHostStep measures what the host spends a dispatch recording
// and submitting a decode step on WebGPU (backend.Stats.Host): the cost
// no GPU hides (issue 49). The model is stories260K, or the file that
// TESSERA_HOST_MODEL names (a synthetic smollm2-135m, say) stored as
// TESSERA_HOST_QUANT says (f32 unless set). Each step is waited for
// outside the measurement; the figures are the median and the least of
// the steps, the least being what an idle machine would see, and the mean
// part of the host's time spent in the WebGPU implementation (the rest is
// Go's recording). On Linux the benchmark also reports the thread's CPU
// time a dispatch for the whole step (recording, submitting and the
// read-back of the token: the goroutine is locked to its thread), which
// other processes' load does not inflate as it does wall time.
func BenchmarkHostStep(b *testing.B) {
	path := os.Getenv("TESSERA_HOST_MODEL")
	if path == "" {
		path = filepath.Join("..", "..", "shared", "models", "stories260K.gguf")
	}
	quant := os.Getenv("TESSERA_HOST_QUANT")
	if quant == "" {
		quant = "f32"
	}
	eng, err := Load(path, Options{Device: "webgpu", Quant: quant, Context: 64, NoSelfCheck: true})
	if errors.Is(err, webgpu.ErrNoAdapter) {
		gputest.NoDevice(b, err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	n, be := eng.net, eng.be
	step := backend.Batch{Tokens: []int32{5}, Pos: []int32{3}, Seq: []int32{0}, Tables: [][]int32{{0}}, BlockSize: eng.pool.BlockSize(), Out: []int32{0}}
	var platform time.Duration // the part of the measured steps' host time in WebGPU
	run := func() (time.Duration, time.Duration, int) {
		s0, c0 := be.Stats(), threadCPU()
		if err := n.forward(step); err != nil {
			b.Fatal(err)
		}
		if _, err := be.Argmax(n.logits, 1); err != nil {
			b.Fatal(err)
		}
		s1, c1 := be.Stats(), threadCPU()
		platform += s1.HostPlatform - s0.HostPlatform
		return s1.Host - s0.Host, c1 - c0, s1.Dispatches - s0.Dispatches
	}
	run() // compiles the pipelines
	var host, cpu []float64
	var dispatches int
	platform = 0
	b.ResetTimer()
	for range b.N {
		h, c, d := run()
		dispatches += d
		host = append(host, float64(h)/float64(time.Microsecond)/float64(d))
		cpu = append(cpu, float64(c)/float64(time.Microsecond)/float64(d))
	}
	slices.Sort(host)
	slices.Sort(cpu)
	b.ReportMetric(host[len(host)/2], "host-µs/dispatch")
	b.ReportMetric(host[0], "least-host-µs/dispatch")
	b.ReportMetric(float64(platform)/float64(time.Microsecond)/float64(dispatches), "webgpu-µs/dispatch")
	if cpu[len(cpu)-1] > 0 {
		b.ReportMetric(cpu[len(cpu)/2], "step-cpu-µs/dispatch")
		b.ReportMetric(cpu[0], "least-step-cpu-µs/dispatch")
	}
}
