package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/tessera-llm/tessera/runtime"
)

// setupReplay is `tessera replay FILE`: the transcript's generation runs
// again on the model (the transcript's own file unless --model names
// another with the same SHA-256) and device given, and the command says
// whether it reproduced it: every token, or the first that differs, and
// how far the log-probabilities moved. It exits 1 when the run departs,
// so that a script can tell.
func setupReplay(fs *flag.FlagSet) func(context.Context, *env) error {
	var mf modelFlags
	mf.register(fs)
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	return func(ctx context.Context, e *env) error {
		if fs.NArg() != 1 {
			return usagef("replay takes one transcript file: tessera replay --model FILE [--device D] TRANSCRIPT")
		}
		b, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			return err
		}
		var tr runtime.Transcript
		if err := json.Unmarshal(b, &tr); err != nil {
			return fmt.Errorf("%s is no transcript: %w", fs.Arg(0), err)
		}
		if err := tr.Check(); err != nil {
			return fmt.Errorf("%s: %w", fs.Arg(0), err)
		}
		if mf.model == "" {
			return usagef("--model is required: the file the transcript's model (%s, sha256 %s) is in", tr.Model.Name, tr.Model.SHA256)
		}
		eng, err := mf.load(ctx, e)
		if err != nil {
			return err
		}
		defer eng.Close()
		r, err := eng.Replay(ctx, &tr)
		if err != nil {
			return err
		}
		if *jsonOut {
			enc := json.NewEncoder(e.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(r); err != nil {
				return err
			}
		} else {
			fp := "the same fingerprint: the contract binds them bit for bit on the CPU"
			if !r.SameFingerprint {
				fp = fmt.Sprintf("another fingerprint (%s, was %s on %s): greedy tokens are bound, log-probabilities within the contract's tolerance", eng.Fingerprint(), tr.Fingerprint, tr.Backend)
			}
			fmt.Fprintf(e.stdout, "%s on %s, %s\n", tr.Model.Name, eng.BackendName(), fp)
			if r.Diverged < 0 {
				fmt.Fprintf(e.stdout, "reproduced: all %d tokens, log-probabilities within %.3g\n", r.Tokens, r.MaxDelta)
			} else {
				fmt.Fprintf(e.stdout, "departs at token %d: the transcript has %s, this run %s; the %d tokens before agree, log-probabilities within %.3g\n",
					r.Diverged, tokenName(eng, r.Want), tokenName(eng, r.Got), r.Tokens, r.MaxDelta)
			}
		}
		if r.Diverged >= 0 {
			return fmt.Errorf("the run departs from the transcript at token %d", r.Diverged)
		}
		return nil
	}
}

// tokenName shows a token of a report: its id and text, or "nothing".
func tokenName(eng *runtime.Engine, id int32) string {
	if id < 0 {
		return "nothing (it ended)"
	}
	return fmt.Sprintf("%d %q", id, eng.Tokenizer().Decode([]int{int(id)}))
}

// writeJSONFile writes v as indented JSON to path.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
