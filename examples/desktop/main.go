//go:build cgo

// Command desktop is a desktop chat window for Tessera models, built with
// Cogent Core. The window is drawn through the same WebGPU stack
// (github.com/cogentcore/webgpu) that Tessera computes with, so one GPU
// serves both; without an adapter the model runs on the CPU and the window
// says so.
//
//	go run ./examples/desktop --model ../shared/models/stories260K.gguf
//
// For tests and demos the window can be driven from flags: --prompt fills
// the message box, --autosend sends it once the model is loaded,
// --screenshot saves a PNG of the window after the reply, and
// --exit-after-reply quits then. The reply is printed to stdout as well.
//
// The window needs cgo (its WebGPU is wgpu-native, a C library), so a
// CPU-only build (CGO_ENABLED=0 go build ./...) leaves this command out.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

// defaultModel is preselected when it exists and --model is not given.
const defaultModel = "../shared/models/stories260K.gguf"

// config is what the flags say.
type config struct {
	model          string
	device         string
	maxTokens      int
	temperature    float64
	topP           float64
	seed           int64
	prompt         string
	autosend       bool
	exitAfterReply bool
	screenshot     string
}

func main() {
	start := time.Now()
	var c config
	flag.StringVar(&c.model, "model", "", "model file to load at start (default "+defaultModel+" if present)")
	flag.StringVar(&c.device, "device", "auto", "where the model runs: auto, webgpu or cpu")
	flag.IntVar(&c.maxTokens, "max-tokens", 256, "longest reply in tokens")
	flag.Float64Var(&c.temperature, "temperature", 0.8, "sampling temperature (0: greedy)")
	flag.Float64Var(&c.topP, "top-p", 0.9, "nucleus sampling threshold (1: off)")
	flag.Int64Var(&c.seed, "seed", -1, "sampling seed (-1: a new one for every reply)")
	flag.StringVar(&c.prompt, "prompt", "", "text to put in the message box")
	flag.BoolVar(&c.autosend, "autosend", false, "send --prompt once the model is loaded")
	flag.BoolVar(&c.exitAfterReply, "exit-after-reply", false, "quit after the first reply (and the screenshot)")
	flag.StringVar(&c.screenshot, "screenshot", "", "save a PNG of the window to this file after the first reply")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "desktop: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if c.model == "" {
		if _, err := os.Stat(defaultModel); err == nil {
			c.model = defaultModel
		}
	}
	if c.autosend && c.prompt == "" {
		fmt.Fprintln(os.Stderr, "desktop: --autosend needs a --prompt")
		os.Exit(2)
	}
	switch c.device {
	case "auto", "webgpu", "cpu":
	default:
		fmt.Fprintf(os.Stderr, "desktop: --device %q: want auto, webgpu or cpu\n", c.device)
		os.Exit(2)
	}
	os.Exit(newApp(c, start).run())
}
