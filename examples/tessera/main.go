// Command tessera runs language models on WebGPU or the CPU.
//
//	tessera run   --model PATH [--prompt TEXT] [--steps N] [sampling flags]
//	tessera info  --model PATH
//	tessera pull  hf.co/OWNER/REPO:QUANT
//
// --model also takes a model reference (hf.co/OWNER/REPO:QUANT,
// OWNER/REPO/FILE.gguf or an https URL), pulled into the cache on first use.
//
// Run `tessera help` for every subcommand and flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand: its flags are defined on fs by setup, which
// returns the function that runs it.
type command struct {
	summary string
	setup   func(fs *flag.FlagSet) func(ctx context.Context, env *env) error
}

// env is what a command talks to; tests substitute buffers.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
}

var commands = map[string]command{
	"run":        {"generate text from a prompt", setupRun},
	"info":       {"describe a model file, or the GPU adapters with --device", setupInfo},
	"bench":      {"measure prompt and decode speed", setupBench},
	"profile":    {"where a decode token's time goes: per op kind and layer, bytes and bandwidth of each matrix product", setupProfile},
	"synth":      {"write a random-weight model at a real model's shape", setupSynth},
	"web":        {"serve the browser demo: the engine as wasm on WebGPU", setupWeb},
	"quantize":   {"write a GGUF with 4-bit weight matrices (Q4_0, Q4_K, or Q4_1 calibrated)", setupQuantize},
	"perplexity": {"score a text file: exp of the mean negative log-likelihood", setupPerplexity},
	"tokenize":   {"turn text into token ids, or ids into text with --decode", setupTokenize},
	"embed":      {"print an embedding (a JSON array) per text, or reranking scores with --rerank", setupEmbed},
	"chat":       {"talk with a model through its chat template", setupChat},
	"serve":      {"serve models over an OpenAI-compatible HTTP API", setupServe},
	"pull":       {"download a model (hf.co/OWNER/REPO:QUANT, OWNER/REPO/FILE.gguf, a URL) into the cache", setupPull},
	"ls":         {"list the models in the cache", setupLs},
	"rm":         {"remove a model from the cache", setupRm},
	"replay":     {"run a generation's transcript again (from run --transcript or the server) and report where it departs", setupReplay},

	"bench-serve": {"load-test an OpenAI-compatible server: throughput, TTFT, inter-token latency", setupBenchServe},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// The first interrupt cancels ctx and the command winds down (a
		// model's load is left to finish in the background:
		// runtime.LoadContext); work that does not watch ctx would make
		// it wait, so a second one ends the process at once: the signals'
		// default action is back.
		// chat owns Ctrl-C (it stops a reply) and serve logs its drain:
		// neither says this.
		<-ctx.Done()
		stop()
		if len(os.Args) > 1 && os.Args[1] != "chat" && os.Args[1] != "serve" {
			fmt.Fprintln(os.Stderr, "tessera: stopping (interrupt again to quit at once)")
		}
	}()
	os.Exit(cli(ctx, os.Args[1:], &env{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin}))
}

// cli runs one command line and returns the exit code: 0 on success, 2 for
// bad usage and 1 for a failure.
func cli(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(e.stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "tessera: unknown command %q (try 'tessera help')\n", args[0])
		return 2
	}
	fs := flag.NewFlagSet("tessera "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := cmd.setup(fs)
	rest := args[1:]
	if takesArgs[args[0]] {
		rest = flagsFirst(fs, rest)
	}
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(e.stderr)
			fmt.Fprintf(e.stderr, "tessera %s: %s\n\nflags:\n", args[0], cmd.summary)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(e.stderr, "tessera %s: %v (try 'tessera %s -h')\n", args[0], err, args[0])
		return 2
	}
	if fs.NArg() > 0 && !takesArgs[args[0]] {
		fmt.Fprintf(e.stderr, "tessera %s: unexpected argument %q\n", args[0], fs.Arg(0))
		return 2
	}
	if err := run(ctx, e); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(e.stderr, "tessera %s: %v\n", args[0], err)
			return 2
		}
		fmt.Fprintf(e.stderr, "tessera %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// flagsFirst moves the flags that follow a command's arguments before
// them (tessera pull REF --retries 0), where Go's flag package stops at
// the first argument and would take them for more arguments. After the
// first argument only fs's own flags and -h move, each with its value
// where it takes one; anything else that starts with a dash (a text such
// as "-5 degrees") stays an argument, as does everything after "--".
func flagsFirst(fs *flag.FlagSet, args []string) []string {
	var flags, plain []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			plain = append(plain, args[i+1:]...)
			break
		}
		name, inline := flagName(a)
		f := fs.Lookup(name)
		if name == "" || len(plain) > 0 && f == nil && name != "h" && name != "help" {
			plain = append(plain, a)
			continue
		}
		flags = append(flags, a)
		if f != nil && !inline && takesValue(f) && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	if len(plain) == 0 {
		return flags
	}
	return append(append(flags, "--"), plain...)
}

// flagName is the name of the flag a is (-name, --name, -name=value) and
// whether its value comes with it, or "" where a is no flag.
func flagName(a string) (name string, inline bool) {
	if len(a) < 2 || a[0] != '-' {
		return "", false
	}
	name, _, inline = strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
	return name, inline
}

// takesValue reports whether f reads the next argument as its value:
// every flag but a boolean one.
func takesValue(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// usageError marks an error in the command line rather than in the work.
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: tessera COMMAND [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\n'tessera COMMAND -h' lists a command's flags.")
}

// requireModel checks the --model flag was given.
func requireModel(path string) error {
	if strings.TrimSpace(path) == "" {
		return usagef("--model is required")
	}
	return nil
}
