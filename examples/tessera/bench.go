package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/eval"
)

func setupBench(fs *flag.FlagSet) func(context.Context, *env) error {
	var mf modelFlags
	mf.register(fs)
	var o eval.BenchOptions
	fs.IntVar(&o.PromptTokens, "prompt-tokens", 128, "random prompt tokens to process")
	fs.IntVar(&o.GenTokens, "gen-tokens", 64, "tokens to decode")
	fs.IntVar(&o.Concurrency, "concurrency", 1, "sequences decoding at once")
	fs.IntVar(&o.SharedPrefix, "shared-prefix", 0, "tokens of prompt all sequences share; runs with and without the prefix cache")
	fs.StringVar(&o.Prompt, "prompt", "", "text to continue instead of --prompt-tokens random tokens (one sequence)")
	fs.IntVar(&o.Rounds, "rounds", 1, "with --draft: rounds of speculative, plain, plain, speculative runs, for medians")
	sampling := samplerFlags(fs, 0, 1) // greedy unless told
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a Go CPU profile of the measured run to FILE (go tool pprof FILE): where the CPU backend's time goes")
	return func(ctx context.Context, e *env) error {
		if o.PromptTokens < 0 || o.GenTokens < 2 || o.Concurrency < 1 || o.Concurrency > runtime.MaxSeqsLimit || o.SharedPrefix < 0 || o.Rounds < 1 {
			return usagef("--prompt-tokens >= 0, --gen-tokens >= 2, --concurrency in 1..%d, --shared-prefix >= 0 and --rounds >= 1, please", runtime.MaxSeqsLimit)
		}
		if o.Prompt != "" && (o.Concurrency > 1 || o.SharedPrefix > 0) {
			return usagef("--prompt is for one sequence: no --concurrency or --shared-prefix with it, please")
		}
		var err error
		if o.Sampler, err = sampling(); err != nil {
			return err
		}
		if o.Concurrency > runtime.DefaultMaxSeqs && mf.maxSeqs == 0 {
			mf.maxSeqs = o.Concurrency // the engine must run them all at once
		}
		eng, err := mf.load(ctx, e)
		if err != nil {
			return err
		}
		defer eng.Close()
		o.Adapters = mf.requestAdapters() // one per sequence, in turn, as a server's requests
		if *cpuProfile != "" {
			stop, err := startCPUProfile(*cpuProfile)
			if err != nil {
				return err
			}
			defer stop()
		}
		r, err := eval.Bench(ctx, eng, o)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(r)
		}
		if r.Threads > 0 {
			fmt.Fprintf(e.stdout, "device            %s: %d threads, %s kernels\n", r.Device, r.Threads, r.Kernels)
		} else {
			fmt.Fprintf(e.stdout, "device            %s\n", r.Device)
		}
		fmt.Fprintf(e.stdout, "model             %s\n", r.Model)
		fmt.Fprintf(e.stdout, "budgets           %d tokens and %d sequences a step (--max-batch-tokens, --max-seqs)\n", r.MaxBatchTokens, r.MaxSeqs)
		printAdapters(e, r)
		fmt.Fprintf(e.stdout, "prompt            %d tokens: %.1f tok/s, time to first token %.1f ms\n", r.PromptTokens+1, r.PromptTPS, r.TTFTms)
		fmt.Fprintf(e.stdout, "decode            %d tokens: %.1f tok/s", r.GenTokens, r.DecodeTPS)
		if r.DecodeCPUms > 0 {
			fmt.Fprintf(e.stdout, ", %.2f ms CPU a token (the process's, driver threads included)", r.DecodeCPUms)
		}
		fmt.Fprintln(e.stdout)
		if r.ImageTokens > 0 {
			fmt.Fprintf(e.stdout, "image encode      %.1f ms an image (%d tokens)\n", r.ImageEncodeMs, r.ImageTokens)
		}
		if r.Concurrency > 1 || r.Unshared != nil {
			printMany(e, r, "")
			if r.Unshared != nil {
				printMany(e, *r.Unshared, " (no prefix cache)")
			}
			return nil
		}
		fmt.Fprintf(e.stdout, "dispatches/token  %.0f%s\n", r.DispatchesPerToken, hostNote(r))
		fmt.Fprintf(e.stdout, "round trips       %.2f a token, %.0f bytes read back a token\n", r.RoundTripsPerToken, r.ReadbackBytesPerToken)
		if r.Draft != "" {
			fmt.Fprintf(e.stdout, "speculation       draft %s: acceptance %.0f%%, %.2f tokens per target step, %.2f round trips per token; plain decode %.1f tok/s, speed-up %.2fx\n",
				r.Draft, 100*r.AcceptanceRate, r.TokensPerStep, r.RoundTripsPerToken, r.PlainDecodeTPS, r.Speedup)
			fmt.Fprintf(e.stdout, "runs              speculative %s tok/s, plain %s (each round spec, plain, plain, spec)\n",
				formatRates(r.SpecRunsTPS), formatRates(r.PlainRunsTPS))
			fmt.Fprintf(e.stdout, "medians           speed-up %.2fx over %d rounds; CPU %.3f ms a token speculative, %.3f plain: %.2fx\n",
				r.SpeedupMedian, len(r.PlainRunsTPS)/2, r.SpecCPUms, r.PlainCPUms, r.CPUSpeedup)
		}
		fmt.Fprintf(e.stdout, "memory            %s (weights %s, %s kv cache %s%s)\n", dtype.FormatBytes(r.MemoryBytes), dtype.FormatBytes(r.WeightBytes),
			r.KVType, dtype.FormatBytes(r.KVBytes), windowNote(r.KVWindowBytes))
		fmt.Fprintf(e.stdout, "weight storage    %s\n", r.WeightMix)
		fmt.Fprintf(e.stdout, "bits a weight     by tensor kind, in the file → as kept:\n%s", runtime.FormatBits(r.Bits, "                    "))
		fmt.Fprintf(e.stdout, "bandwidth         decode reads %s/token = %.2f GB/s; copy probe %.2f GB/s; fraction %.2f\n",
			dtype.FormatBytes(r.DecodeBytes), r.DecodeGBps, r.CopyGBps, r.BandwidthFraction)
		return nil
	}
}

