package runtime_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
)

// BenchmarkLoRADecode measures decode tokens/s of 8 concurrent greedy
// sequences on stories260K with no adapter, and with 1 and 4 distinct
// adapters (of all seven projections) shared among them, at ranks 8 and 64:
//
//	go test ./runtime -run '^$' -bench LoRADecode -benchtime 3x
func BenchmarkLoRADecode(b *testing.B) {
	for _, device := range []string{"cpu", "webgpu"} {
		for _, rank := range []int{8, 64} {
			for _, distinct := range []int{0, 1, 4} {
				if distinct == 0 && rank == 64 {
					continue // the same as rank 8's
				}
				b.Run(fmt.Sprintf("%s/r%d/adapters%d", device, rank, distinct), func(b *testing.B) {
					path := sharedFile(b, "stories260K.gguf")
					var specs []runtime.AdapterSpec
					for i := range distinct {
						p := benchAdapter(b, path, rank, uint64(i))
						specs = append(specs, runtime.AdapterSpec{Name: fmt.Sprint("a", i), Path: p})
					}
					opts := runtime.Options{Device: device, Quant: "f32", Adapters: specs}
					e, err := runtime.Load(path, opts)
					if err != nil {
						b.Skip(err)
					}
					defer e.Close()
					const conc, steps = 8, 128
					var tokens int
					var elapsed time.Duration
					for b.Loop() {
						start := time.Now()
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
						elapsed += time.Since(start)
						for _, c := range counts {
							tokens += c
						}
					}
					b.ReportMetric(float64(tokens)/elapsed.Seconds(), "tok/s")
				})
			}
		}
	}
}

// benchAdapter writes a random adapter for the model at path.
func benchAdapter(b *testing.B, path string, rank int, seed uint64) string {
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
	out := filepath.Join(b.TempDir(), "adapter.gguf")
	if err := lora.WriteGGUF(out, a, m.Config.Arch); err != nil {
		b.Fatal(err)
	}
	return out
}
