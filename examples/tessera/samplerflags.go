package main

import (
	"flag"
	"time"

	"github.com/tessera-llm/tessera/runtime"
)

// samplerFlags registers the sampling flags that run and bench share,
// with their own defaults of temperature and top-p (run samples, bench
// measures greedy decoding unless told otherwise); the function returned
// reads them into validated options after parsing.
func samplerFlags(fs *flag.FlagSet, temperature, topP float64) func() (runtime.SamplerOptions, error) {
	var so runtime.SamplerOptions
	temp := fs.Float64("temperature", temperature, "sampling temperature; 0 is greedy")
	fs.IntVar(&so.TopK, "top-k", 0, "sample among the K most likely tokens (0: all)")
	tp := fs.Float64("top-p", topP, "nucleus sampling threshold (1: off)")
	minP := fs.Float64("min-p", 0, "drop tokens below this fraction of the most likely")
	rep := fs.Float64("repeat-penalty", 1, "penalty for recently seen tokens (1: off)")
	fs.IntVar(&so.RepeatLastN, "repeat-last-n", 64, "how many recent tokens the penalty looks at")
	seed := fs.Int64("seed", -1, "random seed (-1: from the clock)")
	return func() (runtime.SamplerOptions, error) {
		so.Temperature, so.TopP, so.MinP, so.RepeatPenalty = float32(*temp), float32(*tp), float32(*minP), float32(*rep)
		if *seed < 0 {
			so.Seed = uint64(time.Now().UnixNano())
		} else {
			so.Seed = uint64(*seed)
		}
		if err := so.Validate(); err != nil {
			return so, usageError{err}
		}
		return so, nil
	}
}
