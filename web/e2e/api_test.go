package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tessera-llm/tessera/models"
	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/lora"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/backend"
	"github.com/tessera-llm/tessera/runtime/grammar"
	"github.com/tessera-llm/tessera/runtime/grammar/grammartest"
	"github.com/tessera-llm/tessera/web"
)

// apiPage is a user's page: it imports the package's module by path, as
// any page that serves the package folder would, and nothing else.
const apiPage = `<!doctype html><meta charset="utf-8"><title>tessera-web API test</title>
<script type="module">
import * as tessera from "/pkg/index.js";
window.tessera = tessera;
document.title = "ready";
</script>`

// startBrowser launches headless Chromium for t, with WebGPU unless noGPU.
// openAPIPage serves the API page and web.Handler over wasmDir and
// modelDir (and extra's routes) until the test ends, opens it in
// Chromium and waits for the module to load; it returns the page's URL
// too.
func openAPIPage(t testing.TB, exe, wasmDir, modelDir string, extra map[string]http.Handler) (context.Context, *console, string) {
	t.Helper()
	h, err := web.Handler(web.Options{Wasm: wasmDir, Models: modelDir})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(apiPage))
	})
	mux.HandleFunc("/favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.Handle("/", h)
	for route, eh := range extra {
		mux.Handle(route, eh)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	ctx, cons := startBrowser(t, exe, false)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.title === "ready"`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the module did not load: %v (console %q)", err, cons.all())
	}
	return ctx, cons, srv.URL
}

func startBrowser(t testing.TB, exe string, noGPU bool) (context.Context, *console) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	}
	if !noGPU {
		opts = append(opts, chromedp.Flag("enable-unsafe-webgpu", true))
	} else {
		opts = append(opts, chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-webgpu", true))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, 12*time.Minute)
	t.Cleanup(cancelTimeout)
	cons := &console{}
	go cons.collect(ctx, "page")
	return ctx, cons
}

// native is what the engine gives natively (the Go CPU backend) for req.
type native struct {
	Prompt []int32
	IDs    []int
	Text   string
	Load   time.Duration
	Stats  runtime.Stats
}

func runNative(t *testing.T, path string, req runtime.Request) native {
	t.Helper()
	return runNativeWith(t, path, req, runtime.Options{Quant: "f32"})
}

// runNativeWith is runNative with opts (on the CPU, with a 256-token context).
func runNativeWith(t *testing.T, path string, req runtime.Request, opts runtime.Options) native {
	t.Helper()
	opts.Device, opts.Context = "cpu", 256
	start := time.Now()
	eng, err := runtime.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	n := native{Load: time.Since(start)}
	if n.Prompt, err = eng.PromptTokens(req); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	n.Stats, err = eng.Generate(context.Background(), req, func(tok runtime.Token) error {
		if tok.ID >= 0 {
			n.IDs = append(n.IDs, int(tok.ID))
		}
		text.WriteString(tok.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Text = text.String()
	return n
}

// writeQwen3Chat writes a random model at a tiny Qwen3 shape with Qwen3's
// real vocabulary (151,936 ids), tokenizer and chat template.
func writeQwen3Chat(t *testing.T, path string) {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "tokenizers", "qwen3")
	shape, err := synth.Lookup("tiny-qwen3")
	if err != nil {
		t.Fatal(err)
	}
	shape.Config.Vocab = 151936
	tok, err := synth.HFTokenizer(dir, "qwen2", shape.Config.Vocab)
	if err != nil {
		t.Fatalf("the shared Qwen3 tokenizer: %v", err)
	}
	var buf bytes.Buffer
	if err := synth.WriteWith(&buf, shape, dtype.F16, 7, tok); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSynth writes a random f16 model at a real shape (as `tessera synth
// --type f16` does), made at test time rather than kept in the repository.
func writeSynth(t *testing.T, path, shape string) {
	t.Helper()
	s, err := synth.Lookup(shape)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	if err := synth.Write(w, s, dtype.F16, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// splitServer serves a model split in parts under /split/, as a Hub would
// (range requests, If-Range on a strong ETag), recording what it serves;
// cut makes the next full GET of a part break off after some bytes.
type splitServer struct {
	total int64
	parts map[string][]byte // by file name
	index map[string]int

	mu       sync.Mutex
	cutPart  int
	cutAfter int
	inFlight int
	arrived  chan struct{} // closed when every part's first GET has come
	got      int
	log      splitLog
}

type splitLog struct {
	requests    []string
	served      int64
	rangeFrom   map[int]int64
	maxInFlight int
}

func newSplitServer(t *testing.T, src string, n int) *splitServer {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bufs := make([]bytes.Buffer, n)
	ws := make([]io.Writer, n)
	for i := range bufs {
		ws[i] = &bufs[i]
	}
	if err := f.WriteSplit(ws); err != nil {
		t.Fatal(err)
	}
	s := &splitServer{parts: map[string][]byte{}, index: map[string]int{}, cutPart: -1, log: splitLog{rangeFrom: map[int]int64{}}}
	for i := range bufs {
		name := gguf.SplitName("stories", i, n)
		s.parts[name], s.index[name] = bufs[i].Bytes(), i
		s.total += int64(bufs[i].Len())
	}
	return s
}

// cut breaks off the next GET of part i (0-based) without a range after
// bytes, once all parts have been asked for (so that a test also sees
// whether they are fetched at once).
func (s *splitServer) cut(i, bytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cutPart, s.cutAfter, s.got, s.arrived = i, bytes, 0, make(chan struct{})
}

// take returns what was served since the last take.
func (s *splitServer) take() splitLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.log
	s.log = splitLog{rangeFrom: map[int]int64{}}
	return l
}

func (s *splitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := path.Base(r.URL.Path)
	data, ok := s.parts[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	i := s.index[name]
	s.mu.Lock()
	s.inFlight++
	s.log.maxInFlight = max(s.log.maxInFlight, s.inFlight)
	s.log.requests = append(s.log.requests, fmt.Sprintf("%s %d %s", r.Method, i+1, r.Header.Get("Range")))
	var arrived chan struct{}
	cut := 0
	if r.Method == http.MethodGet && s.arrived != nil {
		arrived = s.arrived
		if s.got++; s.got == len(s.parts) {
			close(s.arrived)
			s.arrived = nil
		}
		if i == s.cutPart && r.Header.Get("Range") == "" {
			cut, s.cutPart = s.cutAfter, -1
		}
	}
	if from, ok := strings.CutPrefix(r.Header.Get("Range"), "bytes="); ok {
		n, _ := strconv.ParseInt(strings.TrimSuffix(from, "-"), 10, 64)
		s.log.rangeFrom[i] = n
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if arrived != nil { // wait (a bounded time) for the other parts' requests
		select {
		case <-arrived:
		case <-time.After(5 * time.Second):
		}
	}
	w.Header().Set("ETag", fmt.Sprintf(`"part-%d"`, i+1))
	cw := &countingWriter{ResponseWriter: w, s: s, limit: cut}
	http.ServeContent(cw, r, name, time.Unix(1700000000, 0), bytes.NewReader(data))
}

// countingWriter counts the body bytes served and, with a limit, breaks
// the connection off after that many.
type countingWriter struct {
	http.ResponseWriter
	s     *splitServer
	limit int
	n     int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.limit == 0 {
		n, err := c.ResponseWriter.Write(p)
		c.count(n)
		return n, err
	}
	// Up to the limit, a slow trickle that the browser reads as it comes
	// (a stream that errors drops the chunks not yet read), then the
	// connection ends mid-body, as a closed laptop lid ends it.
	for len(p) > 0 && c.n < c.limit {
		k := min(len(p), c.limit-c.n, 16<<10)
		c.ResponseWriter.Write(p[:k])
		c.count(k)
		c.ResponseWriter.(http.Flusher).Flush()
		p = p[k:]
		time.Sleep(100 * time.Millisecond)
	}
	if c.n < c.limit {
		return len(p), nil
	}
	if conn, _, err := http.NewResponseController(c.ResponseWriter).Hijack(); err == nil {
		conn.Close()
	}
	panic(http.ErrAbortHandler)
}

func (c *countingWriter) count(n int) {
	c.n += n
	c.s.mu.Lock()
	c.s.log.served += int64(n)
	c.s.mu.Unlock()
}

type apiResult struct {
	IDs, PromptIDs, TokenizeIDs []int
	Content, Streamed, Finish   string
	StreamFinish                string
	Chunks, Usage               int
	Compiled                    []int
	MaxBinding, Largest         float64
	WeightBytes                 float64
	LoadMs, TTFTms, DecodeTPS   float64
	ChatTemplate                bool
	Lists                       [][]int
	Codes                       []string
	Err                         string
}

func TestBrowserAPI(t *testing.T) {
	exe := needChromium(t)
	stories := filepath.Join(sharedModels, "stories260K.gguf")
	if _, err := os.Stat(stories); err != nil {
		t.Fatalf("test model missing: %v", err)
	}
	wasmDir := buildWasm(t)
	modelDir := t.TempDir()
	data, err := os.ReadFile(stories)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(modelDir, "stories260K.gguf"), data, 0o644)
	qwen := filepath.Join(modelDir, "qwen3-chat.gguf")
	writeQwen3Chat(t, qwen)
	small := filepath.Join(modelDir, "smollm2-135m.gguf")
	writeSynth(t, small, "smollm2-135m")
	every := filepath.Join(modelDir, "every-type.gguf")
	everyBytes := writeEveryBlockType(t, every)
	bad := make([]byte, 4096)
	rand.Read(bad)
	os.WriteFile(filepath.Join(modelDir, "bad.gguf"), bad, 0o644)

	split := newSplitServer(t, stories, 3)
	ctx, cons, pageURL := openAPIPage(t, exe, wasmDir, modelDir, map[string]http.Handler{"/split/": split})
	eval := func(t *testing.T, js string) apiResult {
		t.Helper()
		r, err := chromedp.Run(ctx, chromedp.Evaluate[apiResult](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%v (console %q)", err, cons.all())
		}
		if r.Err != "" {
			t.Fatalf("in the page: %s", r.Err)
		}
		return r
	}

	msgs := []chat.Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Name three colours, please."}}
	t.Run("greedy chat on a Qwen3 model matches native", func(t *testing.T) {
		want := runNative(t, qwen, runtime.Request{Messages: msgs, MaxTokens: 16})
		r := eval(t, `(async () => {
			try {
				const engine = await tessera.createEngine({model: "/models/qwen3-chat.gguf", quant: "f32", context: 256});
				const messages = [{role: "system", content: "You are terse."}, {role: "user", content: "Name three colours, please."}];
				const tokenizeIDs = await engine.tokenize({messages});
				const a = await engine.chat.completions.create({messages, temperature: 0, max_tokens: 16});
				let streamed = "", chunks = 0, finish = "", usage = 0;
				for await (const c of await engine.chat.completions.create({messages, temperature: 0, max_tokens: 16, stream: true})) {
					chunks++;
					streamed += c.choices[0].delta.content || "";
					if (c.choices[0].finish_reason) { finish = c.choices[0].finish_reason; usage = c.usage.completion_tokens; }
				}
				const out = {IDs: a.tessera.token_ids, PromptIDs: a.tessera.prompt_ids, TokenizeIDs: tokenizeIDs,
					Content: a.choices[0].message.content, Finish: a.choices[0].finish_reason, Streamed: streamed,
					StreamFinish: finish, Chunks: chunks, Usage: usage, LoadMs: engine.model.loadMs,
					TTFTms: a.tessera.ttft_ms, DecodeTPS: a.tessera.decode_tps, ChatTemplate: engine.model.chatTemplate};
				await engine.unload();
				return out;
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		prompt := make([]int, len(want.Prompt))
		for i, id := range want.Prompt {
			prompt[i] = int(id)
		}
		if !r.ChatTemplate || !slices.Equal(r.PromptIDs, prompt) || !slices.Equal(r.TokenizeIDs, prompt) {
			t.Errorf("prompt ids (template %v):\n browser %v\ntokenize %v\n  native %v", r.ChatTemplate, r.PromptIDs, r.TokenizeIDs, prompt)
		}
		if !slices.Equal(r.IDs, want.IDs) || r.Content != want.Text {
			t.Errorf("greedy reply:\n browser %v %q\n  native %v %q", r.IDs, r.Content, want.IDs, want.Text)
		}
		if r.Streamed != r.Content || r.StreamFinish != r.Finish || r.Usage != len(r.IDs) || r.Chunks < len(r.IDs) {
			t.Errorf("stream: %q (%d chunks, finish %q, %d tokens); the whole reply %q (finish %q, %d tokens)",
				r.Streamed, r.Chunks, r.StreamFinish, r.Usage, r.Content, r.Finish, len(r.IDs))
		}
		t.Logf("Qwen3-vocabulary model: browser load %.0f ms, first token %.0f ms, %.1f tokens/s; native (CPU) load %v, first token %v, %.1f tokens/s",
			r.LoadMs, r.TTFTms, r.DecodeTPS, want.Load.Round(time.Millisecond), want.Stats.TimeToFirst.Round(time.Millisecond), want.Stats.DecodeRate())
	})

	t.Run("an image in chat, the projector by URL and by buffer, matches native", func(t *testing.T) {
		testBrowserVision(t, eval, modelDir)
	})

	t.Run("every projector type answers an image as native does", func(t *testing.T) {
		testBrowserProjectors(t, eval, modelDir)
	})

	t.Run("reasoning and tool calls as the server's Chat Completions has them", func(t *testing.T) {
		testChatReplies(t, ctx, cons, qwen)
	})

	t.Run("greedy completion on stories260K matches native, two engines at once", func(t *testing.T) {
		want := runNative(t, stories, runtime.Request{Prompt: "Once upon a time", MaxTokens: 60})
		r := eval(t, `(async () => {
			try {
				const [a, b] = await Promise.all([1, 2].map(() => tessera.createEngine({model: "/models/stories260K.gguf", quant: "f32"})));
				const req = {prompt: "Once upon a time", temperature: 0, max_tokens: 60};
				const [x, y] = await Promise.all([a.completions.create(req), b.completions.create(req)]);
				const out = {IDs: x.tessera.token_ids, Content: x.choices[0].text, Streamed: y.choices[0].text,
					Finish: x.choices[0].finish_reason, LoadMs: a.model.loadMs, TTFTms: x.tessera.ttft_ms, DecodeTPS: x.tessera.decode_tps};
				await a.unload(); await b.unload();
				return out;
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		if !slices.Equal(r.IDs, want.IDs) || r.Content != want.Text || r.Streamed != want.Text {
			t.Errorf("greedy completion:\n browser %v %q (second engine %q)\n  native %v %q", r.IDs, r.Content, r.Streamed, want.IDs, want.Text)
		}
		t.Logf("stories260K: browser load %.0f ms, first token %.0f ms, %.1f tokens/s; native (CPU) load %v, first token %v, %.1f tokens/s",
			r.LoadMs, r.TTFTms, r.DecodeTPS, want.Load.Round(time.Millisecond), want.Stats.TimeToFirst.Round(time.Millisecond), want.Stats.DecodeRate())
	})

	t.Run("seeded sampled completion matches the native CPU sampler's tokens", func(t *testing.T) {
		// Sampled on the device (penalties, top-k, top-p, the seed's
		// stream), as the native CPU engine samples on the host.
		want := runNative(t, stories, runtime.Request{Prompt: "Once upon a time", MaxTokens: 48,
			Sampler: runtime.SamplerOptions{Temperature: 0.8, TopP: 0.9, TopK: 40, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 42}})
		r := eval(t, `(async () => {
			try {
				const engine = await tessera.createEngine({model: "/models/stories260K.gguf", quant: "f32"});
				const req = {prompt: "Once upon a time", max_tokens: 48, temperature: 0.8, top_p: 0.9, top_k: 40, repetition_penalty: 1.1, seed: 42};
				const a = await engine.completions.create(req);
				const b = await engine.completions.create({...req, seed: 43});
				await engine.unload();
				return {IDs: a.tessera.token_ids, Lists: [b.tessera.token_ids], Content: a.choices[0].text};
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		if !slices.Equal(r.IDs, want.IDs) || r.Content != want.Text {
			t.Errorf("seed 42, sampled:\n browser %v %q\n  native %v %q", r.IDs, r.Content, want.IDs, want.Text)
		}
		if len(r.Lists) != 1 || slices.Equal(r.Lists[0], r.IDs) {
			t.Errorf("seed 43 gave the same tokens as seed 42: %v", r.Lists)
		}
	})

	t.Run("135M-shape int4 model under a 128 MiB storage-binding limit matches native", func(t *testing.T) {
		const prompt, steps = "Once upon a time", 4
		want := runNativeWith(t, small, runtime.Request{Prompt: prompt, MaxTokens: steps, IgnoreEOS: true}, runtime.Options{Quant: "int4"})
		r := eval(t, `(async () => {
			try {
				const engine = await tessera.createEngine({model: "/models/smollm2-135m.gguf", quant: "int4", context: 256, maxStorageBinding: 128 << 20, cache: false});
				const est = await engine.inspect("/models/smollm2-135m.gguf", {quant: "int4", context: 256});
				const a = await engine.completions.create({prompt: "`+prompt+`", temperature: 0, max_tokens: `+strconv.Itoa(steps)+`, ignore_eos: true});
				const out = {IDs: a.tessera.token_ids, Content: a.choices[0].text, MaxBinding: engine.model.adapter.maxStorageBufferBindingSize,
					Largest: est.memory.largest, LoadMs: engine.model.loadMs, TTFTms: a.tessera.ttft_ms, DecodeTPS: a.tessera.decode_tps};
				await engine.unload();
				return out;
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		if r.MaxBinding != 128<<20 {
			t.Errorf("the device's maxStorageBufferBindingSize is %.0f, want 128 MiB", r.MaxBinding)
		}
		if !slices.Equal(r.IDs, want.IDs) || r.Content != want.Text {
			t.Errorf("greedy completion:\n browser %v %q\n  native %v %q", r.IDs, r.Content, want.IDs, want.Text)
		}
		t.Logf("smollm2-135m shape, int4, 128 MiB bindings (largest weight buffer %.1f MiB): browser load %.0f ms, first token %.0f ms, %.2f tokens/s; native (CPU) load %v, first token %v, %.1f tokens/s",
			r.Largest/(1<<20), r.LoadMs, r.TTFTms, r.DecodeTPS, want.Load.Round(time.Millisecond), want.Stats.TimeToFirst.Round(time.Millisecond), want.Stats.DecodeRate())
	})

	// The fused gate and up of every type of 4 bits or more exceed 512 KiB.
	t.Run("every GGUF block type at its file's bits, split across 512 KiB bindings, matches native", func(t *testing.T) {
		const prompt, steps = "abc def ghi", 24
		want := runNativeWith(t, every, runtime.Request{Prompt: prompt, MaxTokens: steps, IgnoreEOS: true}, runtime.Options{})
		r := eval(t, `(async () => {
			try {
				const engine = await tessera.createEngine({model: "/models/every-type.gguf", context: 256, maxStorageBinding: 512 << 10, cache: false});
				const a = await engine.completions.create({prompt: "`+prompt+`", temperature: 0, max_tokens: `+strconv.Itoa(steps)+`, ignore_eos: true});
				const out = {IDs: a.tessera.token_ids, Content: a.choices[0].text, WeightBytes: engine.model.weightBytes};
				await engine.unload();
				return out;
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		if !slices.Equal(r.IDs, want.IDs) || r.Content != want.Text {
			t.Errorf("greedy completion:\n browser %v %q\n  native %v %q", r.IDs, r.Content, want.IDs, want.Text)
		}
		if int64(r.WeightBytes) != everyBytes {
			t.Errorf("the browser keeps the weights in %.0f bytes, the file's tensors take %d", r.WeightBytes, everyBytes)
		}
	})

	t.Run("shaders compile once per worker, not at every load", func(t *testing.T) {
		want := runNative(t, stories, runtime.Request{Prompt: "Once upon a time", MaxTokens: 10})
		r := eval(t, `(async () => {
			try {
				const engine = await tessera.createEngine({model: "/models/stories260K.gguf", quant: "f32"});
				const req = {prompt: "Once upon a time", temperature: 0, max_tokens: 10};
				const ids = [];
				const compiled = [(await engine.info()).compiled];
				for (const i of [1, 2, 3]) {
					if (i > 1) await engine.load("/models/stories260K.gguf", {quant: "f32"});
					ids.push((await engine.completions.create(req)).tessera.token_ids);
					compiled.push((await engine.info()).compiled);
				}
				const out = {Compiled: compiled, IDs: ids[2], Streamed: JSON.stringify(ids[0]) === JSON.stringify(ids[2]) ? "same" : "differ"};
				await engine.unload();
				return out;
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		// Kernels compile as they first run (so mostly with the first
		// generation), and none anew after each reload.
		if len(r.Compiled) != 4 || r.Compiled[1] == 0 || r.Compiled[2] != r.Compiled[1] || r.Compiled[3] != r.Compiled[1] {
			t.Errorf("pipelines the worker compiled after loading, then after each of three generations with a reload between: %v; want one count from the first generation on", r.Compiled)
		}
		if !slices.Equal(r.IDs, want.IDs) || r.Streamed != "same" {
			t.Errorf("after reloading: %v (%s as before), native %v", r.IDs, r.Streamed, want.IDs)
		}
		t.Logf("pipelines compiled by the worker: %v", r.Compiled)
	})

	t.Run("response_format and regex constrain the reply as natively", func(t *testing.T) {
		const schema = `{"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]},
			"count": {"type": "integer", "minimum": 1, "maximum": 99}}, "required": ["colour", "count"], "additionalProperties": false}`
		const regex = `[a-z]{2,6}( [a-z]{2,6}){3}\.`
		g, err := grammar.JSONSchema([]byte(schema), grammar.SchemaOptions{})
		if err != nil {
			t.Fatal(err)
		}
		wantJSON := runNative(t, qwen, runtime.Request{Messages: msgs, MaxTokens: 64, Constraint: g})
		if g, err = grammar.Regex(regex); err != nil {
			t.Fatal(err)
		}
		wantRegex := runNative(t, stories, runtime.Request{Prompt: "Once upon a time", MaxTokens: 40, Constraint: g})
		js, _ := json.Marshal(map[string]any{"schema": json.RawMessage(schema), "regex": regex})
		r := eval(t, `(async () => {
			const p = `+string(js)+`;
			try {
				const messages = [{role: "system", content: "You are terse."}, {role: "user", content: "Name three colours, please."}];
				const a = await tessera.createEngine({model: "/models/qwen3-chat.gguf", quant: "f32", context: 256});
				const x = await a.chat.completions.create({messages, temperature: 0, max_tokens: 64,
					response_format: {type: "json_schema", json_schema: {name: "colour", schema: p.schema, strict: true}}});
				let code = "";
				try { await a.chat.completions.create({messages, max_tokens: 4, response_format: {type: "json_schema", json_schema: {schema: {type: "nonsense"}}}}); }
				catch (e) { code = e.code; }
				await a.unload();
				const b = await tessera.createEngine({model: "/models/stories260K.gguf", quant: "f32"});
				const y = await b.completions.create({prompt: "Once upon a time", temperature: 0, max_tokens: 40, regex: p.regex});
				await b.unload();
				return {Content: x.choices[0].message.content, IDs: x.tessera.token_ids, Finish: x.choices[0].finish_reason,
					Streamed: y.choices[0].text, PromptIDs: y.tessera.token_ids, StreamFinish: code};
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		var v any
		if err := json.Unmarshal([]byte(r.Content), &v); err != nil {
			t.Fatalf("the json_schema reply %q is not JSON: %v", r.Content, err)
		}
		if err := grammartest.Validator(t, schema).Validate(v); err != nil {
			t.Errorf("the json_schema reply %q does not validate: %v", r.Content, err)
		}
		if !slices.Equal(r.IDs, wantJSON.IDs) || r.Content != wantJSON.Text || r.Finish != "stop" {
			t.Errorf("json_schema reply (finish %q):\n browser %v %q\n  native %v %q", r.Finish, r.IDs, r.Content, wantJSON.IDs, wantJSON.Text)
		}
		if !regexp.MustCompile(`^(?:`+regex+`)$`).MatchString(r.Streamed) || r.Streamed != wantRegex.Text || !slices.Equal(r.PromptIDs, wantRegex.IDs) {
			t.Errorf("regex reply: browser %q, native %q", r.Streamed, wantRegex.Text)
		}
		if r.StreamFinish != "bad-request" {
			t.Errorf("a schema that does not compile failed with code %q, want bad-request", r.StreamFinish)
		}
		t.Logf("json_schema: %s; regex: %q", r.Content, r.Streamed)
	})

	t.Run("split GGUF downloads in parallel, resumes, loads", func(t *testing.T) {
		want := runNative(t, stories, runtime.Request{Prompt: "Once upon a time", MaxTokens: 20})
		load := `(async () => {
			try {
				const engine = await tessera.createEngine({model: "/split/` + gguf.SplitName("stories", 0, 3) + `", quant: "f32"});
				const a = await engine.completions.create({prompt: "Once upon a time", temperature: 0, max_tokens: 20});
				const out = {IDs: a.tessera.token_ids, Finish: String(engine.model.cached), Usage: engine.model.parts};
				await engine.unload();
				return out;
			} catch (e) { return {Content: e.code + ": " + e.message}; }
		})()`
		reopen := func() {
			t.Helper()
			if err := chromedp.Do(ctx, chromedp.Navigate(pageURL+"/")); err != nil {
				t.Fatal(err)
			}
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.title === "ready"`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
				t.Fatal(err)
			}
		}
		// The first try: part 2 breaks off part way, so the load fails.
		split.cut(1, 64<<10)
		r := eval(t, load)
		if !strings.HasPrefix(r.Content, "network:") {
			t.Fatalf("with part 2 cut off: %q, want a network error", r.Content)
		}
		first := split.take()
		if first.maxInFlight != 3 {
			t.Errorf("the three parts were fetched %d at a time, want all at once", first.maxInFlight)
		}
		// A reopened page goes on from where each part stopped.
		reopen()
		r = eval(t, load)
		second := split.take()
		if r.Content != "" || !slices.Equal(r.IDs, want.IDs) || r.Finish != "false" || r.Usage != 3 {
			t.Fatalf("resumed: %+v; native %v", r, want.IDs)
		}
		if from := second.rangeFrom[1]; from <= 0 || from > 64<<10 {
			t.Errorf("part 2 resumed from byte %d, want where it broke off (at most %d); requests %v", from, 64<<10, second.requests)
		}
		if second.served >= split.total {
			t.Errorf("the resumed download served %d bytes of %d: it started again", second.served, split.total)
		}
		// And once whole, the entry is reused.
		reopen()
		r = eval(t, load)
		third := split.take()
		if r.Content != "" || !slices.Equal(r.IDs, want.IDs) || r.Finish != "true" || third.served != 0 {
			t.Errorf("from the cache: %+v, %d bytes served (requests %v)", r, third.served, third.requests)
		}
		t.Logf("first try %v; resumed with %v (%d of %d bytes); cached: %v", first.requests, second.requests, second.served, split.total, third.requests)

		// The parts picked as local files, in any order.
		r = eval(t, `(async () => {
			try {
				const names = [3, 1, 2].map((i) => "stories-0000" + i + "-of-00003.gguf");
				const files = await Promise.all(names.map(async (n) => new File([await (await fetch("/split/" + n)).blob()], n)));
				const est = await tessera.inspect(files);
				const engine = await tessera.createEngine({model: files, quant: "f32"});
				const a = await engine.completions.create({prompt: "Once upon a time", temperature: 0, max_tokens: 20});
				const out = {IDs: a.tessera.token_ids, Usage: est.params, Finish: engine.model.source};
				await engine.unload();
				return out;
			} catch (e) { return {Content: e.code + ": " + e.message}; }
		})()`)
		if r.Content != "" || !slices.Equal(r.IDs, want.IDs) || r.Finish != "file" || r.Usage != 292800 {
			t.Errorf("from the parts as files: %+v; native %v", r, want.IDs)
		}
	})

	t.Run("an int8 kv cache decodes as the native one does", func(t *testing.T) {
		want := runNativeWith(t, stories, runtime.Request{Prompt: "Once upon a time", MaxTokens: 40},
			runtime.Options{Quant: "f32", KV: runtime.KVOptions{Type: backend.KVInt8}})
		r := eval(t, `(async () => {
			try {
				const engine = await tessera.createEngine({model: "/models/stories260K.gguf", quant: "f32", kvType: "int8", context: 256});
				const out = await engine.completions.create({prompt: "Once upon a time", max_tokens: 40, temperature: 0});
				const info = engine.model;
				await engine.unload();
				let bad = "none";
				try { await tessera.createEngine({model: "/models/stories260K.gguf", kvType: "q4"}); } catch (e) { bad = e.message; }
				return {IDs: out.tessera.token_ids, Content: info.kvType + " " + info.kvBytes, Finish: bad};
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		if !slices.Equal(r.IDs, want.IDs) || !strings.HasPrefix(r.Content, "int8 ") || r.Content == "int8 0" {
			t.Errorf("int8 cache in the browser: %v, reported %q; native %v", r.IDs, r.Content, want.IDs)
		}
		if !strings.Contains(r.Finish, "kv cache type") {
			t.Errorf("kvType q4: %q, want an error naming the kv cache type", r.Finish)
		}
	})

	t.Run("AbortSignal stops a stream within a step", func(t *testing.T) {
		r := eval(t, `(async () => {
			try {
				const engine = await tessera.createEngine({model: "/models/stories260K.gguf", quant: "f32"});
				const ctl = new AbortController();
				let before = 0, after = 0, code = "";
				try {
					for await (const c of await engine.completions.create({prompt: "Once", max_tokens: 2000, ignore_eos: true, temperature: 0, stream: true, signal: ctl.signal})) {
						if (!(c.tessera && c.tessera.token_id >= 0)) continue;
						if (ctl.signal.aborted) after++; else if (++before === 20) ctl.abort();
					}
				} catch (e) { code = e.code + "/" + e.name; }
				const again = await engine.completions.create({prompt: "Once", max_tokens: 3, temperature: 0});
				await engine.unload();
				return {Chunks: before, Usage: after, Finish: code, Content: again.choices[0].text};
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		if r.Finish != "aborted/AbortError" || r.Chunks != 20 || r.Usage > 8 || r.Content == "" {
			t.Errorf("abort after 20 tokens: error %q, %d more tokens came after it (want at most a chain of steps), then %q", r.Finish, r.Usage, r.Content)
		}
		t.Logf("after abort: %d more tokens", r.Usage)
	})

	t.Run("LoRA adapters apply per request as natively", func(t *testing.T) {
		m, err := models.Open(stories, models.Options{})
		if err != nil {
			t.Fatal(err)
		}
		config := m.Config
		m.Close()
		tiny, err := synth.Lookup("tiny")
		if err != nil {
			t.Fatal(err)
		}
		var specs []runtime.AdapterSpec
		for i, a := range []struct {
			name string
			c    models.Config
		}{{"tales", config}, {"poems", config}, {"other", tiny.Config}} {
			ad, err := synth.LoRA(a.c, 8, nil, uint64(50+i))
			if err != nil {
				t.Fatal(err)
			}
			ad.Type = dtype.F16 // as llama.cpp's converter writes them: the page keeps them in halves
			path := filepath.Join(modelDir, a.name+".gguf")
			if err := lora.WriteGGUF(path, ad, a.c.Arch); err != nil {
				t.Fatal(err)
			}
			if a.name != "other" {
				specs = append(specs, runtime.AdapterSpec{Name: a.name, Path: path})
			}
		}
		const prompt, steps = "Once upon a time", 40
		opts := runtime.Options{Quant: "f32", Adapters: specs}
		var want [][]int
		for _, refs := range [][]runtime.AdapterRef{nil, {{Name: "tales"}}, {{Name: "tales", Scale: 0.7}, {Name: "poems", Scale: -0.3}}} {
			want = append(want, runNativeWith(t, stories, runtime.Request{Prompt: prompt, MaxTokens: steps, IgnoreEOS: true, Adapters: refs}, opts).IDs)
		}
		if slices.Equal(want[0], want[1]) || slices.Equal(want[1], want[2]) {
			t.Fatal("the adapters do not change the tokens")
		}
		r := eval(t, `(async () => {
			try {
				const code = async (f) => { try { await f(); return "none"; } catch (e) { return (e instanceof tessera.TesseraError) + ":" + e.code; } };
				const engine = await tessera.createEngine({model: "/models/stories260K.gguf", quant: "f32", context: 256});
				const info = await engine.loadAdapter("tales", "/models/tales.gguf");
				const bytes = await (await fetch("/models/poems.gguf")).arrayBuffer();
				await engine.loadAdapter("poems", bytes);
				const req = (lora) => engine.completions.create({prompt: "`+prompt+`", temperature: 0, max_tokens: `+strconv.Itoa(steps)+`, ignore_eos: true, lora});
				const lists = [];
				for (const lora of [undefined, [{name: "tales"}], [{name: "tales", scale: 0.7}, {name: "poems", scale: -0.3}], [{name: "tales", scale: 0}]]) {
					lists.push((await req(lora)).tessera.token_ids);
				}
				const listed = (await engine.info()).adapters.map((a) => a.name + "/" + a.rank + "/" + a.targets).sort().join(" ");
				await engine.unloadAdapter("tales");
				const codes = [
					await code(() => req([{name: "tales"}])),
					await code(() => engine.loadAdapter("bad", "/models/bad.gguf")),
					await code(() => engine.loadAdapter("other", "/models/other.gguf")),
					await code(() => engine.loadAdapter("poems", "/models/poems.gguf")),
					await code(() => req([{scale: 1}])),
				];
				const after = (await engine.info()).adapters.map((a) => a.name).join(" ");
				await engine.unload();
				return {Lists: lists, Content: listed + " | " + after + " | " + info.name + " " + info.scale, Codes: codes};
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		for i, w := range append(want, want[0]) {
			if i >= len(r.Lists) || !slices.Equal(r.Lists[i], w) {
				t.Errorf("request %d: browser %v, native %v", i, r.Lists, w)
			}
		}
		layers := config.Layers * 7
		if want := fmt.Sprintf("poems/8/%d tales/8/%d | poems | tales 1", layers, layers); r.Content != want {
			t.Errorf("adapters listed %q, want %q", r.Content, want)
		}
		if want := []string{"true:bad-request", "true:bad-model", "true:bad-model", "true:bad-request", "true:bad-request"}; !slices.Equal(r.Codes, want) {
			t.Errorf("codes %v, want %v", r.Codes, want)
		}
	})

	t.Run("errors have codes", func(t *testing.T) {
		r := eval(t, `(async () => {
			const code = async (f) => { try { await f(); return "none"; } catch (e) { return (e instanceof tessera.TesseraError) + ":" + e.code; } };
			const bytes = await (await fetch("/models/bad.gguf")).arrayBuffer();
			return {Content: [
				await code(() => tessera.createEngine({model: new Blob([bytes])})),
				await code(() => tessera.createEngine({model: "/models/bad.gguf"})),
				await code(() => tessera.createEngine({model: "/models/missing.gguf"})),
				await code(() => { const c = new AbortController(); c.abort(); return tessera.createEngine({model: "/models/stories260K.gguf", signal: c.signal}); }),
			].join(" ")};
		})()`)
		if want := "true:bad-model true:bad-model true:network true:aborted"; r.Content != want {
			t.Errorf("codes %q, want %q", r.Content, want)
		}
	})

	t.Run("a cached file is checked against its published SHA-256", func(t *testing.T) {
		sum := sha256.Sum256(data)
		r := eval(t, `(async () => {
			const url = "/models/stories260K.gguf?integrity", sha256 = "`+hex.EncodeToString(sum[:])+`";
			const load = async (hash) => {
				const e = await tessera.createEngine({model: url, quant: "f32", sha256: hash});
				const r = await e.completions.create({prompt: "", max_tokens: 5, temperature: 0});
				const out = {verified: e.model.verified, cached: e.model.cached, discarded: e.model.discarded || "", ids: r.tessera.token_ids};
				await e.unload();
				return out;
			};
			try {
				const first = await load(sha256);
				// Change two bytes of the cached copy, from the page, as a
				// damaged disk or another program would.
				const dir = await (await navigator.storage.getDirectory()).getDirectoryHandle("tessera-models");
				let tampered = "";
				for await (const [name, h] of dir.entries()) {
					if (!name.endsWith(".json") || JSON.parse(await (await h.getFile()).text()).url !== new URL(url, location.href).href) continue;
					const fh = await dir.getFileHandle(name.replace(".json", ".gguf"));
					const old = new Uint8Array(await (await fh.getFile()).slice(1000, 1002).arrayBuffer());
					const w = await fh.createWritable({keepExistingData: true});
					await w.write({type: "write", position: 1000, data: old.map((b) => b ^ 0xff)});
					await w.close();
					tampered = name;
				}
				const second = await load(sha256);
				const third = await load(sha256);
				let code = "none";
				try { await load("0".repeat(64)); } catch (e) { code = (e instanceof tessera.TesseraError) + ":" + e.code + ":" + /deleted/.test(e.message); }
				const left = (await tessera.cached()).filter((c) => c.url.endsWith("?integrity")).length;
				return {Content: JSON.stringify({first, tampered, second, third, code, left})};
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		var got struct {
			First, Second, Third struct {
				Verified, Cached bool
				Discarded        string
				IDs              []int
			}
			Tampered, Code string
			Left           int
		}
		if err := json.Unmarshal([]byte(r.Content), &got); err != nil {
			t.Fatal(err)
		}
		if !got.First.Verified || got.First.Cached || got.First.Discarded != "" || got.Tampered == "" {
			t.Errorf("the first load (verified, then tampered with %q): %+v", got.Tampered, got.First)
		}
		if got.Second.Cached || !strings.Contains(got.Second.Discarded, "deleted") || !slices.Equal(got.Second.IDs, got.First.IDs) {
			t.Errorf("after tampering: %+v; want the copy found damaged, deleted and fetched again, and the same tokens %v", got.Second, got.First.IDs)
		}
		if !got.Third.Cached || got.Third.Discarded != "" || !slices.Equal(got.Third.IDs, got.First.IDs) {
			t.Errorf("the third load: %+v, want the fresh copy reused", got.Third)
		}
		if got.Code != "true:integrity:true" || got.Left != 0 {
			t.Errorf("a wrong published hash: %q, %d entries left; want an integrity error and the copy deleted", got.Code, got.Left)
		}
		t.Logf("tampered: %s", got.Second.Discarded)
	})

	t.Run("a transcript made in the browser replays natively", func(t *testing.T) {
		sum := sha256.Sum256(data)
		r := eval(t, `(async () => {
			try {
				const e = await tessera.createEngine({model: "/models/stories260K.gguf?transcript", quant: "f32", sha256: "`+hex.EncodeToString(sum[:])+`"});
				const a = await e.completions.create({prompt: "Once upon a time", max_tokens: 40, temperature: 0, transcript: true});
				let streamed = null;
				for await (const c of await e.chat.completions.create({messages: [{role: "user", content: "Hi"}], max_tokens: 8, temperature: 0, transcript: true, stream: true})) {
					if (c.choices[0].transcript) streamed = c.choices[0].transcript;
				}
				await e.unload();
				return {Content: JSON.stringify({t: a.choices[0].transcript, fp: a.system_fingerprint, streamed})};
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		var got struct {
			T, Streamed *runtime.Transcript
			FP          string
		}
		if err := json.Unmarshal([]byte(r.Content), &got); err != nil || got.T == nil || got.Streamed == nil {
			t.Fatalf("no transcripts: %v %s", err, r.Content)
		}
		if got.T.Model.SHA256 != hex.EncodeToString(sum[:]) || len(got.T.Output) != 40 || got.FP == "" || got.T.Fingerprint != got.FP {
			t.Fatalf("the browser's transcript: model %+v, %d tokens, fingerprint %q / %q", got.T.Model, len(got.T.Output), got.T.Fingerprint, got.FP)
		}
		cpu, err := runtime.Load(stories, runtime.Options{Device: "cpu", Quant: "f32"})
		if err != nil {
			t.Fatal(err)
		}
		defer cpu.Close()
		engines := map[string]*runtime.Engine{"cpu": cpu}
		if g, err := runtime.Load(stories, runtime.Options{Device: "webgpu", Quant: "f32"}); err == nil {
			defer g.Close()
			engines["webgpu"] = g
		} else if inCI() {
			t.Fatalf("native WebGPU: %v", err)
		}
		for name, eng := range engines {
			for what, tr := range map[string]*runtime.Transcript{"completion": got.T, "streamed chat": got.Streamed} {
				rep, err := eng.Replay(context.Background(), tr)
				// Another adapter: the contract's cross-adapter tolerance (WGSL
				// lets exp and log be a few ulps off; SwiftShader's are).
				if err != nil || rep.Diverged != -1 || rep.Tokens != len(tr.Output) || rep.MaxDelta > 1e-3 {
					t.Errorf("the browser's %s on native %s: %+v, %v", what, name, rep, err)
				}
				t.Logf("the browser's %s (%s) on native %s: %d tokens, log-probabilities within %.2g", what, tr.Backend, name, rep.Tokens, rep.MaxDelta)
			}
		}
		tampered := *got.T
		tampered.Output = slices.Clone(got.T.Output)
		tampered.Output[9] = (tampered.Output[9] + 1) % 512
		if rep, err := cpu.Replay(context.Background(), &tampered); err != nil || rep.Diverged != 9 {
			t.Errorf("a tampered transcript: %+v, %v", rep, err)
		}
	})

	t.Run("the self-check catches a faulty kernel and engine.info() says so", func(t *testing.T) {
		want := runNative(t, stories, runtime.Request{Prompt: "Once upon a time", MaxTokens: 40})
		r := eval(t, `(async () => {
			try {
				const run = async (opts) => {
					const e = await tessera.createEngine({model: "/models/stories260K.gguf?selfcheck", quant: "f32", ...opts});
					const c = await e.completions.create({prompt: "Once upon a time", max_tokens: 40, temperature: 0});
					const info = await e.info();
					await e.unload();
					return {check: info.model.selfCheck, ids: c.tessera.token_ids, loadMs: info.model.loadMs};
				};
				// Earlier loads stored their results: start from none.
				await (await navigator.storage.getDirectory()).removeEntry("tessera-selfcheck", {recursive: true}).catch(() => {});
				const sound = await run({});
				const unchecked = await run({selfCheck: false});
				const fused = sound.check.kernels.find((k) => /^matmul_gemv\+norm/.test(k));
				const faulty = await run({kernelFault: fused});
				const again = await run({kernelFault: fused});
				const off = await run({kernelFault: fused, selfCheck: false});
				return {Content: JSON.stringify({sound, unchecked, fused, faulty, again, off})};
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`)
		type run struct {
			Check *struct {
				Status, Plan, Adapter string
				Failed                []struct{ Plan, Error string }
				Kernels               []string
				Cached                bool
				MS                    float64
			}
			IDs    []int
			LoadMs float64
		}
		var got struct {
			Sound, Unchecked, Faulty, Again, Off run
			Fused                                string
		}
		if err := json.Unmarshal([]byte(r.Content), &got); err != nil || got.Sound.Check == nil || got.Faulty.Check == nil || got.Again.Check == nil {
			t.Fatalf("no self-check reports: %v %s", err, r.Content)
		}
		if c := got.Sound.Check; c.Status != "passed" || c.Cached || len(c.Kernels) == 0 || !slices.Equal(got.Sound.IDs, want.IDs) {
			t.Errorf("sound kernels: %+v, tokens %v; want passed and the native %v", c, got.Sound.IDs, want.IDs)
		}
		if c := got.Faulty.Check; got.Fused == "" || c.Status != "fallback" || c.Cached || len(c.Failed) == 0 || c.Failed[0].Plan != "the adapter's kernels" ||
			!strings.Contains(c.Failed[0].Error, "logit") || !slices.Equal(got.Faulty.IDs, want.IDs) {
			t.Errorf("a faulty %q: %+v, tokens %v; want a fallback and the native %v", got.Fused, c, got.Faulty.IDs, want.IDs)
		}
		if c := got.Again.Check; !c.Cached || c.Status != "fallback" || c.Plan != got.Faulty.Check.Plan || !slices.Equal(got.Again.IDs, want.IDs) {
			t.Errorf("the second load: %+v; want the fallback read from the origin's storage", c)
		}
		if got.Off.Check != nil || slices.Equal(got.Off.IDs, want.IDs) {
			t.Errorf("selfCheck: false with the fault: report %+v, tokens %v; want none, and the fault's wrong story", got.Off.Check, got.Off.IDs)
		}
		t.Logf("self-check on %s: %.0f ms (passed, cold), %.0f ms (fault found, plan %q), %.0f ms (cached); loads %.0f ms checked (cold), %.0f ms unchecked, %.0f ms cached",
			got.Sound.Check.Adapter, got.Sound.Check.MS, got.Faulty.Check.MS, got.Faulty.Check.Plan, got.Again.Check.MS,
			got.Sound.LoadMs, got.Unchecked.LoadMs, got.Again.LoadMs)
	})

	t.Run("without WebGPU", func(t *testing.T) {
		nctx, ncons := startBrowser(t, exe, true)
		if err := chromedp.Do(nctx, chromedp.Navigate(pageURL+"/")); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(nctx, chromedp.Poll[bool](`document.title === "ready"`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("the module did not load: %v (console %q)", err, ncons.all())
		}
		r, err := chromedp.Run(nctx, chromedp.Evaluate[apiResult](`(async () => {
			try { await tessera.createEngine({model: "/models/stories260K.gguf"}); return {Content: "loaded"}; }
			catch (e) { return {Content: e.code}; }
		})()`, chromedp.EvalAwaitPromise))
		if err != nil || r.Content != "no-webgpu" {
			t.Errorf("createEngine without WebGPU: %q, %v; want no-webgpu", r.Content, err)
		}

		// The CPU fallback: an AbortSignal stops it mid-generation, which
		// needs the engine to give the worker's event loop a turn between
		// steps (the CPU backend never waits on anything by itself).
		want := runNative(t, stories, runtime.Request{Prompt: "Once", MaxTokens: 3})
		r, err = chromedp.Run(nctx, chromedp.Evaluate[apiResult](`(async () => {
			try {
				const engine = await tessera.createEngine({model: "/models/stories260K.gguf", device: "cpu", quant: "f32"});
				const ctl = new AbortController();
				let before = 0, after = 0, code = "";
				try {
					for await (const c of await engine.completions.create({prompt: "Once", max_tokens: 5000, ignore_eos: true, temperature: 0, stream: true, signal: ctl.signal})) {
						if (!(c.tessera && c.tessera.token_id >= 0)) continue;
						if (ctl.signal.aborted) after++; else if (++before === 20) ctl.abort();
					}
				} catch (e) { code = e.code + "/" + e.name; }
				const again = await engine.completions.create({prompt: "Once", max_tokens: 3, temperature: 0});
				const out = {Chunks: before, Usage: after, Finish: code, IDs: again.tessera.token_ids, Content: engine.model.backend};
				await engine.unload();
				return out;
			} catch (e) { return {Err: e.code + ": " + e.message}; }
		})()`, chromedp.EvalAwaitPromise))
		if err != nil || r.Err != "" {
			t.Fatalf("the CPU fallback: %v %s (console %q)", err, r.Err, ncons.all())
		}
		if r.Content != "cpu" || r.Finish != "aborted/AbortError" || r.Chunks != 20 || r.Usage > 8 || !slices.Equal(r.IDs, want.IDs) {
			t.Errorf("CPU fallback (%s): abort after 20 tokens gave %q and %d more tokens (want at most a few), then %v (native %v)",
				r.Content, r.Finish, r.Usage, r.IDs, want.IDs)
		}
		t.Logf("CPU fallback: %d more tokens after abort", r.Usage)
	})

	time.Sleep(200 * time.Millisecond)
	for _, m := range cons.problems() {
		// The bad and missing files fail on purpose.
		if !strings.Contains(m, "bad.gguf") && !strings.Contains(m, "404 (Not Found)") { // missing.gguf
			t.Errorf("console: %s", m)
		}
	}
}
