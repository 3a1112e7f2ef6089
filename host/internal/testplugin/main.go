//go:build wasip1

// Command testplugin is a plugin that misbehaves on request, for the host's
// tests: its input is {"mode": ..., ...} and each mode tries one thing a
// plugin should not be able to get away with (or one thing it should be
// able to do). Build it with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/wasm/plugin"
	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// input is the test's request.
type input struct {
	Mode    string         `json:"mode"`
	Path    string         `json:"path"`
	Addr    string         `json:"addr"`
	N       int            `json:"n"`
	MB      int            `json:"mb"`
	Seed    uint64         `json:"seed"`
	Request plugin.Request `json:"request"`
}

// initCode is what a host call made during initialization returned.
var initCode abi.Code

func init() {
	_, err := plugin.Models()
	var pe *plugin.Error
	if errors.As(err, &pe) {
		initCode = pe.Code
	}
	plugin.Handle(handle)
}

func main() {}

var sink []byte

func handle(ctx context.Context, raw []byte) ([]byte, error) {
	var in input
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	switch in.Mode {
	case "echo":
		return raw, nil
	case "fail":
		return []byte("partial"), errors.New("the plugin gives up")
	case "init":
		return []byte(fmt.Sprint(uint32(initCode))), nil
	case "loop":
		n := 0
		for {
			n++
			if n < 0 {
				return nil, nil
			}
		}
	case "panic":
		panic("the plugin panics")
	case "exit":
		os.Exit(3)
	case "alloc":
		var keep [][]byte
		for range in.MB {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = byte(i)
			}
			keep = append(keep, b)
		}
		return []byte(fmt.Sprint(len(keep))), nil
	case "flood":
		for i := 0; in.N <= 0 || i < in.N; i++ {
			if _, err := plugin.CountTokens("", "hello"); err != nil {
				return nil, err
			}
		}
		return []byte("done"), nil
	case "output-flood":
		chunk := []byte(strings.Repeat("x", 1<<10))
		for {
			if err := plugin.Output(chunk); err != nil {
				return nil, err
			}
		}
	case "open-many":
		var gens []*plugin.Generation
		for {
			g, err := plugin.Start(plugin.Request{Prompt: "Once", MaxTokens: 1})
			if err != nil {
				return []byte(fmt.Sprint(len(gens))), err
			}
			gens = append(gens, g)
		}
	case "generate":
		return generate(ctx, in.Request)
	case "generate-many":
		// Pull n generations in turns, as a plugin comparing candidates might.
		gens := make([]*plugin.Generation, in.N)
		outs := make([]strings.Builder, in.N)
		for i := range gens {
			req := in.Request
			req.Seed = uint64(i)
			g, err := plugin.Start(req)
			if err != nil {
				return nil, err
			}
			defer g.Close()
			gens[i] = g
		}
		for live := len(gens); live > 0; {
			live = 0
			for i, g := range gens {
				t, err := g.Next()
				if err != nil {
					continue
				}
				live++
				outs[i].WriteString(t.Text)
			}
		}
		var all []string
		for i := range outs {
			all = append(all, outs[i].String())
		}
		return json.Marshal(all)
	case "generate-seq":
		// n generations one after the other; a failure is recorded, not returned.
		var all []string
		for range in.N {
			text, err := plugin.GenerateText(ctx, in.Request)
			if err != nil {
				text = "error: " + err.Error()
			}
			all = append(all, text)
		}
		return json.Marshal(all)
	case "tokens":
		ids, err := plugin.Tokenize("", in.Request.Prompt, true)
		if err != nil {
			return nil, err
		}
		text, err := plugin.Detokenize("", ids)
		if err != nil {
			return nil, err
		}
		n, err := plugin.CountTokens("", in.Request.Prompt)
		if err != nil {
			return nil, err
		}
		return json.Marshal(map[string]any{"ids": ids, "text": text, "count": n})
	case "models":
		ms, err := plugin.Models()
		if err != nil {
			return nil, err
		}
		return json.Marshal(ms)
	case "cancel":
		g, err := plugin.Start(in.Request)
		if err != nil {
			return nil, err
		}
		defer g.Close()
		if _, err := g.Next(); err != nil {
			return nil, err
		}
		g.Cancel()
		for {
			if _, err := g.Next(); err != nil {
				return []byte(err.Error()), nil
			}
		}
	case "badptr":
		return badPointers(in.N, in.Seed)
	case "read":
		b, err := os.ReadFile(in.Path)
		if err != nil {
			return nil, err
		}
		return b, nil
	case "write":
		return nil, os.WriteFile(in.Path, []byte("written by a plugin"), 0o644)
	case "escape":
		return escape(in.Path)
	case "dial":
		c, err := net.Dial("tcp", in.Addr)
		if err != nil {
			return nil, err
		}
		c.Close()
		return []byte("connected"), nil
	case "clock":
		return []byte(time.Now().UTC().Format(time.RFC3339)), nil
	case "random":
		b := make([]byte, 16)
		rand.Read(b)
		return []byte(hex.EncodeToString(b)), nil
	}
	return nil, fmt.Errorf("unknown mode %q", in.Mode)
}

func generate(ctx context.Context, req plugin.Request) ([]byte, error) {
	text, err := plugin.GenerateText(ctx, req)
	return []byte(text), err
}
