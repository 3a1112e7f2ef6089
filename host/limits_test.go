package host_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/host"
)

// TestMisbehavingPlugins runs plugins that break their policy or crash, each
// beside a well-behaved story plugin on the same engine: the offender is
// stopped with a clear error, and the story comes out right.
func TestMisbehavingPlugins(t *testing.T) {
	eng := load(t, "cpu")
	h := newHost(t, eng)
	good := loadPlugin(t, h, "story", host.Policy{})
	s := story{Prompt: prompts[1], Steps: 150}
	want := s.want(t, eng)

	tests := []struct {
		name   string
		plugin string
		pol    host.Policy
		input  any
		ctx    func() (context.Context, context.CancelFunc)
		err    error  // what errors.Is must find (nil: success)
		detail string // in the error's text
		check  func(t *testing.T, res host.Result, err error)
	}{
		{name: "token budget", plugin: "story", pol: host.Policy{TokenBudget: 40},
			input: story{Prompt: prompts[0], Steps: 100}, err: host.ErrTokenBudget, detail: "40 tokens",
			check: func(t *testing.T, res host.Result, err error) {
				if res.Tokens != 40 {
					t.Errorf("it received %d tokens, the budget is 40", res.Tokens)
				}
			}},
		{name: "within budget", plugin: "story", pol: host.Policy{TokenBudget: 40},
			input: story{Prompt: prompts[0], Steps: 40}},
		{name: "infinite loop", plugin: "testplugin", pol: host.Policy{Timeout: 300 * time.Millisecond},
			input: mode("loop"), err: host.ErrTimeout, detail: "the limit is 300ms",
			check: func(t *testing.T, res host.Result, err error) {
				if res.Elapsed > 5*time.Second {
					t.Errorf("stopped after %s, the limit is 300ms", res.Elapsed)
				}
			}},
		{name: "caller cancels", plugin: "testplugin", input: mode("loop"), err: context.Canceled,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(200*time.Millisecond, cancel)
				return ctx, cancel
			}},
		{name: "memory", plugin: "testplugin", pol: host.Policy{MemoryPages: 256},
			input: map[string]any{"mode": "alloc", "mb": 64}, err: host.ErrMemoryLimit, detail: "of its 256 pages"},
		{name: "memory within limit", plugin: "testplugin", pol: host.Policy{MemoryPages: 1024},
			input: map[string]any{"mode": "alloc", "mb": 16}},
		{name: "flood of calls", plugin: "testplugin", pol: host.Policy{MaxCalls: 10000},
			input: mode("flood"), err: host.ErrCallLimit, detail: "more than 10000"},
		{name: "flood of output", plugin: "testplugin", pol: host.Policy{MaxOutput: 64 << 10},
			input: mode("output-flood"), err: host.ErrPluginFailed, detail: "limit reached",
			check: func(t *testing.T, res host.Result, err error) {
				if len(res.Output) != 64<<10 {
					t.Errorf("output %d bytes, want the limit, %d", len(res.Output), 64<<10)
				}
			}},
		{name: "flood of generations", plugin: "testplugin", pol: host.Policy{MaxGenerations: 2},
			input: mode("open-many"), err: host.ErrPluginFailed, detail: "2 generations are in progress"},
		{name: "panic", plugin: "testplugin", input: mode("panic"), err: host.ErrCrashed, detail: "panic: the plugin panics",
			check: func(t *testing.T, res host.Result, err error) {
				var re *host.RunError
				if !errors.As(err, &re) || !strings.Contains(re.Stderr, "panic: the plugin panics") {
					t.Errorf("the error does not carry the panic: %#v", err)
				}
			}},
		{name: "exit", plugin: "testplugin", input: mode("exit"), err: host.ErrCrashed, detail: "exited with code 3"},
		{name: "plugin error", plugin: "testplugin", input: mode("fail"), err: host.ErrPluginFailed, detail: "the plugin gives up",
			check: func(t *testing.T, res host.Result, err error) {
				if string(res.Output) != "partial" {
					t.Errorf("output %q, want what it returned with its error", res.Output)
				}
			}},
		{name: "bad pointers", plugin: "testplugin", pol: host.Policy{MaxOutput: 256 << 20},
			input: map[string]any{"mode": "badptr", "n": 20000, "seed": 7},
			check: func(t *testing.T, res host.Result, err error) {
				var codes map[string]int
				i := bytes.LastIndex(res.Output, []byte("\n#codes:"))
				if i < 0 {
					t.Fatalf("no codes in the output")
				}
				mustUnmarshal(t, res.Output[i+len("\n#codes:"):], &codes)
				if codes["9"] > 0 {
					t.Errorf("%d calls hit a fault in the host (ErrInternal): %v", codes["9"], codes)
				}
				if codes["2"] == 0 {
					t.Errorf("no call was refused as a bad argument: %v", codes)
				}
				t.Logf("codes: %v", codes)
			}},
		{name: "calls during init", plugin: "testplugin", input: mode("init"),
			check: func(t *testing.T, res host.Result, err error) {
				if string(res.Output) != "6" {
					t.Errorf("a host call from init returned %s, want 6 (ErrState)", res.Output)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadPlugin(t, h, tt.plugin, tt.pol)
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			var wg sync.WaitGroup
			var goodOut string
			var goodErr error
			wg.Go(func() {
				res, err := good.Run(context.Background(), input(t, s))
				goodOut, goodErr = string(res.Output), err
			})
			res, err := p.Run(ctx, input(t, tt.input))
			wg.Wait()
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("run failed: %v", err)
			case tt.err != nil && !errors.Is(err, tt.err):
				t.Fatalf("got error %v, want %v", err, tt.err)
			case tt.err != nil && !strings.Contains(err.Error(), tt.detail):
				t.Errorf("error %q does not say %q", err, tt.detail)
			}
			if err != nil {
				t.Logf("error: %v", err)
			}
			if tt.check != nil {
				tt.check(t, res, err)
			}
			if goodErr != nil || goodOut != want {
				t.Errorf("the well-behaved plugin beside it noticed: %v\n got %q\nwant %q", goodErr, goodOut, want)
			}
			// The engine is left clean: nothing of the offender still runs.
			deadline := time.Now().Add(5 * time.Second)
			for m := eng.Metrics(); m.Running+m.Waiting > 0; m = eng.Metrics() {
				if time.Now().After(deadline) {
					t.Fatalf("sequences left in the engine: %+v", m)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// mode is the test plugin's input for a mode without arguments.
func mode(m string) map[string]any { return map[string]any{"mode": m} }
