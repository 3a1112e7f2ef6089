package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
)

func setupSynth(fs *flag.FlagSet) func(context.Context, *env) error {
	shape := fs.String("shape", "", "model shape: "+strings.Join(synth.Names(), ", ")+" (required)")
	out := fs.String("out", "", "output GGUF file (required)")
	typ := fs.String("type", "f32", "weight type: f32 or f16")
	seed := fs.Uint64("seed", 1, "random seed of the weights")
	return func(ctx context.Context, e *env) error {
		if *shape == "" || *out == "" {
			return usagef("--shape and --out are required")
		}
		s, err := synth.Lookup(*shape)
		if err != nil {
			return usageError{err}
		}
		t := map[string]dtype.Type{"f32": dtype.F32, "f16": dtype.F16}[strings.ToLower(*typ)]
		if t == 0 && strings.ToLower(*typ) != "f32" {
			return usagef("--type %q (want f32 or f16)", *typ)
		}
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(f, 1<<20)
		err = synth.Write(w, s, t, *seed)
		if err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(*out)
			return fmt.Errorf("write %s: %w", *out, err)
		}
		fmt.Fprintf(e.stderr, "wrote %s: %s shape, %s weights\n", *out, s.Name, t)
		return nil
	}
}
