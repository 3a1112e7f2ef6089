package eval

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/internal/cputime"
)

// BenchOptions shape a benchmark run.
type BenchOptions struct {
	PromptTokens int // random prompt tokens (after BOS)
	GenTokens    int // tokens to decode, end-of-sequence ignored
	// Concurrency runs that many sequences at once (default 1), each with
	// its own random prompt.
	Concurrency int
	// SharedPrefix makes every sequence's prompt start with the same
	// SharedPrefix tokens, and runs the batch twice: with the prefix cache
	// and without, to show what sharing saves.
	SharedPrefix int
	// Adapters are loaded adapters the sequences run with, one each:
	// sequence i runs Adapters[i mod len], as a server's requests for
	// different adapters do (none: the base alone).
	Adapters []runtime.AdapterRef
	// Sampler is how every sequence draws its tokens (the zero value:
	// greedy), each sequence i seeded with Sampler.Seed + i.
	Sampler runtime.SamplerOptions
	// Prompt, if set, is the text the measured sequence continues instead
	// of PromptTokens random tokens (speculation's acceptance depends on
	// the text: an ordinary story, or a repetitive one).
	Prompt string
	// Rounds is how many times, with a draft, the speculative and plain
	// runs alternate (spec, plain, plain, spec each round; default 1).
	Rounds int
}

// sampler is how sequence i draws.
func (o BenchOptions) sampler(i int) runtime.SamplerOptions {
	s := o.Sampler
	s.Seed += uint64(i)
	return s
}

// adapter is what sequence i runs with.
func (o BenchOptions) adapter(i int) []runtime.AdapterRef {
	if len(o.Adapters) == 0 {
		return nil
	}
	return []runtime.AdapterRef{o.Adapters[i%len(o.Adapters)]}
}

