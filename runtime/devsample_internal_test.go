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
// CPU sampler's tokens, stream position included, over awkward widths (1,
// a prime, under and over the 256 ranked candidates, and real
// vocabularies), ties (few distinct values; values one ulp apart across a
// bin's boundary; -0 and +0), masked values, flat rows whose draws land
// past the ranked candidates (radix selection), top-p cuts past them,
// min-p, top-k 0 and top-k past the vocabulary, and every sampling
// parameter. A step reads back 8 bytes a row, whatever the row.
//
// The kernel's sums are exact but its probabilities are not the CPU's to
// the bit (exp's last ulp, the CPU's rounding of each probability to
// f32): a draw may differ where it lies within a hair of the boundary
// between two adjacent tokens. sampleAgrees accepts exactly that and
// nothing else; such draws are counted (measured: see the log).
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
		{Temperature: 3}, // flat: draws past the ranked candidates
		{Temperature: 8},
		{Temperature: 3, TopP: 0.999}, // top-p's cut past the candidates
		{Temperature: 2, TopP: 0.5},
		{Temperature: 3, MinP: 0.5},
		{Temperature: 8, MinP: 0.1},
		{Temperature: 2, TopK: 1 << 20}, // top-k past the vocabulary: the whole row
		{Temperature: 1, RepeatPenalty: 1.3, RepeatLastN: 6, FrequencyPenalty: 0.5, PresencePenalty: 0.3, LogitBias: map[int32]float32{3: 5, 4: -100, 100000: 2}},
		{RepeatPenalty: 1.5, RepeatLastN: 4}, // greedy after penalties
		{Temperature: 1, TopK: 256},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var st sampleTally
	for _, cols := range []int{1, 7, 255, 256, 257, 1000, 49152, 151936} {
		x, err := be.NewOutputTensor(8, cols)
		if err != nil {
			t.Fatal(err)
		}
		trials := 4
		if cols > 1000 {
			trials = 3 // the CPU sorts the row for each draw
		}
		for oi, o := range opts {
			for trial := range trials {
				o.Seed = uint64(100*oi + trial)
				const rows = 3
				logits := sampleLogits(rng, rows*cols, trial)
				st.check(t, be, x, fmt.Sprintf("cols %d, options %d, trial %d", cols, oi, trial), o, logits, rows, cols, rng)
			}
		}
	}
	if st.radix == 0 || st.draws == 0 || st.ranked == 0 || st.cutPast == 0 {
		t.Errorf("%d draws, %d by radix selection (%d with top-p's cut past the candidates), %d from the ranked candidates: the test misses a path", st.draws, st.radix, st.cutPast, st.ranked)
	}
	t.Logf("%d device draws (%d past the ranked candidates, %d with top-p's cut there), %d a hair from a boundary or cut", st.draws, st.radix, st.cutPast, st.near)
	// Where the device has subgroups (Chromium's SwiftShader, as web/e2e's
	// TestBrowserSubgroups runs this test), the kernel that drew was the
	// subgroup form.
	if dev.Info().Subgroups && !slices.ContainsFunc(be.Kernels(), func(k string) bool { return strings.HasPrefix(k, "sample+sg") }) {
		t.Errorf("a device with subgroups ran no subgroup form of sample: %v", be.Kernels())
	}
}

// sampleLogits makes n logits: random-weight models' flat rows (trial 0),
// ties among few values, some one ulp apart across a radix bin's boundary
// and -0 beside +0 (trial 1), and the same with a grammar's masked values
// (trial 2 and up).
func sampleLogits(rng *rand.Rand, n, trial int) []float32 {
	ties := []float32{1, math.Nextafter32(1, 0), 0, float32(math.Copysign(0, -1)), -2}
	logits := make([]float32, n)
	for i := range logits {
		switch {
		case trial%3 == 1:
			logits[i] = ties[rng.IntN(len(ties))]
		default:
			logits[i] = float32(rng.NormFloat64() * 2)
		}
		if trial >= 2 && i%5 == 1 {
			logits[i] = float32(math.Inf(-1))
		}
	}
	return logits
}

// sampleTally counts what TestSampleKernelMatchesSampler's draws took.
type sampleTally struct{ draws, radix, ranked, cutPast, near int }

