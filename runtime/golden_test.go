package runtime_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
)

// shared is where the project's real test models live.
var shared = filepath.Join("..", "..", "shared", "models")

func sharedFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(shared, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("test model missing: %v", err)
	}
	return p
}

// goldenIDs reads stories260K.greedy200.ids: llama2.c's greedy tokens.
func goldenIDs(t testing.TB) []int32 {
	t.Helper()
	raw, err := os.ReadFile(sharedFile(t, "stories260K.greedy200.ids"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int32
	for _, f := range strings.Fields(string(raw)) {
		v, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, int32(v))
	}
	return ids
}

// generate runs req on eng and returns the ids and the text.
func generate(t testing.TB, eng *runtime.Engine, req runtime.Request) ([]int32, string, runtime.Stats) {
	t.Helper()
	var ids []int32
	var text strings.Builder
	st, err := eng.Generate(context.Background(), req, func(tok runtime.Token) error {
		if tok.ID >= 0 {
			ids = append(ids, tok.ID)
		}
		text.WriteString(tok.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, text.String(), st
}

// generateAll runs reqs at once on eng (the batched path) and returns each
// one's tokens and error. Every request is queued (Engine.Start) before any
// stream is read, so they are all in the scheduler within microseconds of
// the first: on a loaded machine, a goroutine a request could reach the
// engine after the first requests had finished, and a test of requests
// together (or of a flood that must preempt) then saw them one at a time.
// Errors are returned, not raised: the caller decides what may fail.
func generateAll(eng *runtime.Engine, reqs []runtime.Request) ([][]int32, []error) {
	got := make([][]int32, len(reqs))
	errs := make([]error, len(reqs))
	streams := make([]*runtime.Stream, len(reqs))
	for i, req := range reqs {
		streams[i], errs[i] = eng.Start(context.Background(), req)
	}
	for i, st := range streams {
		if st == nil {
			continue
		}
		for tok, err := range st.Tokens() {
			if err != nil {
				errs[i] = err
			} else if tok.ID >= 0 {
				got[i] = append(got[i], tok.ID)
			}
		}
	}
	return got, errs
}

// generateTogether is generateAll where every request must complete.
func generateTogether(t testing.TB, eng *runtime.Engine, reqs []runtime.Request) [][]int32 {
	t.Helper()
	got, errs := generateAll(eng, reqs)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d of %d together: %v", i, len(reqs), err)
		}
	}
	return got
}

// stories260K lists the two files of the same model: they must give the
// same tokens.
func stories260K(t testing.TB) map[string]runtime.Options {
	return map[string]runtime.Options{
		sharedFile(t, "stories260K.gguf"): {Device: "cpu"},
		sharedFile(t, "stories260K.bin"):  {Device: "cpu", Tokenizer: sharedFile(t, "tok512.bin")},
	}
}

func TestGoldenGreedy(t *testing.T) {
	want := goldenIDs(t)
	wantText, err := os.ReadFile(sharedFile(t, "stories260K.greedy200.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for path, opts := range stories260K(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			eng, err := runtime.Load(path, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			ids, text, _ := generate(t, eng, runtime.Request{MaxTokens: 200})
			if len(ids) != len(want) {
				t.Fatalf("got %d tokens, want %d", len(ids), len(want))
			}
			for i := range want {
				if ids[i] != want[i] {
					t.Fatalf("token %d: got %d, want %d", i, ids[i], want[i])
				}
			}
			if text+"\n" != string(wantText) {
				t.Errorf("text differs from llama2.c's:\n got %q\nwant %q", text, wantText)
			}
		})
	}
}

func TestPromptContinuation(t *testing.T) {
	const prompt = "Once upon a time, there was a dog"
	var first []int32
	for path, opts := range stories260K(t) {
		eng, err := runtime.Load(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		ids, text, st := generate(t, eng, runtime.Request{Prompt: prompt, MaxTokens: 60})
		eng.Close()
		// llama2.c: BOS, then the dummy-prefixed prompt.
		if st.PromptTokens < 5 || len(ids) != 60 {
			t.Fatalf("%s: %d prompt tokens, %d generated", path, st.PromptTokens, len(ids))
		}
		if !strings.HasPrefix(text, " ") || strings.Count(text, " ") < 10 {
			t.Errorf("%s: continuation does not read as words: %q", path, text)
		}
		if first == nil {
			first = ids
		} else if !equal(first, ids) {
			t.Errorf("the GGUF and llama2.c files continue differently:\n%v\n%v", first, ids)
		}
	}
}

func TestSeededSamplingReproduces(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	req := func(seed uint64) runtime.Request {
		return runtime.Request{Prompt: "Lily", MaxTokens: 80,
			Sampler: runtime.SamplerOptions{Temperature: 1, TopP: 0.95, TopK: 40, Seed: seed}}
	}
	a, _, _ := generate(t, eng, req(7))
	b, _, _ := generate(t, eng, req(7))
	c, _, _ := generate(t, eng, req(8))
	if !equal(a, b) {
		t.Errorf("same seed, different tokens:\n%v\n%v", a, b)
	}
	if equal(a, c) {
		t.Errorf("different seeds gave the same %d tokens", len(a))
	}
}

func TestPromptLongerThanContext(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.bin"), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	long := strings.Repeat("the dog ran to the park. ", 200)
	_, err = eng.Generate(context.Background(), runtime.Request{Prompt: long, MaxTokens: 1}, func(runtime.Token) error { return nil })
	if !errors.Is(err, runtime.ErrContextFull) {
		t.Fatalf("got %v, want ErrContextFull", err)
	}
}

func TestGenerateStopsAtContextEnd(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.bin"), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ids := make([]int32, 500)
	for i := range ids {
		ids[i] = 400
	}
	ids[0] = 1
	got, _, st := generate(t, eng, runtime.Request{Tokens: ids, MaxTokens: 100})
	if len(ids)+len(got) > 512 || (!st.StoppedAtLength && !st.StoppedAtEOS) {
		t.Fatalf("generated %d tokens after %d in a 512 context (stats %+v)", len(got), len(ids), st)
	}
}

func TestGenerateCancel(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err = eng.Generate(ctx, runtime.Request{MaxTokens: 100}, func(runtime.Token) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 3 {
		t.Fatalf("got %v after %d tokens, want context.Canceled after 3", err, n)
	}
}

func equal(a, b []int32) bool {
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

// TestMessages: a conversation is rendered with the model's template (the
// plain format for stories260K, which has none) and generates as that text
// would.
func TestMessages(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	msgs := []chat.Message{{Role: "system", Content: "Stories for children."}, {Role: "user", Content: "A dog and a ball"}}
	a, _, _ := generate(t, eng, runtime.Request{Messages: msgs, MaxTokens: 30})
	b, _, _ := generate(t, eng, runtime.Request{Prompt: "Stories for children.\nUser: A dog and a ball\nAssistant:", MaxTokens: 30})
	if len(a) == 0 || !equal(a, b) {
		t.Fatalf("messages %v, plain prompt %v", a, b)
	}
}

// TestCloseWhileGenerating: closing an engine ends its live generations
// with an error instead of leaving their readers waiting.
func TestCloseWhileGenerating(t *testing.T) {
	eng, err := runtime.Load(sharedFile(t, "stories260K.gguf"), runtime.Options{Device: "cpu", Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	var streams []*runtime.Stream
	for _, p := range storyPrompts[:3] {
		s, err := eng.Start(context.Background(), runtime.Request{Prompt: p, MaxTokens: 400, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	if _, ok := streams[0].Next(); !ok {
		t.Fatal("no first token")
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		<-s.Done()
		if s.Err() == nil && s.Stats().Generated < 400 {
			t.Errorf("stream %d ended after %d tokens without an error", i, s.Stats().Generated)
		}
	}
	if _, err := eng.Start(context.Background(), runtime.Request{Prompt: "x", MaxTokens: 1}); err == nil {
		t.Error("a closed engine accepted a request")
	}
}
