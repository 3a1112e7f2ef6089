package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeServe is an OpenAI-style completions server that streams one chunk
// per requested token, then the usage chunk and [DONE], and misbehaves in
// the ways its fields ask for.
type fakeServe struct {
	delay      time.Duration                           // before each chunk
	fail       func(n int64) (status int, body string) // status 0: serve request n (0-based, by arrival) normally
	streamErr  bool                                    // send an error event after the first chunk
	noUsage    bool                                    // leave the usage chunk out
	noDone     bool                                    // end the stream without [DONE]
	notSSE     bool                                    // answer 200 with a plain JSON body
	garbage    bool                                    // send a chunk that is not JSON
	block      bool                                    // after the first chunk, wait for the client to go away
	requireKey string                                  // answer 401 unless this bearer key comes
	noModels   bool                                    // 404 on /v1/models
	barrier    int                                     // the first barrier requests wait until that many have arrived

	arrived     atomic.Int64
	modelsCalls atomic.Int64
	started     chan struct{} // gets a value (without blocking) as each request arrives
	allHere     chan struct{} // closed when barrier requests have arrived
	barrierMiss atomic.Bool

	mu   sync.Mutex
	reqs []map[string]any
}

func (f *fakeServe) start(t *testing.T) *httptest.Server {
	t.Helper()
	f.started = make(chan struct{}, 1)
	f.allHere = make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		f.modelsCalls.Add(1)
		if f.noModels {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
	})
	mux.HandleFunc("POST /v1/completions", f.completions)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func (f *fakeServe) completions(w http.ResponseWriter, r *http.Request) {
	n := f.arrived.Add(1) - 1
	select {
	case f.started <- struct{}{}:
	default:
	}
	var req map[string]any
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	if f.barrier > 0 && n < int64(f.barrier) {
		if n == int64(f.barrier)-1 {
			close(f.allHere)
		}
		select {
		case <-f.allHere:
		case <-time.After(3 * time.Second):
			f.barrierMiss.Store(true)
		}
	}
	if f.requireKey != "" && r.Header.Get("Authorization") != "Bearer "+f.requireKey {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"bad api key","type":"authentication_error","code":"invalid_api_key"}}`)
		return
	}
	if f.fail != nil {
		if status, body := f.fail(n); status != 0 {
			w.WriteHeader(status)
			fmt.Fprint(w, body)
			return
		}
	}
	if f.notSSE {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"x","object":"text_completion","choices":[{"index":0,"text":"hello","finish_reason":"length"}]}`)
		return
	}
	maxTokens := int(req["max_tokens"].(float64))
	prompt := len(req["prompt"].([]any))
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	send := func(s string) {
		fmt.Fprintf(w, "data: %s\n\n", s)
		flusher.Flush()
	}
	for i := range maxTokens {
		select {
		case <-time.After(f.delay):
		case <-r.Context().Done():
			return
		}
		if f.garbage && i == 1 {
			send(`{"choices": [`)
			return
		}
		finish := "null"
		if i == maxTokens-1 {
			finish = `"length"`
		}
		send(fmt.Sprintf(`{"id":"cmpl-%d","object":"text_completion","choices":[{"index":0,"text":" t%d","finish_reason":%s}],"usage":null}`, n, i, finish))
		if i == 0 && f.streamErr {
			send(`{"error":{"message":"out of KV cache","type":"server_error","code":503}}`)
			return
		}
		if i == 0 && f.block {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
			return
		}
	}
	if !f.noUsage {
		send(fmt.Sprintf(`{"id":"cmpl-%d","object":"text_completion","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
			n, prompt, maxTokens, prompt+maxTokens))
	}
	if !f.noDone {
		send("[DONE]")
	}
}

func (f *fakeServe) requests() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reqs)
}

// benchServeCLI runs bench-serve with --json and decodes its report; the
// report is nil where nothing parsed from stdout.
func benchServeCLI(t *testing.T, ctx context.Context, args ...string) (int, *benchServeReport, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli(ctx, append([]string{"bench-serve", "--json"}, args...), &env{stdout: &out, stderr: &errb, stdin: strings.NewReader("")})
	var r *benchServeReport
	if out.Len() > 0 {
		r = new(benchServeReport)
		if err := json.Unmarshal(out.Bytes(), r); err != nil {
			t.Fatalf("--json output does not parse: %v\n%s", err, out.String())
		}
	}
	return code, r, errb.String()
}

func TestBenchServeCounts(t *testing.T) {
	f := &fakeServe{delay: time.Millisecond, barrier: 4}
	srv := f.start(t)
	code, r, stderr := benchServeCLI(t, context.Background(), "--url", srv.URL+"/", "--concurrency", "4", "--requests", "12",
		"--prompt-tokens", "8", "--gen-tokens", "5", "--seed", "7")
	if code != 0 || r == nil {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if f.barrierMiss.Load() {
		t.Error("4 requests were never in flight at once with --concurrency 4")
	}
	if r.Completed != 12 || r.Failed != 0 || len(r.Errors) != 0 || r.Interrupted {
		t.Errorf("completed %d, failed %d, errors %q, interrupted %v; want 12, 0, none, false", r.Completed, r.Failed, r.Errors, r.Interrupted)
	}
	if r.TotalInputTokens != 12*8 || r.TotalOutputTokens != 12*5 {
		t.Errorf("tokens %d in, %d out; want 96, 60", r.TotalInputTokens, r.TotalOutputTokens)
	}
	if r.Model != "fake-model" || f.modelsCalls.Load() != 1 {
		t.Errorf("model %q after %d calls of /v1/models; want fake-model after 1", r.Model, f.modelsCalls.Load())
	}
	if r.URL != srv.URL || r.Concurrency != 4 || r.Requests != 12 || r.PromptTokens != 8 || r.GenTokens != 5 || r.Seed != 7 {
		t.Errorf("report echoes the options wrongly: %+v", r)
	}
	checkSaneLatencies(t, r)

	// One warm-up round (--concurrency requests) comes first, uncounted.
	reqs := f.requests()
	if len(reqs) != 4+12 {
		t.Fatalf("server saw %d requests, want 4 warm-up and 12 measured", len(reqs))
	}
	prompts := map[string]bool{}
	for _, req := range reqs {
		if req["model"] != "fake-model" || req["max_tokens"] != 5.0 || req["temperature"] != 0.0 ||
			req["stream"] != true || req["ignore_eos"] != true {
			t.Errorf("request body %v", req)
		}
		if so, _ := req["stream_options"].(map[string]any); so["include_usage"] != true {
			t.Errorf("stream_options %v, want include_usage true", req["stream_options"])
		}
		p := req["prompt"].([]any)
		if len(p) != 8 {
			t.Errorf("prompt of %d ids, want 8", len(p))
		}
		for _, id := range p {
			if v := id.(float64); v < promptIDMin || v >= promptIDMax || v != math.Trunc(v) {
				t.Errorf("prompt id %v outside [%d, %d)", v, promptIDMin, promptIDMax)
			}
		}
		prompts[fmt.Sprint(p)] = true
	}
	if len(prompts) != 16 {
		t.Errorf("%d distinct prompts among 16 requests; a prefix cache would make them trivial", len(prompts))
	}

	// --warmup 0 sends only the measured requests; --warmup 3, three more.
	for _, w := range []int{0, 3} {
		f := &fakeServe{delay: time.Millisecond}
		srv := f.start(t)
		code, r, stderr := benchServeCLI(t, context.Background(), "--url", srv.URL, "--concurrency", "4", "--requests", "12",
			"--prompt-tokens", "8", "--gen-tokens", "5", "--warmup", fmt.Sprint(w))
		if code != 0 || r == nil || r.Completed != 12 {
			t.Fatalf("--warmup %d: exit %d, report %+v: %s", w, code, r, stderr)
		}
		if n := len(f.requests()); n != 12+w {
			t.Errorf("--warmup %d: server saw %d requests, want %d", w, n, 12+w)
		}
	}
}

// checkSaneLatencies checks the orderings that hold whatever the timing:
// percentiles rise, every request's first token precedes its end, and every
// request ends within the run.
func checkSaneLatencies(t *testing.T, r *benchServeReport) {
	t.Helper()
	for _, m := range []struct {
		name           string
		mean, p50, p99 float64
	}{
		{"ttft", r.MeanTTFTms, r.MedianTTFTms, r.P99TTFTms},
		{"tpot", r.MeanTPOTms, r.MedianTPOTms, r.P99TPOTms},
		{"itl", r.MeanITLms, r.MedianITLms, r.P99ITLms},
		{"e2el", r.MeanE2ELms, r.MedianE2ELms, r.P99E2ELms},
	} {
		if !(m.mean > 0 && m.p50 > 0 && m.p50 <= m.p99) {
			t.Errorf("%s: mean %g, p50 %g, p99 %g; want positive and p50 <= p99", m.name, m.mean, m.p50, m.p99)
		}
	}
	if r.MedianTTFTms > r.MedianE2ELms || r.P99TTFTms > r.P99E2ELms || r.MeanTTFTms > r.MeanE2ELms {
		t.Errorf("ttft (%g, %g, %g) beyond e2e latency (%g, %g, %g)", r.MeanTTFTms, r.MedianTTFTms, r.P99TTFTms, r.MeanE2ELms, r.MedianE2ELms, r.P99E2ELms)
	}
	if r.P99E2ELms > r.DurationS*1000 {
		t.Errorf("p99 e2e latency %g ms beyond the run's %g s", r.P99E2ELms, r.DurationS)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	if !near(r.RequestThroughput*r.DurationS, float64(r.Completed)) ||
		!near(r.OutputThroughput*r.DurationS, float64(r.TotalOutputTokens)) ||
		!near(r.TotalTokenThroughput*r.DurationS, float64(r.TotalInputTokens+r.TotalOutputTokens)) {
		t.Errorf("throughputs %g req/s, %g and %g tok/s disagree with the counts over %g s",
			r.RequestThroughput, r.OutputThroughput, r.TotalTokenThroughput, r.DurationS)
	}
}

// TestBenchServeFailures checks that each way a server can fail counts as
// failed requests with its message, and that the run goes on.
func TestBenchServeFailures(t *testing.T) {
	always := func(status int, body string) func(int64) (int, string) {
		return func(int64) (int, string) { return status, body }
	}
	tests := []struct {
		name      string
		f         *fakeServe
		code      int
		completed int
		want      string
	}{
		{"429 with an OpenAI error", &fakeServe{fail: always(429, `{"error":{"message":"slow down","type":"rate_limit_error","code":429}}`)}, 1, 0, "429 Too Many Requests: slow down (rate_limit_error)"},
		{"500 with text", &fakeServe{fail: always(500, "boom\n")}, 1, 0, "500 Internal Server Error: boom"},
		{"every other 503", &fakeServe{fail: func(n int64) (int, string) {
			if n%2 == 1 {
				return 503, `{"error":{"message":"busy"}}`
			}
			return 0, ""
		}}, 0, 3, "503 Service Unavailable: busy"},
		{"error in the stream", &fakeServe{streamErr: true}, 1, 0, "error in the stream: out of KV cache (server_error)"},
		{"stream without [DONE]", &fakeServe{noDone: true}, 1, 0, "stream ended before data: [DONE]"},
		{"not an event stream", &fakeServe{notSSE: true}, 1, 0, "no server-sent events"},
		{"chunk not JSON", &fakeServe{garbage: true}, 1, 0, "is not JSON"},
		{"wrong api key", &fakeServe{requireKey: "secret"}, 1, 0, "401 Unauthorized: bad api key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := tt.f.start(t)
			code, r, stderr := benchServeCLI(t, context.Background(), "--url", srv.URL, "--concurrency", "3", "--requests", "6",
				"--prompt-tokens", "4", "--gen-tokens", "3", "--model", "m")
			if code != tt.code || r == nil {
				t.Fatalf("exit %d, want %d: %s", code, tt.code, stderr)
			}
			if r.Completed != tt.completed || r.Failed != 6-tt.completed {
				t.Errorf("completed %d, failed %d; want %d, %d", r.Completed, r.Failed, tt.completed, 6-tt.completed)
			}
			if len(r.Errors) != 1 || !strings.Contains(r.Errors[0], tt.want) {
				t.Errorf("errors %q, want one containing %q", r.Errors, tt.want)
			}
			if tt.completed == 0 && !strings.Contains(stderr, "all 6 requests failed") {
				t.Errorf("stderr %q does not say all failed", stderr)
			}
			if tt.completed > 0 {
				checkSaneLatencies(t, r)
			}
		})
	}
}

// TestBenchServeNoUsage checks that output tokens are counted from the
// chunks when the server sends no usage.
func TestBenchServeNoUsage(t *testing.T) {
	f := &fakeServe{noUsage: true}
	srv := f.start(t)
	code, r, stderr := benchServeCLI(t, context.Background(), "--url", srv.URL, "--concurrency", "2", "--requests", "4",
		"--prompt-tokens", "6", "--gen-tokens", "7")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if r.Completed != 4 || r.TotalOutputTokens != 4*7 || r.TotalInputTokens != 4*6 {
		t.Errorf("completed %d, %d tokens in, %d out; want 4, 24, 28", r.Completed, r.TotalInputTokens, r.TotalOutputTokens)
	}
}

// TestBenchServeModelAndKey checks where the model name and the API key
// come from.
func TestBenchServeModelAndKey(t *testing.T) {
	t.Run("--model skips /v1/models", func(t *testing.T) {
		f := &fakeServe{}
		srv := f.start(t)
		if code, _, stderr := benchServeCLI(t, context.Background(), "--url", srv.URL, "--requests", "2", "--gen-tokens", "2", "--model", "mine"); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if f.modelsCalls.Load() != 0 {
			t.Error("asked /v1/models though --model was given")
		}
		for _, req := range f.requests() {
			if req["model"] != "mine" {
				t.Errorf("model %v, want mine", req["model"])
			}
		}
	})
	t.Run("no /v1/models omits the model", func(t *testing.T) {
		f := &fakeServe{noModels: true}
		srv := f.start(t)
		code, r, stderr := benchServeCLI(t, context.Background(), "--url", srv.URL, "--requests", "2", "--gen-tokens", "2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stderr, "404") || r.Model != "" {
			t.Errorf("stderr %q, model %q; want a note about the 404 and no model", stderr, r.Model)
		}
		for _, req := range f.requests() {
			if _, ok := req["model"]; ok {
				t.Errorf("model %v sent, want none", req["model"])
			}
		}
	})
	t.Run("--api-key", func(t *testing.T) {
		t.Setenv("TESSERA_API_KEY", "")
		srv := (&fakeServe{requireKey: "k1"}).start(t)
		if code, _, stderr := benchServeCLI(t, context.Background(), "--url", srv.URL, "--requests", "2", "--gen-tokens", "2", "--api-key", "k1"); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
	})
	t.Run("TESSERA_API_KEY", func(t *testing.T) {
		t.Setenv("TESSERA_API_KEY", "k2")
		srv := (&fakeServe{requireKey: "k2"}).start(t)
		if code, _, stderr := benchServeCLI(t, context.Background(), "--url", srv.URL, "--requests", "2", "--gen-tokens", "2"); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if _, _, help := runCLI("bench-serve", "-h"); strings.Contains(help, "k2") {
			t.Errorf("-h shows the key: %s", help)
		}
	})
}

// TestBenchServeTable checks the default output reads as a table.
func TestBenchServeTable(t *testing.T) {
	srv := (&fakeServe{}).start(t)
	code, out, stderr := runCLI("bench-serve", "--url", srv.URL, "--requests", "3", "--gen-tokens", "4", "--concurrency", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"fake-model", "3 completed, 0 failed", "req/s", "output tok/s", "ttft ", "tpot ", "itl ", "p99"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestBenchServeUnreachable checks that a URL nothing listens on fails in
// one clear line, quickly, with and without --model.
func TestBenchServeUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	dead := srv.URL
	srv.Close()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "/v1/models"},
		{[]string{"--model", "m"}, "all 3 requests failed"},
	} {
		begin := time.Now()
		code, _, stderr := benchServeCLI(t, context.Background(), append([]string{"--url", dead, "--requests", "3", "--timeout", "3s"}, tt.args...)...)
		if code != 1 || !strings.Contains(stderr, tt.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 1 and one line with %q", tt.args, code, stderr, tt.want)
		}
		if d := time.Since(begin); d > 3*time.Second {
			t.Errorf("%v: took %v", tt.args, d)
		}
	}
}

// TestBenchServeTimeout checks --timeout bounds a request that never ends.
func TestBenchServeTimeout(t *testing.T) {
	srv := (&fakeServe{block: true}).start(t)
	code, r, stderr := benchServeCLI(t, context.Background(), "--url", srv.URL, "--requests", "2", "--concurrency", "2",
		"--gen-tokens", "4", "--timeout", "100ms", "--model", "m")
	if code != 1 || r == nil || r.Failed != 2 {
		t.Fatalf("exit %d, report %+v: %s", code, r, stderr)
	}
	if len(r.Errors) != 1 || !strings.Contains(r.Errors[0], "timed out after 100ms") {
		t.Errorf("errors %q, want a timeout", r.Errors)
	}
}

// TestBenchServeCancel checks that cancelling the context stops the run
// promptly, sends no more requests, and reports what it had.
func TestBenchServeCancel(t *testing.T) {
	f := &fakeServe{block: true}
	srv := f.start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		code   int
		r      *benchServeReport
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, r, stderr := benchServeCLI(t, ctx, "--url", srv.URL, "--requests", "100", "--concurrency", "2", "--gen-tokens", "4", "--model", "m")
		done <- result{code, r, stderr}
	}()
	select {
	case <-f.started:
	case <-time.After(3 * time.Second):
		t.Fatal("no request reached the server")
	}
	cancel()
	var res result
	select {
	case res = <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("bench-serve still running 3 s after cancellation")
	}
	if res.code != 1 || !strings.Contains(res.stderr, "interrupted") || !strings.Contains(res.stderr, context.Canceled.Error()) {
		t.Errorf("exit %d, stderr %q; want 1 and interrupted", res.code, res.stderr)
	}
	if res.r == nil || !res.r.Interrupted || res.r.Failed != 0 {
		t.Errorf("report %+v; want interrupted, the cut-off requests not counted as failed", res.r)
	}
	if n := f.arrived.Load(); n > 2 {
		t.Errorf("%d requests sent after cancellation; want at most the 2 in flight", n)
	}
}

func TestBenchServeUsage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "--url is required"},
		{[]string{"--url", "localhost:8080"}, "want http://"},
		{[]string{"--url", "ftp://x"}, "want http://"},
		{[]string{"--url", "http://x", "--concurrency", "0"}, "at least 1"},
		{[]string{"--url", "http://x", "--requests", "0"}, "at least 1"},
		{[]string{"--url", "http://x", "--warmup", "-2"}, "--warmup must be at least 0"},
		{[]string{"--url", "http://x", "--gen-tokens", "0"}, "at least 1"},
		{[]string{"--url", "http://x", "--prompt-tokens", "4", "--shared-prefix", "5"}, "--shared-prefix"},
		{[]string{"--url", "http://x", "--timeout", "0s"}, "--timeout"},
		{[]string{"--url", "http://x", "--requests", "many"}, "invalid value"},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI(append([]string{"bench-serve"}, tt.args...)...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}

// TestBenchServePrompts checks prompts are deterministic per seed and
// request, distinct between requests, and share exactly --shared-prefix.
func TestBenchServePrompts(t *testing.T) {
	b := &serveBench{o: benchServeOptions{Seed: 3, PromptTokens: 10, SharedPrefix: 4}}
	b.prefix = promptIDs(b.o.Seed, math.MaxUint64, b.o.SharedPrefix)
	p0, p1 := b.prompt(0), b.prompt(1)
	if len(p0) != 10 || len(p1) != 10 {
		t.Fatalf("prompt lengths %d, %d; want 10", len(p0), len(p1))
	}
	if !slices.Equal(p0[:4], p1[:4]) || slices.Equal(p0[4:], p1[4:]) {
		t.Errorf("prompts %v and %v: want the first 4 ids shared and the rest not", p0, p1)
	}
	if !slices.Equal(p0, b.prompt(0)) {
		t.Error("the same request's prompt differs between calls")
	}
	if slices.Equal(promptIDs(1, 0, 16), promptIDs(2, 0, 16)) {
		t.Error("different seeds give the same prompt")
	}
	for _, id := range promptIDs(9, 9, 10000) {
		if id < promptIDMin || id >= promptIDMax {
			t.Fatalf("id %d outside [%d, %d)", id, promptIDMin, promptIDMax)
		}
	}
}

func TestBenchServePercentile(t *testing.T) {
	tests := []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},
		{[]float64{5}, 99, 5},
		{[]float64{1, 2, 3, 4}, 0, 1},
		{[]float64{1, 2, 3, 4}, 50, 2.5},
		{[]float64{1, 2, 3, 4}, 99, 3.97},
		{[]float64{1, 2, 3, 4}, 100, 4},
		{[]float64{1, 2, 3}, 50, 2},
		{[]float64{10, 20}, 25, 12.5},
	}
	for _, tt := range tests {
		if got := percentile(tt.xs, tt.p); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("percentile(%v, %g) = %g, want %g", tt.xs, tt.p, got, tt.want)
		}
	}
	mean, p50, p99 := latencyStats([]time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond})
	if mean != 2 || p50 != 2 || math.Abs(p99-2.98) > 1e-12 {
		t.Errorf("latencyStats = %g, %g, %g; want 2, 2, 2.98", mean, p50, p99)
	}
}

func TestBenchServeReadSSE(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"plain", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"crlf, comments, other fields", ": keep-alive\r\nevent: x\r\nid: 1\r\ndata: a\r\n\r\n", []string{"a"}},
		{"no space, multi-line", "data:a\ndata: b\n\n", []string{"a\nb"}},
		{"last event unterminated", "data: a\n\ndata: b", []string{"a", "b"}},
		{"stops at [DONE]", "data: a\n\ndata: [DONE]\n\ndata: after\n\n", []string{"a", "[DONE]"}},
		{"blank lines only", "\n\n\n", nil},
	}
	for _, tt := range tests {
		var got []string
		err := readSSE(strings.NewReader(tt.in), func(d string) (bool, error) {
			got = append(got, d)
			return d == "[DONE]", nil
		})
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	long := "data: " + strings.Repeat("x", 1<<20) + "\n\n"
	if err := readSSE(strings.NewReader(long), func(string) (bool, error) { return false, nil }); err != nil {
		t.Errorf("a 1 MiB event: %v", err)
	}
	stop := errors.New("stop")
	if err := readSSE(strings.NewReader("data: a\n\n"), func(string) (bool, error) { return false, stop }); !errors.Is(err, stop) {
		t.Errorf("the callback's error came back as %v", err)
	}
}
