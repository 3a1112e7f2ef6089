package runtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tessera-llm/tessera/runtime/cpu"
	"github.com/tessera-llm/tessera/runtime/gpu"
)

// BenchOptions shape a benchmark run.
type BenchOptions struct {
	PromptTokens int // random prompt tokens (after BOS)
	GenTokens    int // tokens to decode, end-of-sequence ignored
}

// BenchResult is what `tessera bench` prints.
type BenchResult struct {
	Device             string  `json:"device"`
	Model              string  `json:"model"`
	PromptTokens       int     `json:"prompt_tokens"`
	GenTokens          int     `json:"gen_tokens"`
	PromptTPS          float64 `json:"prompt_tps"`
	DecodeTPS          float64 `json:"decode_tps"`
	TTFTms             float64 `json:"ttft_ms"`
	DispatchesPerToken float64 `json:"dispatches_per_token"`
	MemoryBytes        int64   `json:"memory_bytes"`
	WeightBytes        int64   `json:"weight_bytes"`
	DecodeBytes        int64   `json:"decode_bytes_per_token"`
	DecodeGBps         float64 `json:"decode_gbps"`
	CopyGBps           float64 `json:"copy_gbps"`
	BandwidthFraction  float64 `json:"bandwidth_fraction"`
}

// Bench measures prompt processing and decoding on a random prompt (after a
// short warm-up that compiles every pipeline), and the device's copy
// bandwidth, against which decode's bytes per second are compared.
func Bench(ctx context.Context, e *Engine, o BenchOptions) (BenchResult, error) {
	c := e.model.Config
	r := BenchResult{Device: e.DeviceName(), Model: e.model.Path, PromptTokens: o.PromptTokens, GenTokens: o.GenTokens}
	if o.PromptTokens < 0 || o.GenTokens < 2 {
		return r, fmt.Errorf("bench needs at least 2 generated tokens and a non-negative prompt")
	}
	if o.PromptTokens+1+o.GenTokens > c.Context {
		return r, fmt.Errorf("%w: %d prompt + %d generated tokens, context %d", ErrContextFull, o.PromptTokens+1, o.GenTokens, c.Context)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := []int32{int32(max(e.model.Tokenizer.BOS(), 0))}
	for range o.PromptTokens {
		prompt = append(prompt, int32(rng.IntN(c.Vocab)))
	}
	discard := func(Token) error { return nil }
	if _, err := e.Generate(ctx, Request{Tokens: prompt[:min(len(prompt), 8)], MaxTokens: 2, IgnoreEOS: true}, discard); err != nil {
		return r, fmt.Errorf("warm-up: %w", err)
	}
	var firstDispatches, lastDispatches, n int
	st, err := e.Generate(ctx, Request{Tokens: prompt, MaxTokens: o.GenTokens, IgnoreEOS: true}, func(Token) error {
		if n++; n == 1 {
			firstDispatches = e.be.Stats().Dispatches
		}
		lastDispatches = e.be.Stats().Dispatches
		return nil
	})
	if err != nil {
		return r, err
	}
	r.PromptTPS = rate(len(prompt), st.Prefill)
	r.DecodeTPS = st.DecodeRate()
	r.TTFTms = float64(st.TimeToFirst) / float64(time.Millisecond)
	if n > 1 {
		r.DispatchesPerToken = float64(lastDispatches-firstDispatches) / float64(n-1)
	}
	bs := e.be.Stats()
	r.MemoryBytes = bs.Memory
	r.WeightBytes = e.WeightBytes()
	r.DecodeBytes = e.DecodeBytes(len(prompt) + o.GenTokens/2)
	r.DecodeGBps = float64(r.DecodeBytes) * r.DecodeTPS / 1e9
	if r.CopyGBps, err = e.copyBandwidth(); err != nil {
		return r, fmt.Errorf("copy bandwidth probe: %w", err)
	}
	if r.CopyGBps > 0 {
		r.BandwidthFraction = r.DecodeGBps / r.CopyGBps
	}
	return r, nil
}

// copyBandwidth probes the memory bandwidth of the engine's device.
func (e *Engine) copyBandwidth() (float64, error) {
	switch be := e.be.(type) {
	case *gpu.Backend:
		return gpu.CopyBandwidth(be.Device(), 64<<20, 10)
	case *cpu.Backend:
		return cpu.CopyBandwidth(64<<20, 10), nil
	}
	return 0, nil
}

// DeviceName names the device the engine runs on: "cpu", or "webgpu:" and
// the adapter.
func (e *Engine) DeviceName() string {
	if be, ok := e.be.(*gpu.Backend); ok {
		info := be.Device().Info()
		return fmt.Sprintf("webgpu:%s (%s)", info.Adapter, info.Backend)
	}
	return e.be.Name()
}
