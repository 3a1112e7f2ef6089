package host_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/host"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/wasm/plugin/abi"
)

// TestLoadRefuses: modules that are not plugins of an ABI this host
// serves are refused at Load, with a reason.
func TestLoadRefuses(t *testing.T) {
	h := newHost(t, load(t, "cpu"))
	tests := []struct {
		name   string
		wasm   func(t *testing.T) []byte
		pol    host.Policy
		err    error
		detail string
	}{
		{"newer major version", func(t *testing.T) []byte { return wasm(t, "oldabi") }, host.Policy{}, host.ErrABIVersion, "speaks ABI 2.0"},
		{"unknown host function", func(t *testing.T) []byte { return wasm(t, "unknownimport") }, host.Policy{}, host.ErrABIVersion, "tessera.summon_demons"},
		{"a WASI command", func(t *testing.T) []byte { return wasm(t, "command") }, host.Policy{}, host.ErrNotPlugin, "-buildmode=c-shared"},
		{"not wasm", func(*testing.T) []byte { return []byte("#!/bin/sh\necho hi\n") }, host.Policy{}, host.ErrNotPlugin, ""},
		{"empty", func(*testing.T) []byte { return nil }, host.Policy{}, host.ErrNotPlugin, ""},
		{"memory limit below its minimum", func(t *testing.T) []byte { return wasm(t, "story") }, host.Policy{MemoryPages: 8}, host.ErrMemoryLimit, "over limit of 8 pages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := tt.pol
			pol.Models = []string{modelName}
			p, err := h.Load(context.Background(), tt.name, tt.wasm(t), pol)
			if err == nil {
				p.Close(context.Background())
				t.Fatal("loaded")
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("error %v, want %v", err, tt.err)
			}
			if !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("error %q does not say %q", err, tt.detail)
			}
			t.Logf("%v", err)
		})
	}
	t.Run("unknown model in the policy", func(t *testing.T) {
		_, err := h.Load(context.Background(), "story", wasm(t, "story"), host.Policy{Models: []string{"gpt-9"}})
		if err == nil || !strings.Contains(err.Error(), "gpt-9") {
			t.Errorf("error %v, want one naming the model", err)
		}
	})
}

