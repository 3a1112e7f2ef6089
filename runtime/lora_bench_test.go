package runtime_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// BenchmarkLoRADecode measures decode tokens/s of 8 concurrent greedy
// sequences with no adapter, and with 1 and 4 distinct adapters (of all
// seven projections) shared among them, at ranks 8 and 64, on three
// bases: stories260K (f32; 64 wide, so a rank-64 adapter is as large as
// the layer it adapts) and synthetic SmolLM2-135M and Qwen3-0.6B (int4
// weights, 576 and 1024 wide: realistic shapes, a rank-64 adapter of all
// seven projections having 14.5% and 6.8% of the multiply-adds of the
// base's step, head included). The adapters are F16, as llama.cpp's
// convert_lora_to_gguf writes them by default; adapters4-f32 is 4 of
// them in f32 (which the backends stream twice the bytes of), and on
// WebGPU adapters4-inline is 4 rank-64 ones with every GEMV computing its
// adapters' h itself (Plan.LoRA "inline": no shrink dispatch, the shrink
// repeated in each workgroup), what a GPU's measurement decides
// shrinkInside's threshold by.
// Besides tokens per second it reports tokens per
// CPU-second of the process, which other processes on shared cores
// disturb far less:
//
//	go test ./runtime -run '^$' -bench LoRADecode -benchtime 3x
//	go test ./runtime -run '^$' -bench 'LoRADecode/smollm2-135m/cpu' -benchtime 2x
//
// The synthetic bases are written in F16 to a temporary folder (1.2 GB
// for Qwen3-0.6B).
func BenchmarkLoRADecode(b *testing.B) {
	dir := b.TempDir()
	for _, base := range []struct {
		name, quant string
		steps       int
	}{{"stories260K", "f32", 128}, {"smollm2-135m", "int4", 24}, {"qwen3-0.6b", "int4", 16}} {
		path := ""
		for _, device := range []string{"cpu", "webgpu"} {
			for _, rank := range []int{8, 64} {
				for _, v := range []struct {
					distinct int
					typ      dtype.Type
					inline   bool // WebGPU: every GEMV computes its adapters' h (Plan.LoRA "inline")
				}{{0, dtype.F16, false}, {1, dtype.F16, false}, {4, dtype.F16, false}, {4, dtype.F32, false}, {4, dtype.F16, true}} {
					distinct := v.distinct
					if distinct == 0 && rank == 64 || v.inline && (device != "webgpu" || rank != 64) {
						continue // the same as rank 8's; rank 8 takes the inline shrink on GPUs anyway
					}
					name := fmt.Sprintf("%s/%s/r%d/adapters%d", base.name, device, rank, distinct)
					if v.typ == dtype.F32 {
						name += "-f32"
					}
					var wrap func(backend.Backend) backend.Backend
					if v.inline {
						name += "-inline"
						wrap = withPlan(gpu.Plan{LoRA: "inline"})
					}
					b.Run(name, func(b *testing.B) {
						if path == "" {
							path = benchBase(b, base.name, dir)
						}
						var specs []runtime.AdapterSpec
						for i := range distinct {
							p := benchAdapter(b, path, rank, v.typ, uint64(i))
							specs = append(specs, runtime.AdapterSpec{Name: fmt.Sprint("a", i), Path: p})
						}
						// Random weights: calibrating their int4 codes at load would
						// only add to the wait.
						opts := runtime.Options{Device: device, Quant: base.quant, NoCalibration: true, Adapters: specs, Wrap: wrap}
						e, err := runtime.Load(path, opts)
						if err != nil {
							b.Skip(err)
						}
						defer e.Close()
						const conc = 8
						round := func(steps int) int { // conc sequences at once: the tokens they made
							var wg sync.WaitGroup
							counts := make([]int, conc)
							for i := range conc {
								req := runtime.Request{Prompt: "Once upon a time", MaxTokens: steps, IgnoreEOS: true}
								if distinct > 0 {
									req.Adapters = []runtime.AdapterRef{{Name: fmt.Sprint("a", i%distinct)}}
								}
								wg.Go(func() {
									ids, _, _ := generate(b, e, req)
									counts[i] = len(ids)
								})
							}
							wg.Wait()
							n := 0
							for _, c := range counts {
								n += c
							}
							return n
						}
						round(min(base.steps, 16)) // compiles the kernels' variants (prompt, decode, chains), outside the timing
						var tokens int
						var elapsed, cpu time.Duration
						for b.Loop() {
							start, cpu0 := time.Now(), gputest.CPUTime()
							tokens += round(base.steps)
							elapsed += time.Since(start)
							cpu += gputest.CPUTime() - cpu0
						}
						b.ReportMetric(float64(tokens)/elapsed.Seconds(), "tok/s")
						if cpu > 0 {
							b.ReportMetric(float64(tokens)/cpu.Seconds(), "tok/cpu-s")
						}
					})
				}
			}
		}
	}
}

// benchBase is the base model of BenchmarkLoRADecode: the real
// stories260K, or a synthetic shape written once to a temporary file.
func benchBase(b *testing.B, name, dir string) string {
	if name == "stories260K" {
		return sharedFile(b, "stories260K.gguf")
	}
	s, err := synth.Lookup(name)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, name+".gguf")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := synth.Write(f, s, dtype.F16, 11); err != nil {
		b.Fatal(err)
	}
	return path
}

// benchAdapter writes a random adapter for the model at path, its tensors
// of type typ.
func benchAdapter(b *testing.B, path string, rank int, typ dtype.Type, seed uint64) string {
	b.Helper()
	m, err := models.Open(path, models.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	a, err := synth.LoRA(m.Config, rank, nil, seed)
	if err != nil {
		b.Fatal(err)
	}
	a.Type = typ
	out := filepath.Join(b.TempDir(), "adapter.gguf")
	if err := lora.WriteGGUF(out, a, m.Config.Arch); err != nil {
		b.Fatal(err)
	}
	return out
}