// BenchResult is what `tessera bench` prints.
type BenchResult struct {
	Device string `json:"device"`
	Model  string `json:"model"`
	// Adapters are the adapters the sequences ran with, one each in turn.
	Adapters     []string `json:"adapters,omitempty"`
	PromptTokens int      `json:"prompt_tokens"`
	GenTokens    int      `json:"gen_tokens"`
	PromptTPS    float64  `json:"prompt_tps"`
	DecodeTPS    float64  `json:"decode_tps"`
	// DecodeCPUms is the process's CPU time per decoded token (after the
	// first), a software GPU's driver threads included: steadier than
	// DecodeTPS on shared cores. Zero where unknown (non-unix) or with a
	// draft or several sequences.
	DecodeCPUms float64 `json:"decode_cpu_ms_per_token,omitempty"`
	TTFTms      float64 `json:"ttft_ms"`
	// DispatchesPerToken is the dispatches of a forward step (every step
	// runs the same ops whatever its rows): per decoded token of one
	// sequence, per step of all of them with Concurrency.
	DispatchesPerToken float64 `json:"dispatches_per_token"`
	// HostUsPerDispatch is the host's wall time recording and submitting
	// the measured steps (backend.Stats.Host), a dispatch: what no GPU
	// makes faster. Zero on the CPU backend.
	HostUsPerDispatch float64 `json:"host_us_per_dispatch,omitempty"`
	// HostPlatformUsPerDispatch is the part of HostUsPerDispatch spent in
	// the WebGPU implementation (encoding and submitting the commands);
	// the rest is Go's recording.
	HostPlatformUsPerDispatch float64 `json:"host_platform_us_per_dispatch,omitempty"`
	MemoryBytes               int64   `json:"memory_bytes"`
	WeightBytes               int64   `json:"weight_bytes"`
	WeightMix                 string  `json:"weight_mix"` // FormatMix of Engine.WeightMix
	// Bits is each kind of tensor's bits a weight, in the file and as
	// kept (Engine.TensorBits).
	Bits              []runtime.GroupBits `json:"bits_per_weight"`
	DecodeBytes       int64               `json:"decode_bytes_per_token"`
	DecodeGBps        float64             `json:"decode_gbps"`
	CopyGBps          float64             `json:"copy_gbps"`
	BandwidthFraction float64             `json:"bandwidth_fraction"`

	// On the CPU: the goroutines of a matrix product and the kernels
	// chosen for this CPU (cpu.Kernels).
	Threads int    `json:"threads,omitempty"`
	Kernels string `json:"kernels,omitempty"`

	// The engine's budgets (Engine.Budgets): tokens and sequences a step.
	MaxBatchTokens int `json:"max_batch_tokens"`
	MaxSeqs        int `json:"max_seqs"`

	// ImageEncodeMs is the time to encode one image with the vision
	// projector (Options.MMProj; its preprocessing included), and
	// ImageTokens the embeddings it makes (without the markers between an
	// idefics3 image's tiles); zero without one.
	ImageEncodeMs float64 `json:"image_encode_ms,omitempty"`
	ImageTokens   int     `json:"image_tokens,omitempty"`

	Concurrency        int     `json:"concurrency"`
	AggregateDecodeTPS float64 `json:"aggregate_decode_tps"`
	PerSeqDecodeTPS    float64 `json:"per_sequence_decode_tps"`
	KVPeakBlocks       int     `json:"kv_peak_blocks"`
	KVBlockBytes       int64   `json:"kv_block_bytes"`
	KVType             string  `json:"kv_type"`  // how keys and values are stored
	KVBytes            int64   `json:"kv_bytes"` // every cache, allocated at load
	// KVWindowBytes is the sliding-window layers' rings in KVBytes (0
	// where every layer keeps the whole sequence).
	KVWindowBytes int64 `json:"kv_window_bytes,omitempty"`
	Preemptions   int   `json:"preemptions"`
	// With SharedPrefix: the same run without the prefix cache.
	Unshared *BenchResult `json:"unshared,omitempty"`

	// With a draft: speculative decoding's figures, and the same run
	// without speculation for the ratio.
	Draft              string  `json:"draft,omitempty"`
	AcceptanceRate     float64 `json:"acceptance_rate,omitempty"`
	TokensPerStep      float64 `json:"tokens_per_target_step,omitempty"`
	RoundTripsPerToken float64 `json:"round_trips_per_token"`
	// ReadbackBytesPerToken is what the device read back per generated
	// token of the measured run (0 on the CPU): a few bytes where tokens
	// are picked on the device, a vocabulary's logits where they are not.
	ReadbackBytesPerToken float64 `json:"readback_bytes_per_token"`
	PlainDecodeTPS        float64 `json:"plain_decode_tps,omitempty"`
	Speedup               float64 `json:"speedup,omitempty"`
	// The decode rate of each run, speculative and plain, in the order
	// they ran: their spread is the machine's noise, against which the
	// speed-up is to be read.
	SpecRunsTPS  []float64 `json:"speculative_runs_tps,omitempty"`
	PlainRunsTPS []float64 `json:"plain_runs_tps,omitempty"`
	// SpeedupMedian is the median over the rounds of each round's
	// speculative rate over its plain rate (two runs each): steadier than
	// Speedup on a machine whose speed drifts between rounds.
	SpeedupMedian float64 `json:"speedup_median,omitempty"`
	// The process's CPU time per decoded token (a software GPU's threads
	// included), median over each mode's runs, and plain's over
	// speculation's: what the device did, less the waits of a shared
	// machine.
	SpecCPUms  float64 `json:"speculative_cpu_ms_per_token,omitempty"`
	PlainCPUms float64 `json:"plain_cpu_ms_per_token,omitempty"`
	CPUSpeedup float64 `json:"cpu_speedup,omitempty"`
}

