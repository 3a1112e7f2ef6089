package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/eval"
)

func setupPerplexity(fs *flag.FlagSet) func(context.Context, *env) error {
	var mf modelFlags
	mf.register(fs)
	text := fs.String("text", "", "text file to score (required)")
	asJSON := fs.Bool("json", false, `print {"perplexity": x, "tokens": n} on stdout (with --compare, the divergence's figures too)`)
	compare := fs.String("compare", "", "reference model (for example the same file at full precision): also print the KL divergence of the token distributions against it and how often both rank the same token first, as llama.cpp's perplexity --kl-divergence does")
	compareQuant := fs.String("compare-quant", "f32", "with --compare: the reference's weight storage (like --quant); its KV cache is f32")
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
		var ref *runtime.Engine
		if *compare != "" {
			rf := mf
			rf.quant, rf.kvType, rf.draft, rf.lora, rf.model = *compareQuant, "f32", "", nil, *compare
			if dev, ok := eng.GPU(); ok {
				rf.gpu = dev // one device for both
			}
			if ref, err = rf.load(ctx, e); err != nil {
				return fmt.Errorf("--compare: %w", err)
			}
			defer ref.Close()
		}
		// Progress goes to stderr, so that stdout stays one JSON object.
		var bar *progress
		start := time.Now()
		report := func(done, total int) {
			if bar == nil {
				bar = newProgress(e.stderr, "scoring", int64(total), "tok")
			}
			bar.Set(int64(done))
		}
		var ppl float64
		var n int
		var div *eval.Divergence
		if ref != nil {
			if div, err = eval.Compare(ctx, eng, ref, string(raw), report); err == nil {
				ppl, n = div.PPL, div.Tokens
			}
		} else {
			ppl, n, err = eval.Perplexity(ctx, eng, string(raw), report)
		}
		if bar != nil {
			bar.Finish()
		}
		if err != nil {
			return err
		}
		if *asJSON {
			out := perplexityJSON{Perplexity: ppl, Tokens: n}
			if div != nil {
				out.Compare = divergenceJSON(div)
			}
			return json.NewEncoder(e.stdout).Encode(out)
		}
		fmt.Fprintf(e.stdout, "perplexity %.4f over %d tokens\n", ppl, n)
		if div != nil {
			printDivergence(e, div, *compare)
		}
		fmt.Fprintf(e.stderr, "%s, %s weights, %s kv cache; %.1f tok/s\n", eng.DeviceName(), storageName(mf), eng.KVType(), float64(n)/time.Since(start).Seconds())
		return nil
	}
}

type perplexityJSON struct {
	Perplexity float64         `json:"perplexity"`
	Tokens     int             `json:"tokens"`
	Compare    *comparisonJSON `json:"compare,omitempty"`
}

// comparisonJSON is --compare's figures, named after llama.cpp's.
type comparisonJSON struct {
	RefPerplexity float64            `json:"reference_perplexity"`
	PPLRatio      float64            `json:"ppl_ratio"`
	MeanKLD       float64            `json:"mean_kld"`
	MeanKLDErr    float64            `json:"mean_kld_stderr"`
	KLDPercentile map[string]float64 `json:"kld_percentiles"` // "max", "99.9", …, "median", …, "min"
	SameTop       float64            `json:"same_top_p"`
	SameTopErr    float64            `json:"same_top_p_stderr"`
	RMSDeltaP     float64            `json:"rms_delta_p"`
}

// kldPercentiles are the percentiles llama.cpp prints, with its names.
var kldPercentiles = []struct {
	name string
	p    float64
}{{"Maximum", 100}, {"99.9%", 99.9}, {"99.0%", 99}, {"95.0%", 95}, {"90.0%", 90}, {"Median", 50},
	{"10.0%", 10}, {"5.0%", 5}, {"1.0%", 1}, {"0.1%", 0.1}, {"Minimum", 0}}

func divergenceJSON(d *eval.Divergence) *comparisonJSON {
	mean, merr := d.MeanKLD()
	same, serr := d.SameTopFraction()
	c := &comparisonJSON{RefPerplexity: d.RefPPL, PPLRatio: d.PPL / d.RefPPL, MeanKLD: mean, MeanKLDErr: merr,
		KLDPercentile: map[string]float64{}, SameTop: same, SameTopErr: serr, RMSDeltaP: d.RMSDeltaP()}
	for _, q := range kldPercentiles {
		name := map[string]string{"Maximum": "max", "Median": "median", "Minimum": "min"}[q.name]
		if name == "" {
			name = fmt.Sprint(q.p)
		}
		c.KLDPercentile[name] = d.KLDPercentile(q.p)
	}
	return c
}

// printDivergence prints d in the shape of llama.cpp's KL divergence
// statistics.
func printDivergence(e *env, d *eval.Divergence, refPath string) {
	w := e.stdout
	fmt.Fprintf(w, "reference perplexity %.4f (%s)\n", d.RefPPL, refPath)
	fmt.Fprintf(w, "PPL(Q)/PPL(base)     %.4f\n", d.PPL/d.RefPPL)
	fmt.Fprintln(w, "====== KL divergence statistics ======")
	mean, merr := d.MeanKLD()
	fmt.Fprintf(w, "Mean    KLD: %10.6f ± %9.6f\n", mean, merr)
	for _, q := range kldPercentiles {
		fmt.Fprintf(w, "%-7s KLD: %10.6f\n", q.name, d.KLDPercentile(q.p))
	}
	same, serr := d.SameTopFraction()
	fmt.Fprintf(w, "RMS Δp     : %8.3f %%\n", 100*d.RMSDeltaP())
	fmt.Fprintf(w, "Same top p : %8.3f ± %.3f %%\n", 100*same, 100*serr)
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
