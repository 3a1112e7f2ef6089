// Command host is an example embedder: it loads a model, loads a Tessera
// plugin under a policy that lets it use that model and nothing else, runs
// it once and prints what it returns.
//
//	go run ./examples/plugin/host --model ../shared/models/stories260K.gguf --plugin bin/story.wasm \
//	    --prompt "Once upon a time" --steps 200 --temperature 0.8
//
// Its defaults are tessera run's: with no --prompt the plugin starts from
// BOS, and --steps counts generated tokens, so the same flags print the
// same story at temperature 0.
//
// The input it gives the plugin is the JSON document examples/plugin/story
// reads ({"prompt", "steps", "temperature", "top_p", "seed"}); other
// plugins get it too and may read what they like of it. The plugin's
// output goes to stdout, a summary of the run to stderr.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/host"
	"github.com/tessera-llm/tessera/runtime"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	model, plugin, device, prompt string
	steps                         int
	temperature, topP             float64
	seed                          int64
	timeout                       time.Duration
	memoryPages                   uint
	verbose                       bool
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("host", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.model, "model", "", "model file: GGUF or llama2.c checkpoint (required)")
	fs.StringVar(&o.plugin, "plugin", "", "plugin: a wasip1 reactor (.wasm) built with the plugin SDK (required)")
	fs.StringVar(&o.device, "device", "auto", "where the model runs: cpu, webgpu or auto")
	fs.StringVar(&o.prompt, "prompt", "", "what the plugin starts from (default: BOS, as tessera run)")
	fs.IntVar(&o.steps, "steps", 200, "tokens to generate at most; also the plugin's token budget")
	fs.Float64Var(&o.temperature, "temperature", 0.8, "sampling temperature; 0 is greedy")
	fs.Float64Var(&o.topP, "top-p", 0.9, "nucleus sampling threshold (1: off)")
	fs.Int64Var(&o.seed, "seed", -1, "random seed (-1: from the clock)")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "wall-clock limit of the plugin's run")
	fs.UintVar(&o.memoryPages, "memory-pages", host.DefaultMemoryPages, "the plugin's memory limit in 64 KiB pages")
	fs.BoolVar(&o.verbose, "v", false, "pass the plugin's standard error through")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.model == "" || o.plugin == "":
		fs.Usage()
		return o, errors.New("--model and --plugin are required")
	case o.steps <= 0:
		return o, fmt.Errorf("--steps %d must be positive", o.steps)
	case o.temperature < 0:
		return o, fmt.Errorf("--temperature %g must be >= 0", o.temperature)
	}
	if o.seed < 0 {
		o.seed = time.Now().UnixNano() & (1<<63 - 1)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	wasm, err := os.ReadFile(o.plugin)
	if err != nil {
		return err
	}
	eng, err := runtime.Load(o.model, runtime.Options{Device: o.device})
	if err != nil {
		return err
	}
	defer eng.Close()
	if note := eng.DeviceNote(); note != "" {
		fmt.Fprintln(stderr, note)
	}
	name := strings.TrimSuffix(filepath.Base(o.model), filepath.Ext(o.model))
	h, err := host.New(host.Options{Models: []host.Model{{Name: name, Engine: eng}}})
	if err != nil {
		return err
	}
	defer h.Close(context.Background())
	pol := host.Policy{
		Models:      []string{name},
		TokenBudget: o.steps,
		Timeout:     o.timeout,
		MemoryPages: uint32(o.memoryPages),
	}
	if o.verbose {
		pol.Stderr = stderr
	}
	p, err := h.Load(ctx, filepath.Base(o.plugin), wasm, pol)
	if err != nil {
		return err
	}
	input, err := json.Marshal(map[string]any{
		"prompt": o.prompt, "steps": o.steps, "temperature": o.temperature, "top_p": o.topP, "seed": o.seed,
	})
	if err != nil {
		return err
	}
	res, err := p.Run(ctx, input)
	stdout.Write(res.Output)
	if len(res.Output) > 0 && res.Output[len(res.Output)-1] != '\n' {
		fmt.Fprintln(stdout)
	}
	if err != nil {
		return err
	}
	rate := 0.0
	if s := res.Elapsed.Seconds(); s > 0 {
		rate = float64(res.Tokens) / s
	}
	major, minor := p.ABIVersion()
	fmt.Fprintf(stderr, "%s on %s: plugin ABI %d.%d, %d prompt tokens, %d generated in %d generations, %d host calls, %d memory pages, %s (%.1f tok/s); seed %d\n",
		p.Name(), eng.Backend().Name(), major, minor, res.PromptTokens, res.Tokens, res.Generations, res.Calls, res.MemoryPages,
		res.Elapsed.Round(time.Millisecond), rate, o.seed)
	return nil
}