// formatRates lists decode rates, one decimal each.
func formatRates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(parts, " ")
}

// startCPUProfile profiles the process into path until the returned
// function is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// printAdapters prints the adapters a run's sequences ran with, if any.
func printAdapters(e *env, r eval.BenchResult) {
	if len(r.Adapters) > 0 {
		fmt.Fprintf(e.stdout, "adapters          %s (sequence i runs adapter i mod %d)\n", strings.Join(r.Adapters, ", "), len(r.Adapters))
	}
}

// printMany prints the figures of a run of several sequences.
func printMany(e *env, r eval.BenchResult, note string) {
	fmt.Fprintf(e.stdout, "sequences%s      %d: aggregate decode %.1f tok/s, per sequence %.1f tok/s, mean time to first token %.1f ms\n",
		note, r.Concurrency, r.AggregateDecodeTPS, r.PerSeqDecodeTPS, r.TTFTms)
	fmt.Fprintf(e.stdout, "kv cache%s       peak %d blocks = %s, %d preemptions\n",
		note, r.KVPeakBlocks, dtype.FormatBytes(int64(r.KVPeakBlocks)*r.KVBlockBytes), r.Preemptions)
	fmt.Fprintf(e.stdout, "dispatches%s     %.0f a step (of all the sequences' rows)%s\n", note, r.DispatchesPerToken, hostNote(r))
}

// hostNote is the host's cost a dispatch, on a GPU backend.
func hostNote(r eval.BenchResult) string {
	if r.HostUsPerDispatch <= 0 {
		return ""
	}
	return fmt.Sprintf("; the host %.2f µs a dispatch recording and submitting (Go %.2f, WebGPU %.2f)",
		r.HostUsPerDispatch, r.HostUsPerDispatch-r.HostPlatformUsPerDispatch, r.HostPlatformUsPerDispatch)
}

// windowNote is the part of the kv cache that the sliding-window layers'
// rings take, for the memory line; "" without them.
func windowNote(b int64) string {
	if b == 0 {
		return ""
	}
	return ", of it " + dtype.FormatBytes(b) + " the sliding layers' windows"
}
