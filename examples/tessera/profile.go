package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/eval"
	"github.com/tessera-llm/tessera/runtime/profile"
)

// setupProfile is `tessera profile`: a bench run unprofiled (the token's
// time), then one with every op of the decode steps timed on its own
// (runtime/profile), summed per op kind and per layer.
func setupProfile(fs *flag.FlagSet) func(context.Context, *env) error {
	var mf modelFlags
	mf.register(fs)
	prompt := fs.Int("prompt-tokens", 32, "random prompt tokens before decoding")
	gen := fs.Int("gen-tokens", 16, "tokens to decode in each run")
	conc := fs.Int("concurrency", 1, "sequences decoding at once: profiles the decode steps of that many rows")
	return func(ctx context.Context, e *env) error {
		if *prompt < 0 || *gen < 2 || *conc < 1 {
			return usagef("--prompt-tokens >= 0, --gen-tokens >= 2 and --concurrency >= 1, please")
		}
		var pb *profile.Backend
		mf.wrap = func(be backend.Backend) backend.Backend {
			pb = profile.New(be)
			pb.Rows = *conc
			return pb
		}
		eng, err := mf.load(ctx, e)
		if err != nil {
			return err
		}
		defer eng.Close()
		o := eval.BenchOptions{PromptTokens: *prompt, GenTokens: *gen, Concurrency: *conc, Adapters: mf.requestAdapters()}
		r, err := eval.Bench(ctx, eng, o) // unprofiled: pb times its decode steps whole
		if err != nil {
			return err
		}
		pb.On = true
		if _, err := eval.Bench(ctx, eng, o); err != nil {
			return err
		}
		pb.On = false
		if err := pb.Err(); err != nil {
			return err
		}
		ops, steps := pb.Ops()
		step := pb.StepTime()
		if step == 0 && r.PerSeqDecodeTPS > 0 {
			step = time.Duration(float64(time.Second) / r.PerSeqDecodeTPS)
		}
		fmt.Fprintf(e.stdout, "device            %s\n", r.Device)
		fmt.Fprintf(e.stdout, "model             %s\n", r.Model)
		fmt.Fprintf(e.stdout, "decode            %.1f tok/s, %.0f dispatches a step%s\n", r.DecodeTPS, r.DispatchesPerToken, hostNote(r))
		printAdapters(e, r)
		if *conc > 1 {
			fmt.Fprintf(e.stdout, "sequences         %d: aggregate %.1f tok/s; the figures below are per step of %d rows\n", *conc, r.AggregateDecodeTPS, *conc)
		}
		profile.Summarize(ops, steps, step, r.CopyGBps).Print(e.stdout)
		return nil
	}
}
