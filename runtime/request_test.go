package runtime_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// TestStopStrings: a stop string spanning tokens ends the generation at
// the token that completes it, and neither it nor what follows is emitted.
func TestStopStrings(t *testing.T) {
	for name, eng := range engines(t, runtime.Options{}) {
		t.Run(name, func(t *testing.T) {
			req := runtime.Request{Prompt: storyPrompts[0], MaxTokens: 80}
			ids, text, _ := generate(t, eng, req)
			// A stop that begins inside one token and ends in a later one.
			var pre strings.Builder
			tok := eng.Tokenizer()
			prev := int(ids[0])
			var cut []int // text length after each token
			for _, id := range ids {
				pre.Write(tok.TokenBytes(prev, int(id)))
				prev = int(id)
				cut = append(cut, pre.Len())
			}
			k := len(ids) / 2
			from, to := cut[k-1]-1, cut[k+1]-1
			stop := text[from:to]
			if strings.Index(text, stop) != from {
				t.Skipf("stop %q occurs earlier in %q", stop, text)
			}
			req.Stop = []string{"never there", stop}
			got, gotText, st := generate(t, eng, req)
			if gotText != text[:from] || st.Stop != stop {
				t.Errorf("with stop %q: text %q (stop %q), want %q", stop, gotText, st.Stop, text[:from])
			}
			if want := ids[:k+2]; !equal(got, want) || st.Generated != k+2 {
				t.Errorf("tokens %v (%d generated), want %v", got, st.Generated, want)
			}
		})
	}
}

