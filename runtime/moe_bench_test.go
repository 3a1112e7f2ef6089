package runtime_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// BenchmarkMoEDecode is issue 23's measurement: decode of a synthetic
// granite-3.1-1b-a400m (32 experts of 512, 8 a token) against
// granite-3.1-1b-a400m-dense (the same attention and one FFN of 8·512),
// both int4 on WebGPU, loaded side by side and decoded in the order
// dense, experts, experts, dense each iteration, so that both meet the
// same load of shared cores. Reported: tokens per second and per CPU-second
// of the process (lavapipe's threads are the process's, and other
// processes disturb CPU time far less than wall time) for each, and the
// experts' time per token over the dense model's. The two models are 3.5 GB
// of f16 files, written to a temporary folder (TESSERA_BENCH_DIR keeps
// them between runs):
//
//	go test ./runtime -run '^$' -bench MoEDecode -benchtime 2x -timeout 30m
func BenchmarkMoEDecode(b *testing.B) {
	dir := os.Getenv("TESSERA_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	engines := map[string]*runtime.Engine{}
	for _, shape := range []string{"granite-3.1-1b-a400m-dense", "granite-3.1-1b-a400m"} {
		path := filepath.Join(dir, shape+".gguf")
		if _, err := os.Stat(path); err != nil {
			s, err := synth.Lookup(shape)
			if err != nil {
				b.Fatal(err)
			}
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := synth.Write(f, s, dtype.F16, 1); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
		e, err := runtime.Load(path, runtime.Options{Device: "webgpu", Quant: "int4", Context: 256})
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close()
		engines[shape] = e
	}
	const steps = 24
	req := runtime.Request{Prompt: "abc", MaxTokens: steps, IgnoreEOS: true}
	wall, cpu := map[string]time.Duration{}, map[string]time.Duration{}
	tokens := map[string]int{}
	b.ResetTimer()
	for b.Loop() {
		for _, shape := range []string{"granite-3.1-1b-a400m-dense", "granite-3.1-1b-a400m", "granite-3.1-1b-a400m", "granite-3.1-1b-a400m-dense"} {
			c0, w0 := gputest.CPUTime(), time.Now()
			_, _, st := generate(b, engines[shape], req)
			wall[shape] += time.Since(w0)
			cpu[shape] += gputest.CPUTime() - c0
			tokens[shape] += st.Generated
		}
	}
	for shape, name := range map[string]string{"granite-3.1-1b-a400m-dense": "dense", "granite-3.1-1b-a400m": "experts"} {
		b.ReportMetric(float64(tokens[shape])/wall[shape].Seconds(), name+"_tok/s")
		b.ReportMetric(float64(tokens[shape])/cpu[shape].Seconds(), name+"_tok/cpu-s")
	}
	moe, dense := "granite-3.1-1b-a400m", "granite-3.1-1b-a400m-dense"
	b.ReportMetric(wall[moe].Seconds()/float64(tokens[moe])/(wall[dense].Seconds()/float64(tokens[dense])), "time_ratio")
	b.ReportMetric(cpu[moe].Seconds()/float64(tokens[moe])/(cpu[dense].Seconds()/float64(tokens[dense])), "cpu_ratio")
}
