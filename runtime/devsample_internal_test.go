package runtime

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/gpu"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// TestSampleKernelMatchesSampler: the sample and penalize kernels draw the
// CPU sampler's tokens, stream position included, over awkward widths
// (1, a prime, under and over the 256 ranked candidates), ties, masked
// values, flat rows whose draws land past the candidates (a tail, which
// the host then draws as Sample does), and every sampling parameter.
func TestSampleKernelMatchesSampler(t *testing.T) {
	dev := gputest.Open(t)
	be, err := gpu.NewBackend(dev, 8)
	if errors.Is(err, webgpu.ErrNoAdapter) {
		gputest.NoDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	opts := []SamplerOptions{
		{Temperature: 0.8},
		{Temperature: 1, TopK: 40},
		{Temperature: 0.9, TopP: 0.9},
		{Temperature: 1.3, MinP: 0.05},
		{Temperature: 0.7, TopK: 100, TopP: 0.95, MinP: 0.02},
		{Temperature: 3},              // flat: tails past the candidates
		{Temperature: 3, TopP: 0.999}, // top-p's cut past the candidates
		{Temperature: 3, MinP: 0.5},
		{Temperature: 1, RepeatPenalty: 1.3, RepeatLastN: 6, FrequencyPenalty: 0.5, PresencePenalty: 0.3, LogitBias: map[int32]float32{3: 5, 4: -100, 100000: 2}},
		{RepeatPenalty: 1.5, RepeatLastN: 4}, // greedy after penalties
		{Temperature: 1, TopK: 256},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	tails, draws := 0, 0
	for _, cols := range []int{1, 7, 255, 256, 257, 1000} {
		x, err := be.NewOutputTensor(8, cols)
		if err != nil {
			t.Fatal(err)
		}
		for oi, o := range opts {
			for trial := range 4 {
				o.Seed = uint64(100*oi + trial)
				name := fmt.Sprintf("cols %d, options %d, trial %d", cols, oi, trial)
				const rows = 3
				logits := make([]float32, rows*cols)
				for i := range logits {
					switch {
					case trial%3 == 1: // ties: few distinct values
						logits[i] = float32(rng.IntN(4))
					default:
						logits[i] = float32(rng.NormFloat64() * 2)
					}
					if trial == 2 && i%5 == 1 {
						logits[i] = float32(math.Inf(-1)) // a grammar's mask
					}
				}
				gpuS, cpuS := make([]*Sampler, rows), make([]*Sampler, rows)
				hist := make([][]int32, rows)
				sr := make([]backend.SampleRow, rows)
				for r := range rows {
					o := o
					o.Seed += uint64(r)
					gpuS[r], cpuS[r] = NewSampler(o), NewSampler(o)
					for range 8 {
						hist[r] = append(hist[r], int32(rng.IntN(min(cols, 10))))
					}
					gpuS[r].prompt, cpuS[r].prompt = 2, 2
					sr[r] = gpuS[r].sampleRow(hist[r], cols, 1)
				}
				if err := be.Write(x, logits); err != nil {
					t.Fatal(err)
				}
				if err := be.SetSampling(sr); err != nil {
					t.Fatal(err)
				}
				got, err := be.Sample(x, rows)
				if err != nil {
					t.Fatal(err)
				}
				var after []float32
				for r := range rows {
					want := cpuS[r].Sample(slices.Clone(logits[r*cols:(r+1)*cols]), hist[r])
					d := got[r]
					gpuS[r].skip(d.Draws)
					draws += d.Draws
					tok := int(d.Token)
					if d.Tail >= 0 {
						tails++
						if after == nil {
							if after, err = be.Read(x, rows); err != nil {
								t.Fatal(err)
							}
						}
						tok = gpuS[r].samplePenalised(slices.Clone(after[r*cols : (r+1)*cols]))
					}
					if tok != want {
						t.Fatalf("%s, row %d: device %d (tail %d), sampler %d", name, r, tok, d.Tail, want)
					}
					// Both streams are at the same place: the next draws agree.
					if a, b := gpuS[r].rng.Float64(), cpuS[r].rng.Float64(); a != b {
						t.Fatalf("%s, row %d: streams apart after the draw (%d used)", name, r, d.Draws)
					}
				}
			}
		}
	}
	if tails == 0 || draws == 0 {
		t.Errorf("%d tails and %d draws on the device: the test misses a path", tails, draws)
	}
	t.Logf("%d device draws, %d tails", draws, tails)
	// Where the device has subgroups (Chromium's SwiftShader, as web/e2e's
	// TestBrowserSubgroups runs this test), the kernel that drew was the
	// subgroup form.
	if dev.Info().Subgroups && !slices.ContainsFunc(be.Kernels(), func(k string) bool { return strings.HasPrefix(k, "sample+sg") }) {
		t.Errorf("a device with subgroups ran no subgroup form of sample: %v", be.Kernels())
	}
}