// TestLogprobsMatchScore: each token's log-probability is the log-softmax
// of the logits Score computes for the same position, and greedy's token
// is the most likely alternative.
func TestLogprobsMatchScore(t *testing.T) {
	for name, eng := range engines(t, runtime.Options{}) {
		t.Run(name, func(t *testing.T) {
			req := runtime.Request{Prompt: storyPrompts[1], MaxTokens: 12, Logprobs: true, TopLogprobs: 3}
			prompt, err := eng.PromptTokens(req)
			if err != nil {
				t.Fatal(err)
			}
			var toks []runtime.Token
			_, err = eng.Generate(context.Background(), req, func(tk runtime.Token) error {
				if tk.ID >= 0 {
					toks = append(toks, tk)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			all := append([]int32{}, prompt...)
			for _, tk := range toks {
				all = append(all, tk.ID)
			}
			err = eng.Score(context.Background(), all, func(i int, logits []float32) error {
				g := i + 1 - len(prompt) // the generated token this row predicts
				if g < 0 {
					return nil
				}
				mx := math.Inf(-1)
				for _, v := range logits {
					mx = max(mx, float64(v))
				}
				var sum float64
				for _, v := range logits {
					sum += math.Exp(float64(v) - mx)
				}
				want := float64(logits[all[i+1]]) - mx - math.Log(sum)
				tk := toks[g]
				if math.Abs(float64(tk.Logprob)-want) > 1e-4 {
					t.Errorf("token %d: logprob %g, Score gives %g", g, tk.Logprob, want)
				}
				if len(tk.Top) != 3 || tk.Top[0].ID != tk.ID || tk.Top[0].Logprob < tk.Top[1].Logprob || tk.Top[1].Logprob < tk.Top[2].Logprob {
					t.Errorf("token %d (%d): alternatives %v", g, tk.ID, tk.Top)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStartN: parallel samples are what Start gives with seeds Seed+i, and
// all but the first find the prompt's blocks in the prefix cache.
func TestStartN(t *testing.T) {
	for name, eng := range engines(t, runtime.Options{}) {
		t.Run(name, func(t *testing.T) {
			prompt := strings.Repeat("Tom had a big red ball and a small blue car. ", 3)
			req := runtime.Request{Prompt: prompt, MaxTokens: 20, Sampler: runtime.SamplerOptions{Temperature: 1, Seed: 40}}
			const n = 4
			var want [n][]int32
			for i := range n {
				r := req
				r.Sampler.Seed += uint64(i)
				want[i], _, _ = generate(t, eng, r)
			}
			// A fresh engine, so that nothing is cached yet.
			eng := reload(t, eng)
			sts, err := eng.StartN(context.Background(), req, n)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range sts {
				var got []int32
				for tk, err := range st.Tokens() {
					if err != nil {
						t.Fatal(err)
					}
					if tk.ID >= 0 {
						got = append(got, tk.ID)
					}
				}
				if !equal(got, want[i]) {
					t.Errorf("sample %d: %v, want %v", i, got, want[i])
				}
			}
			// Every sample but the first shares the prompt's full blocks
			// but the one holding its last token.
			kv := eng.Metrics().KV
			bs, promptLen := eng.KVBlockSize(), sts[0].Stats().PromptTokens
			if want := (n - 1) * ((promptLen - 1) / bs * bs); kv.PrefixHits < want {
				t.Errorf("prefix hits %d of %d lookups, want at least %d", kv.PrefixHits, kv.PrefixLookups, want)
			}
			if _, err := eng.StartN(context.Background(), req, runtime.MaxSamples+1); err == nil {
				t.Error("StartN took too many samples")
			}
		})
	}
}

// reload loads eng's model again on the same device, as a fresh engine.
func reload(t *testing.T, eng *runtime.Engine) *runtime.Engine {
	t.Helper()
	if eng.Backend().Name() == "cpu" {
		e, err := runtime.Load(eng.Model().Path, runtime.Options{Device: "cpu"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	return loadWebGPU(t, eng.Model().Path, runtime.Options{})
}

// TestYieldBetweenSteps: Options.Yield runs after every step, where a
// browser hands its event loop a turn; a cancellation that arrives there
// stops the generation at the next step.
func TestYieldBetweenSteps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// As a browser's turn would, each yield lets the reader take the
	// tokens made so far (one per step) before the engine goes on.
	var n atomic.Int32
	yields := 0
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu", Yield: func() {
		yields++
		for deadline := time.Now().Add(5 * time.Second); int(n.Load()) < yields && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		if yields == 10 {
			cancel() // what an abort message handled in that turn does
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	_, err = eng.Generate(ctx, runtime.Request{Prompt: "Once", MaxTokens: 500, IgnoreEOS: true}, func(tok runtime.Token) error {
		if tok.ID >= 0 {
			n.Add(1)
		}
		return nil
	})
	if got := n.Load(); !errors.Is(err, context.Canceled) || got < 9 || got > 11 {
		t.Errorf("cancelled in the 10th yield: %d tokens, error %v; want about 10 and context.Canceled", got, err)
	}
}

// TestHugePromptRefused: prompts of megabytes, plain and in a chat
// message, of shapes that made SentencePiece's merges quadratic (one
// character repeated, no spaces; many spaces; mixed scripts), are refused
// with ErrContextFull as soon as they are known not to fit, not after
// they are all tokenized (before, a megabyte took about half an hour);
// a cancelled request's prompt is not tokenized at all.
func TestHugePromptRefused(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for name, text := range map[string]string{
		"one character": strings.Repeat("a", 4<<20),
		"spaces":        strings.Repeat(" ", 4<<20),
		"words":         strings.Repeat("Once upon a time ", 1<<18),
		"scripts":       strings.Repeat("é中𝄞a ", 1<<18),
	} {
		t.Run(name, func(t *testing.T) {
			for _, req := range []runtime.Request{
				{Prompt: text, MaxTokens: 1},
				{Messages: []chat.Message{{Role: "user", Content: text}}, MaxTokens: 1},
			} {
				if _, err := eng.Start(context.Background(), req); !errors.Is(err, runtime.ErrContextFull) {
					t.Errorf("Start: %v, want ErrContextFull", err)
				}
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := eng.PromptTokensContext(ctx, runtime.Request{Prompt: "Once upon a time"}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled request's prompt: %v", err)
	}
}
