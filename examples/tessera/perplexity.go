package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

func setupPerplexity(fs *flag.FlagSet) func(context.Context, *env) error {
	var mf modelFlags
	mf.register(fs)
	text := fs.String("text", "", "text file to score (required)")
	asJSON := fs.Bool("json", false, `print {"perplexity": x, "tokens": n} on stdout`)
	return func(ctx context.Context, e *env) error {
		if *text == "" {
			return usagef("--text is required")
		}
		raw, err := os.ReadFile(*text)
		if err != nil {
			return err
		}
		eng, err := mf.load(ctx, e)
		if err != nil {
			return err
		}
		defer eng.Close()
		// Progress goes to stderr, so that stdout stays one JSON object.
		var bar *progress
		start := time.Now()
		ppl, n, err := eng.Perplexity(ctx, string(raw), func(done, total int) {
			if bar == nil {
				bar = newProgress(e.stderr, "scoring", int64(total), "tok")
			}
			bar.Set(int64(done))
		})
		if bar != nil {
			bar.Finish()
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(e.stdout).Encode(struct {
				Perplexity float64 `json:"perplexity"`
				Tokens     int     `json:"tokens"`
			}{ppl, n})
		}
		fmt.Fprintf(e.stdout, "perplexity %.4f over %d tokens\n", ppl, n)
		fmt.Fprintf(e.stderr, "%s, %s weights; %.1f tok/s\n", eng.DeviceName(), storageName(mf), float64(n)/time.Since(start).Seconds())
		return nil
	}
}

// storageName says which weight storage the flags chose.
func storageName(mf modelFlags) string {
	s := mf.quant
	if s == "" {
		s = "default (the file's own; float matrices mixed on WebGPU from 32 MiB)"
	}
	if mf.noCalibration {
		s += ", uncalibrated"
	}
	if mf.headF32 {
		s += " with an f32 head"
	}
	return s
}
