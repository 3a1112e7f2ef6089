package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
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
	return func(ctx context.Context, e *env) error {
		if *prompt < 0 || *gen < 2 {
			return usagef("--prompt-tokens >= 0 and --gen-tokens >= 2, please")
		}
		var pb *profile.Backend
		mf.wrap = func(be backend.Backend) backend.Backend {
			pb = profile.New(be)
			return pb
		}
		eng, err := mf.load(ctx, e)
		if err != nil {
			return err
		}
		defer eng.Close()
		o := runtime.BenchOptions{PromptTokens: *prompt, GenTokens: *gen}
		r, err := runtime.Bench(ctx, eng, o)
		if err != nil {
			return err
		}
		pb.On = true
		if _, err := runtime.Bench(ctx, eng, o); err != nil {
			return err
		}
		pb.On = false
		if err := pb.Err(); err != nil {
			return err
		}
		ops, steps := pb.Ops()
		var step time.Duration
		if r.DecodeTPS > 0 {
			step = time.Duration(float64(time.Second) / r.DecodeTPS)
		}
		fmt.Fprintf(e.stdout, "device            %s\n", r.Device)
		fmt.Fprintf(e.stdout, "model             %s\n", r.Model)
		fmt.Fprintf(e.stdout, "decode            %.1f tok/s, %.0f dispatches/token\n", r.DecodeTPS, r.DispatchesPerToken)
		profile.Summarize(ops, steps, step, r.CopyGBps).Print(e.stdout)
		return nil
	}
}