// Bench measures prompt processing and decoding on a random prompt (after a
// short warm-up that compiles every pipeline), and the device's copy
// bandwidth, against which decode's bytes per second are compared.
func Bench(ctx context.Context, e *runtime.Engine, o BenchOptions) (BenchResult, error) {
	c := e.Model().Config
	b := e.Budgets()
	r := BenchResult{Device: e.DeviceName(), Model: e.Model().Path, PromptTokens: o.PromptTokens, GenTokens: o.GenTokens,
		MaxBatchTokens: b.MaxBatchTokens, MaxSeqs: b.MaxSeqs}
	for _, a := range o.Adapters {
		r.Adapters = append(r.Adapters, a.Name)
	}
	if d := backend.Describe(e.Backend()); !d.GPU {
		r.Threads, r.Kernels = d.Threads, d.Kernels
	}
	if o.PromptTokens < 0 || o.GenTokens < 2 {
		return r, fmt.Errorf("bench needs at least 2 generated tokens and a non-negative prompt")
	}
	if o.Concurrency > b.MaxSeqs {
		return r, fmt.Errorf("bench: %d sequences at once, but the engine runs at most %d (its max seqs budget)", o.Concurrency, b.MaxSeqs)
	}
	if o.PromptTokens+1+o.GenTokens > c.Context {
		return r, fmt.Errorf("%w: %d prompt + %d generated tokens, context %d", runtime.ErrContextFull, o.PromptTokens+1, o.GenTokens, c.Context)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := randomPrompt(e, rng, o.PromptTokens)
	if o.Prompt != "" {
		if o.Concurrency > 1 || o.SharedPrefix > 0 {
			return r, fmt.Errorf("bench: a text prompt is for one sequence (no concurrency or shared prefix)")
		}
		prompt = prompt[:0]
		for _, id := range e.Tokenizer().Encode(o.Prompt, true) {
			prompt = append(prompt, int32(id))
		}
		if o.PromptTokens = len(prompt) - 1; o.PromptTokens+1+o.GenTokens > c.Context {
			return r, fmt.Errorf("%w: %d prompt + %d generated tokens, context %d", runtime.ErrContextFull, o.PromptTokens+1, o.GenTokens, c.Context)
		}
		r.PromptTokens = o.PromptTokens
	}
	discard := func(runtime.Token) error { return nil }
	if o.Concurrency > 1 || o.SharedPrefix > 0 {
		return benchMany(ctx, e, o, r)
	}
	// The warm-up runs the measured request's shapes (a prompt step of its
	// length, decoding steps and their chains) on a prompt of its own, so
	// that neither kernel compilation nor the prefix cache is measured.
	warm := runtime.Request{Tokens: randomPrompt(e, rand.New(rand.NewPCG(5, 6)), o.PromptTokens), MaxTokens: min(o.GenTokens, warmTokens), IgnoreEOS: true, Adapters: o.adapter(0), Sampler: o.sampler(0)}
	if _, err := e.Generate(ctx, warm, discard); err != nil {
		return r, fmt.Errorf("warm-up: %w", err)
	}
	d0, s0, read0, st0 := e.Backend().Stats().Dispatches, e.Steps(), e.Backend().Stats().ReadBytes, e.Backend().Stats()
	req := runtime.Request{Tokens: prompt, MaxTokens: o.GenTokens, IgnoreEOS: true, Adapters: o.adapter(0), Sampler: o.sampler(0)}
	var cpu0 time.Duration // at the first token
	st, err := e.Generate(ctx, req, func(runtime.Token) error {
		if cpu0 == 0 {
			cpu0 = cputime.Process()
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	if cpu := cputime.Process(); cpu0 > 0 && st.Generated > 1 && e.DraftName() == "" {
		r.DecodeCPUms = float64(cpu-cpu0) / float64(time.Millisecond) / float64(st.Generated-1)
	}
	if st.Generated > 0 { // the prompt's step included: one read-back brings its first token
		r.ReadbackBytesPerToken = float64(e.Backend().Stats().ReadBytes-read0) / float64(st.Generated)
	}
	first := st // prompt figures: of the first run alone
	if e.DraftName() != "" {
		// Speculative and plain runs alternate, speculative, plain, plain,
		// speculative, each round, each mode's figures the sum of its
		// runs: a machine whose speed drifts (warming up, other work) then
		// favours neither.
		specCPU := []float64{cpuPerToken(st, cpu0, cputime.Process())}
		var plain runtime.Stats
		var plainCPU, ratios []float64
		for round := range max(o.Rounds, 1) {
			if round > 0 {
				again, cpu, err := benchRun(ctx, e, req, true)
				if err != nil {
					return r, err
				}
				st, specCPU, r.SpecRunsTPS = st.Add(again), append(specCPU, cpu), append(r.SpecRunsTPS, again.DecodeRate())
			} else {
				r.SpecRunsTPS = append(r.SpecRunsTPS, st.DecodeRate())
			}
			for range 2 {
				p, cpu, err := benchRun(ctx, e, req, false)
				if err != nil {
					return r, err
				}
				plain, plainCPU, r.PlainRunsTPS = plain.Add(p), append(plainCPU, cpu), append(r.PlainRunsTPS, p.DecodeRate())
			}
			again, cpu, err := benchRun(ctx, e, req, true)
			if err != nil {
				return r, err
			}
			st, specCPU, r.SpecRunsTPS = st.Add(again), append(specCPU, cpu), append(r.SpecRunsTPS, again.DecodeRate())
			n := len(r.SpecRunsTPS)
			ratios = append(ratios, (r.SpecRunsTPS[n-2]+r.SpecRunsTPS[n-1])/(r.PlainRunsTPS[n-2]+r.PlainRunsTPS[n-1]))
		}
		r.Draft = e.DraftName()
		r.AcceptanceRate, r.TokensPerStep = st.AcceptanceRate(), st.TokensPerStep()
		r.PlainDecodeTPS = plain.DecodeRate()
		if r.PlainDecodeTPS > 0 {
			r.Speedup = st.DecodeRate() / r.PlainDecodeTPS
		}
		r.SpeedupMedian = median(ratios)
		r.SpecCPUms, r.PlainCPUms = median(specCPU), median(plainCPU)
		if r.SpecCPUms > 0 {
			r.CPUSpeedup = r.PlainCPUms / r.SpecCPUms
		}
	}
	r.RoundTripsPerToken = st.RoundTripsPerToken()
	r.PromptTPS = rate(len(prompt), first.Prefill)
	r.DecodeTPS = st.DecodeRate()
	r.AggregateDecodeTPS, r.PerSeqDecodeTPS, r.Concurrency = r.DecodeTPS, r.DecodeTPS, 1
	r.TTFTms = float64(first.TimeToFirst) / float64(time.Millisecond)
	// Every step runs the same ops whatever its rows, so dispatches per step
	// is dispatches per decoded token.
	if steps := e.Steps() - s0; steps > 0 {
		r.DispatchesPerToken = float64(e.Backend().Stats().Dispatches-d0) / float64(steps)
	}
	r.HostUsPerDispatch, r.HostPlatformUsPerDispatch = hostPerDispatch(e.Backend().Stats(), st0)
	bs := e.Backend().Stats()
	r.MemoryBytes = bs.Memory
	r.WeightBytes = e.WeightBytes()
	r.KVType, r.KVBytes, r.KVWindowBytes = e.KVType().String(), e.KVBytes(), e.WindowBytes()
	r.WeightMix = runtime.FormatMix(e.WeightMix())
	r.Bits = e.TensorBits()
	r.DecodeBytes = e.DecodeBytes(len(prompt) + o.GenTokens/2)
	r.DecodeGBps = float64(r.DecodeBytes) * r.DecodeTPS / 1e9
	if r.CopyGBps, err = backend.CopyBandwidth(e.Backend(), 64<<20, 10); err != nil {
		return r, fmt.Errorf("copy bandwidth probe: %w", err)
	}
	if r.CopyGBps > 0 {
		r.BandwidthFraction = r.DecodeGBps / r.CopyGBps
	}
	if e.HasVision() {
		ms, toks, err := e.ImageEncodeTime(ctx)
		if err != nil {
			return r, fmt.Errorf("image: %w", err)
		}
		r.ImageEncodeMs, r.ImageTokens = ms, toks
	}
	return r, nil
}

// warmTokens is how many tokens a warm-up request generates at most: a
// few chains of decoding steps.
const warmTokens = 16

// randomPrompt is BOS and n random tokens.
func randomPrompt(e *runtime.Engine, rng *rand.Rand, n int) []int32 {
	p := []int32{int32(max(e.Tokenizer().BOS(), 0))}
	for range n {
		p = append(p, int32(rng.IntN(e.Model().Config.Vocab)))
	}
	return p
}

// benchRun runs req with speculation on or off, returning its figures
// and the process's CPU time per decoded token after the first.
func benchRun(ctx context.Context, e *runtime.Engine, req runtime.Request, spec bool) (runtime.Stats, float64, error) {
	e.SetSpeculation(spec)
	defer e.SetSpeculation(true)
	var cpu0 time.Duration
	st, err := e.Generate(ctx, req, func(runtime.Token) error {
		if cpu0 == 0 {
			cpu0 = cputime.Process()
		}
		return nil
	})
	return st, cpuPerToken(st, cpu0, cputime.Process()), err
}

// cpuPerToken is the CPU time from cpu0, at a run's first token, to
// cpu1, at its end, per token decoded after the first, in ms (0 where
// unknown).
func cpuPerToken(st runtime.Stats, cpu0, cpu1 time.Duration) float64 {
	if cpu0 <= 0 || st.Generated < 2 {
		return 0
	}
	return float64(cpu1-cpu0) / float64(time.Millisecond) / float64(st.Generated-1)
}

// median is the middle value of xs (the mean of the middle two), 0 for
// none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// benchMany runs o.Concurrency sequences at once, and with a shared prefix
// runs them again without the prefix cache.
func benchMany(ctx context.Context, e *runtime.Engine, o BenchOptions, r BenchResult) (BenchResult, error) {
	n := max(o.Concurrency, 1)
	c := e.Model().Config
	rng := rand.New(rand.NewPCG(3, 4))
	bos := int32(max(e.Tokenizer().BOS(), 0))
	shared := []int32{bos}
	for range min(o.SharedPrefix, o.PromptTokens) {
		shared = append(shared, int32(rng.IntN(c.Vocab)))
	}
	prompts := make([][]int32, n)
	for i := range prompts {
		prompts[i] = append([]int32(nil), shared...)
		for len(prompts[i]) < o.PromptTokens+1 {
			prompts[i] = append(prompts[i], int32(rng.IntN(c.Vocab)))
		}
	}
	// The warm-up is a round of as many sequences on prompts of their own,
	// shorter: it compiles the kernels of the batch's shapes.
	warm := make([]*runtime.Stream, n)
	wrng := rand.New(rand.NewPCG(7, 8))
	for i := range warm {
		var err error
		req := runtime.Request{Tokens: randomPrompt(e, wrng, o.PromptTokens), MaxTokens: min(o.GenTokens, warmTokens), IgnoreEOS: true, Adapters: o.adapter(i), Sampler: o.sampler(i)}
		if warm[i], err = e.Start(ctx, req); err != nil {
			for _, s := range warm[:i] {
				s.Cancel()
			}
			return r, fmt.Errorf("warm-up: %w", err)
		}
	}
	for _, s := range warm {
		<-s.Done()
		if err := s.Err(); err != nil {
			return r, fmt.Errorf("warm-up: %w", err)
		}
	}
	run := func(share bool) (BenchResult, error) {
		res := r
		e.SetPrefixCache(share)
		pre := e.Metrics().Preemptions
		defer e.SetPrefixCache(true)
		if o.SharedPrefix > 0 {
			// The shared prefix is a system prompt seen before: one
			// sequence puts it in the cache, as in a long-running server.
			if _, err := e.Generate(ctx, runtime.Request{Tokens: prompts[0], MaxTokens: 1, Adapters: o.adapter(0)}, func(runtime.Token) error { return nil }); err != nil {
				return res, err
			}
		}
		e.ResetPeakBlocks()
		streams := make([]*runtime.Stream, n)
		d0, s0, read0, st0 := e.Backend().Stats().Dispatches, e.Steps(), e.Backend().Stats().ReadBytes, e.Backend().Stats()
		start := time.Now()
		for i, p := range prompts {
			var err error
			if streams[i], err = e.Start(ctx, runtime.Request{Tokens: p, MaxTokens: o.GenTokens, IgnoreEOS: true, Adapters: o.adapter(i), Sampler: o.sampler(i)}); err != nil {
				return res, err
			}
		}
		var firstAt, endAt time.Time
		var generated int
		var ttft, perSeq float64
		times := make([][]time.Time, 0, n) // each sequence's tokens' times
		for _, s := range streams {
			<-s.Done()
			if err := s.Err(); err != nil {
				return res, err
			}
			st := s.Stats()
			first := start.Add(st.TimeToFirst)
			end := first.Add(st.Decode)
			if first.After(firstAt) {
				firstAt = first
			}
			if end.After(endAt) {
				endAt = end
			}
			var ts []time.Time
			for tok, ok := s.Next(); ok; tok, ok = s.Next() { // queued, unread till now
				if tok.ID >= 0 { // not the text flushed at the end
					ts = append(ts, tok.Time)
				}
			}
			times = append(times, ts)
			generated += st.Generated
			ttft += float64(st.TimeToFirst) / float64(time.Millisecond) / float64(n)
			perSeq += st.DecodeRate() / float64(n)
		}
		if steps := e.Steps() - s0; steps > 0 {
			res.DispatchesPerToken = float64(e.Backend().Stats().Dispatches-d0) / float64(steps)
		}
		res.HostUsPerDispatch, res.HostPlatformUsPerDispatch = hostPerDispatch(e.Backend().Stats(), st0)
		if generated > 0 {
			res.ReadbackBytesPerToken = float64(e.Backend().Stats().ReadBytes-read0) / float64(generated)
		}
		res.Concurrency = n
		res.TTFTms = ttft
		res.PerSeqDecodeTPS = perSeq
		res.DecodeTPS = perSeq
		res.AggregateDecodeTPS = aggregateRate(times)
		res.PromptTPS = rate(n*(o.PromptTokens+1), firstAt.Sub(start))
		m := e.Metrics()
		res.KVPeakBlocks = m.PeakBlocks
		res.Preemptions = m.Preemptions - pre
		res.KVBlockBytes = e.KVBlockBytes()
		res.KVType, res.KVBytes, res.KVWindowBytes = e.KVType().String(), e.KVBytes(), e.WindowBytes()
		res.MemoryBytes = e.Backend().Stats().Memory
		res.WeightBytes = e.WeightBytes()
		return res, nil
	}
	res, err := run(true)
	if err != nil || o.SharedPrefix == 0 {
		return res, err
	}
	unshared, err := run(false)
	if err != nil {
		return res, err
	}
	res.Unshared = &unshared
	return res, nil
}

// aggregateRate is the sequences' tokens a second together while all of
// them decode: the tokens made after the last sequence's first (a prompt
// read, not a token decoded beside the others), over the time from it to
// the last token of all. Every token over that window (the figure before)
// also counted the tokens the first sequences made while the others'
// prompts were read, which the window leaves out.
func aggregateRate(times [][]time.Time) float64 {
	var from, to time.Time
	for _, ts := range times {
		if len(ts) == 0 {
			continue
		}
		if ts[0].After(from) {
			from = ts[0]
		}
		if last := ts[len(ts)-1]; last.After(to) {
			to = last
		}
	}
	n := 0
	for _, ts := range times {
		for _, t := range ts {
			if t.After(from) {
				n++
			}
		}
	}
	return rate(n, to.Sub(from))
}

// rate is n per second of d.
func rate(n int, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// hostPerDispatch is the host's µs a dispatch since a measurement began
// at st0, and their part in the platform.
func hostPerDispatch(st, st0 backend.Stats) (host, platform float64) {
	n := st.Dispatches - st0.Dispatches
	if n <= 0 || st.Host <= st0.Host {
		return 0, 0
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	return us(st.Host - st0.Host), us(st.HostPlatform - st0.HostPlatform)
}