// check draws rows rows of logits on the device and with the CPU sampler,
// each row with its own seed, and compares tokens and streams.
func (st *sampleTally) check(t *testing.T, be *gpu.Backend, x backend.Tensor, name string, o SamplerOptions, logits []float32, rows, cols int, rng *rand.Rand) {
	t.Helper()
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
		if o.TopK >= cols {
			sr[r].TopK = o.TopK // the kernel's own test of a k past the row
		}
	}
	if err := be.Write(x, logits); err != nil {
		t.Fatal(err)
	}
	if err := be.SetSampling(sr); err != nil {
		t.Fatal(err)
	}
	read := be.Stats().ReadBytes
	got, err := be.Sample(x, rows)
	if err != nil {
		t.Fatal(err)
	}
	if n := be.Stats().ReadBytes - read; n != int64(8*rows) {
		t.Fatalf("%s: %d bytes read back for %d rows, want 8 a row", name, n, rows)
	}
	for r := range rows {
		row := slices.Clone(logits[r*cols : (r+1)*cols])
		var draw float64
		if o.Temperature > 0 {
			draw = sr[r].Draws[0]
		}
		cpuS[r].penalise(row, hist[r])
		var full []candidate // the distribution before min-p and top-p
		if o.Temperature > 0 {
			u := o
			u.MinP, u.TopP = 0, 0
			full = slices.Clone(NewSampler(u).dist(slices.Clone(row)))
		}
		dist := slices.Clone(cpuS[r].dist(row))
		want := cpuS[r].pick(dist)
		d := got[r]
		gpuS[r].skip(d.Draws)
		st.draws += d.Draws
		switch {
		case d.Draws > 0 && len(dist) > 256 && len(dist) < len(full) && o.TopP > 0 && o.TopP < 1:
			st.cutPast++
			fallthrough
		case d.Draws > 0 && len(dist) > 256:
			st.radix++
		case d.Draws > 0:
			st.ranked++
		}
		if int(d.Token) != want {
			if !sampleAgrees(dist, full, o, draw, int(d.Token)) {
				t.Fatalf("%s, row %d: device %d, sampler %d (draw %v, %d candidates)", name, r, d.Token, want, draw, len(dist))
			}
			st.near++
			t.Logf("%s, row %d: device %d, sampler %d: the draw or the set's cut lies a hair from a boundary", name, r, d.Token, want)
		}
		// Both streams are at the same place: the next draws agree.
		if a, b := gpuS[r].rng.Float64(), cpuS[r].rng.Float64(); a != b {
			t.Fatalf("%s, row %d: streams apart after the draw (%d used)", name, r, d.Draws)
		}
	}
}

// sampleAgrees reports whether the device's token, where it is not the
// CPU's, is what probabilities a few ulps from the CPU's can give: its
// neighbour in the CPU's distribution with the draw within 1e-9 of their
// boundary, or the token drawn from a set one longer or shorter where the
// CPU's min-p or top-p cut lies as close to its threshold (ties make
// that happen: n equal probabilities reach top-p 0.95 at 95/n).
func sampleAgrees(dist, full []candidate, o SamplerOptions, draw float64, token int) bool {
	var cum float64
	for i, c := range dist {
		cum += float64(c.p)
		if i+1 < len(dist) && math.Abs(cum-draw) < 1e-9 && (c.id == token || dist[i+1].id == token) {
			return true
		}
	}
	n := len(dist)
	for _, m := range []int{n - 1, n + 1} {
		if m < 1 || m > len(full) {
			continue
		}
		var at float64 // the running probability at the cut between m-1 and m
		for _, c := range full[:min(n, m)] {
			at += float64(c.p)
		}
		edge := full[min(n, m)-1]
		if m > n {
			edge = full[n]
		}
		nearTop := o.TopP > 0 && o.TopP < 1 && math.Abs(at-float64(o.TopP)) < 1e-7*float64(n)
		nearMin := o.MinP > 0 && math.Abs(float64(edge.p)-float64(full[0].p*o.MinP)) < 1e-6*float64(edge.p)
		if !nearTop && !nearMin {
			continue
		}
		var total float64
		for _, c := range full[:m] {
			total += float64(c.p)
		}
		r, got := draw, full[m-1].id
		for _, c := range full[:m] {
			if r -= float64(c.p) / total; r < 0 {
				got = c.id
				break
			}
		}
		if got == token {
			return true
		}
	}
	return false
}

// TestSampleRefuses: what the sample kernel cannot draw is refused with an
// error, not drawn wrong: a draw outside [0, 1), and rows wider than its
// fixed-point sums hold (which the engine never sends: onDevice).
func TestSampleRefuses(t *testing.T) {
	dev := gputest.Open(t)
	be, err := gpu.NewBackend(dev, 2)
	if errors.Is(err, webgpu.ErrNoAdapter) {
		gputest.NoDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, tt := range []struct {
		name string
		cols int
		draw float64
		want string
	}{
		{"a draw of 1", 7, 1, "outside [0, 1)"},
		{"a negative draw", 7, -0.5, "outside [0, 1)"},
		{"a NaN draw", 7, math.NaN(), "outside [0, 1)"},
		{"a row too wide", backend.MaxSampleColumns + 1, 0.5, "columns, at most"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			x, err := be.NewOutputTensor(1, tt.cols)
			if err != nil {
				t.Fatal(err)
			}
			err = be.SetSampling([]backend.SampleRow{{Temperature: 1, Draws: []float64{tt.draw}}})
			if err == nil {
				_, err = be.Sample(x, 1)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
	if (SamplerOptions{Temperature: 1}).onDevice(backend.MaxSampleColumns + 1) {
		t.Errorf("a vocabulary of %d columns is drawn on the device", backend.MaxSampleColumns+1)
	}
}