// TestHostAPI exercises the host functions through the SDK: models,
// tokenizing, counting, cancelling and chats.
func TestHostAPI(t *testing.T) {
	eng := load(t, "cpu")
	h := newHost(t, eng)
	tok := eng.Tokenizer()
	text := "Once upon a time, there was a little cat named Tom. He liked to play."
	var wantIDs []int32
	for _, id := range tok.Encode(text, true) {
		wantIDs = append(wantIDs, int32(id))
	}
	chat := []abi.Message{{Role: "user", Content: "Tell me a story"}, {Role: "assistant", Content: "Once upon a time"}}
	tales, err := synth.LoRA(eng.Model().Config, 8, nil, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.AddAdapter("tales", tales, 1); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		pol   host.Policy
		input map[string]any
		check func(t *testing.T, out []byte, err error)
	}{
		{"models", host.Policy{}, mode("models"), func(t *testing.T, out []byte, err error) {
			var ms []abi.Model
			mustUnmarshal(t, out, &ms)
			c := eng.Model().Config
			if len(ms) != 1 || ms[0].Name != modelName || ms[0].Context != c.Context || ms[0].Vocab != c.Vocab || ms[0].EOS != tok.EOS() {
				t.Errorf("models %+v", ms)
			}
		}},
		{"no models granted", host.Policy{Models: []string{}}, mode("models"), func(t *testing.T, out []byte, err error) {
			if string(out) != "[]" {
				t.Errorf("models %s, want []", out)
			}
		}},
		{"generate without a model", host.Policy{Models: []string{}}, map[string]any{"mode": "generate", "request": map[string]any{"prompt": "Hi"}},
			func(t *testing.T, out []byte, err error) {
				if !errors.Is(err, host.ErrPluginFailed) || !strings.Contains(err.Error(), "not found") {
					t.Errorf("error %v, want the plugin to fail with not found", err)
				}
			}},
		{"tokenize, detokenize, count", host.Policy{}, map[string]any{"mode": "tokens", "request": map[string]any{"prompt": text}},
			func(t *testing.T, out []byte, err error) {
				var got struct {
					IDs   []int32 `json:"ids"`
					Text  string  `json:"text"`
					Count int     `json:"count"`
				}
				mustUnmarshal(t, out, &got)
				if !equalIDs(got.IDs, wantIDs) || got.Text != text || got.Count != len(wantIDs) {
					t.Errorf("got %+v\nwant ids %v, text %q, count %d", got, wantIDs, text, len(wantIDs))
				}
			}},
		{"text over the limit", host.Policy{MaxText: 16}, map[string]any{"mode": "tokens", "request": map[string]any{"prompt": text}},
			func(t *testing.T, out []byte, err error) {
				if err == nil || !strings.Contains(err.Error(), "limit reached") {
					t.Errorf("error %v, want the tokenizer call refused", err)
				}
			}},
		{"chat, rendered by the engine", host.Policy{}, map[string]any{"mode": "generate", "request": map[string]any{"messages": chat, "max_tokens": 40}},
			func(t *testing.T, out []byte, err error) {
				// stories260K has no template: the engine's plain format.
				want := generate(t, eng, runtime.Request{Prompt: "User: Tell me a story\nAssistant: Once upon a time\nAssistant:", MaxTokens: 40})
				if string(out) != want {
					t.Errorf("chat:\n got %q\nwant %q", out, want)
				}
			}},
		{"a LoRA adapter, scaled", host.Policy{}, map[string]any{"mode": "generate", "request": map[string]any{"prompt": "Once upon a time", "max_tokens": 30,
			"adapters": []map[string]any{{"name": "tales", "scale": 0.5}}}},
			func(t *testing.T, out []byte, err error) {
				req := runtime.Request{Prompt: "Once upon a time", MaxTokens: 30}
				base := generate(t, eng, req)
				req.Adapters = []runtime.AdapterRef{{Name: "tales", Scale: 0.5}}
				want := generate(t, eng, req)
				req.Adapters[0].Scale = 1
				if string(out) != want || want == base || want == generate(t, eng, req) {
					t.Errorf("with tales at 0.5: %q, want %q (without: %q)", out, want, base)
				}
			}},
		{"an adapter the model does not have", host.Policy{}, map[string]any{"mode": "generate", "request": map[string]any{"prompt": "x",
			"adapters": []map[string]any{{"name": "poems"}}}},
			func(t *testing.T, out []byte, err error) {
				if err == nil || !strings.Contains(err.Error(), "invalid argument") || !strings.Contains(err.Error(), "poems") {
					t.Errorf("error %v, want invalid argument naming the adapter", err)
				}
			}},
		{"prompt and messages", host.Policy{}, map[string]any{"mode": "generate", "request": map[string]any{"prompt": "x", "messages": chat}},
			func(t *testing.T, out []byte, err error) {
				if err == nil || !strings.Contains(err.Error(), "invalid argument") {
					t.Errorf("error %v, want invalid argument", err)
				}
			}},
		{"bad sampling", host.Policy{}, map[string]any{"mode": "generate", "request": map[string]any{"prompt": "x", "top_p": 2}},
			func(t *testing.T, out []byte, err error) {
				// Named as the request spells it, in every home's words (wire).
				if err == nil || !strings.Contains(err.Error(), "top_p must be between 0 and 1, not 2") {
					t.Errorf("error %v, want the option named", err)
				}
			}},
		{"prompt longer than the context", host.Policy{MaxText: 1 << 20}, map[string]any{"mode": "generate", "request": map[string]any{"prompt": strings.Repeat("The dog ran. ", 400)}},
			func(t *testing.T, out []byte, err error) {
				if err == nil || !strings.Contains(err.Error(), "limit reached") {
					t.Errorf("error %v, want the context's limit", err)
				}
			}},
		{"cancel", host.Policy{}, map[string]any{"mode": "cancel", "request": map[string]any{"prompt": "Once upon a time", "max_tokens": 300}},
			func(t *testing.T, out []byte, err error) {
				if !strings.Contains(string(out), "canceled") {
					t.Errorf("after cancelling, Next said %q", out)
				}
			}},
		{"budget spent", host.Policy{TokenBudget: 30}, map[string]any{"mode": "generate-seq", "n": 2, "request": map[string]any{"prompt": "Once", "max_tokens": 0}},
			func(t *testing.T, out []byte, err error) {
				// max_tokens 0 takes what is left of the budget; the next
				// generation is then refused, and the plugin carries on.
				var got []string
				mustUnmarshal(t, out, &got)
				if err != nil || len(got) != 2 || got[0] == "" || !strings.Contains(got[1], "token budget of 30 is spent") {
					t.Errorf("got %q, %v", got, err)
				}
			}},
		{"budget overrun by concurrent generations", host.Policy{TokenBudget: 30}, map[string]any{"mode": "generate-many", "n": 2, "request": map[string]any{"prompt": "Once", "max_tokens": 0}},
			func(t *testing.T, out []byte, err error) {
				// Both take the budget left when they open: together they
				// ask for more than it, and the plugin is stopped.
				if !errors.Is(err, host.ErrTokenBudget) {
					t.Errorf("error %v, want ErrTokenBudget", err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadPlugin(t, h, "testplugin", tt.pol)
			res, err := p.Run(context.Background(), input(t, tt.input))
			if err != nil {
				t.Logf("%v", err)
			}
			tt.check(t, res.Output, err)
		})
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestHostClose: closing the host stops a run in progress, and the
// plugin refuses runs afterwards.
func TestHostClose(t *testing.T) {
	h := newHost(t, load(t, "cpu"))
	p := loadPlugin(t, h, "testplugin", host.Policy{Timeout: -1})
	done := make(chan error)
	go func() {
		_, err := p.Run(context.Background(), input(t, mode("loop")))
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // into its loop
	if err := h.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the run survived the host's closing")
		}
		t.Logf("%v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the run outlived the host's closing by 10s")
	}
	if _, err := p.Run(context.Background(), nil); !errors.Is(err, host.ErrClosed) {
		t.Errorf("run after close: %v, want ErrClosed", err)
	}
}
