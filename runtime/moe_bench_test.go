package runtime_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
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
	engines := map[string]*runtime.Engine{}
	for _, shape := range []string{"granite-3.1-1b-a400m-dense", "granite-3.1-1b-a400m"} {
		engines[shape] = benchEngine(b, shape, nil)
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

// benchEngine loads the synthetic shape (an f16 file, written to a
// temporary folder or kept in TESSERA_BENCH_DIR) with int4 weights on
// WebGPU, its backend under plan where not nil.
func benchEngine(b *testing.B, shape string, plan *gpu.Plan) *runtime.Engine {
	b.Helper()
	dir := os.Getenv("TESSERA_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
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
	opts := runtime.Options{Device: "webgpu", Quant: "int4", Context: 256}
	if plan != nil {
		opts.Wrap = func(be backend.Backend) backend.Backend {
			be.(*gpu.Backend).SetPlan(*plan)
			return be
		}
	}
	e, err := runtime.Load(path, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

// BenchmarkMoEPrefill: prompt steps of a synthetic granite-3.1-1b-a400m
// (int4, WebGPU) with the expert products as GEMVs (blocks of up to 8
// pairs of one expert) and as the grouped GEMM (tiles of up to 64), two
// engines loaded side by side and run in the order gemv, gemm, gemm, gemv
// each iteration. Reported: prompt tokens per second of each (one prompt
// of 64 tokens: one step of 512 pairs over 32 experts) and gemm's time
// over gemv's.
//
//	TESSERA_BENCH_DIR=/tmp/bench go test ./runtime -run '^$' -bench MoEPrefill -benchtime 2x -timeout 30m
func BenchmarkMoEPrefill(b *testing.B) {
	const shape = "granite-3.1-1b-a400m"
	engines := map[string]*runtime.Engine{}
	for _, k := range []string{"gemv", "gemm"} {
		engines[k] = benchEngine(b, shape, &gpu.Plan{Experts: k})
	}
	prompt := make([]int32, 64)
	for i := range prompt {
		prompt[i] = int32(100 + 7*i)
	}
	req := runtime.Request{Tokens: prompt, MaxTokens: 1, IgnoreEOS: true}
	prefill := map[string]time.Duration{}
	tokens := map[string]int{}
	b.ResetTimer()
	for b.Loop() {
		for _, k := range []string{"gemv", "gemm", "gemm", "gemv"} {
			_, _, st := generate(b, engines[k], req)
			prefill[k] += st.Prefill
			tokens[k] += st.PromptTokens
		}
	}
	for _, k := range []string{"gemv", "gemm"} {
		b.ReportMetric(float64(tokens[k])/prefill[k].Seconds(), k+"_prompt_tok/s")
	}
	b.ReportMetric(prefill["gemm"].Seconds()/prefill["gemv"].Seconds(), "time_ratio")
}
