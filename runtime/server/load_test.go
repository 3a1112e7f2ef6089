package server_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tessera-llm/tessera/models/chat"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/server"
)

// TestConcurrentStreams: 64 streaming clients at once each get the text
// they get alone, though the engine batches them and queues 48.
func TestConcurrentStreams(t *testing.T) {
	for dev, eng := range engines(t) {
		t.Run(dev, func(t *testing.T) {
			_, url := serve(t, eng, server.Options{})
			c := client(url)
			const clients = 64
			maxTokens := func(i int) int64 { return int64(20 + i%7*5) }
			alone := map[int]string{}
			for i := range clients {
				k := i % (len(prompts) * 7)
				if _, ok := alone[k]; !ok {
					alone[k], _ = generate(t, eng, runtime.Request{Prompt: prompts[k%len(prompts)], MaxTokens: int(maxTokens(k))})
				}
			}
			got := make([]string, clients)
			errs := make([]error, clients)
			var wg sync.WaitGroup
			for i := range clients {
				wg.Go(func() {
					k := i % (len(prompts) * 7)
					stream := c.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{Model: modelName,
						Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompts[k%len(prompts)])},
						MaxTokens: openai.Int(maxTokens(k)), Temperature: openai.Float(0)})
					var text strings.Builder
					for stream.Next() {
						if ch := stream.Current(); len(ch.Choices) > 0 {
							text.WriteString(ch.Choices[0].Text)
						}
					}
					got[i], errs[i] = text.String(), stream.Err()
				})
			}
			wg.Wait()
			for i := range clients {
				if want := alone[i%(len(prompts)*7)]; errs[i] != nil || got[i] != want {
					t.Errorf("client %d (err %v):\n got %q\nwant %q", i, errs[i], got[i], want)
				}
			}
		})
	}
}

// TestQueueFull: past the engine's MaxSeqs and the queue, requests get 429
// with Retry-After and an OpenAI error; the server stays up and serves once
// the flood is over.
func TestQueueFull(t *testing.T) {
	eng, err := runtime.Load(modelPath(t), runtime.Options{Device: "cpu", Budgets: runtime.Budgets{MaxSeqs: 16}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	seqs := eng.Budgets().MaxSeqs
	if seqs != 16 {
		t.Fatalf("MaxSeqs 16 gave an engine of %d", seqs)
	}
	_, url := serve(t, eng, server.Options{MaxQueue: 2})
	const flood = 60 // 16 run, 2 wait, the rest are refused
	codes := make([]int, flood)
	var retry sync.Map
	var wg sync.WaitGroup
	for i := range flood {
		wg.Go(func() {
			code, body, h := post(t, url+"/v1/completions", map[string]any{"model": modelName, "prompt": prompts[i%len(prompts)],
				"max_tokens": 300, "temperature": 0, "ignore_eos": true})
			codes[i] = code
			if code == http.StatusTooManyRequests {
				errorMessage(t, body)
				retry.Store(h.Get("Retry-After"), true)
			}
		})
	}
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[200] < seqs || count[429] == 0 || count[200]+count[429] != flood {
		t.Errorf("status counts %v: want at least %d OK, some 429, nothing else", count, seqs)
	}
	if _, ok := retry.Load("1"); !ok {
		t.Error("429 without Retry-After: 1")
	}
	code, body, _ := post(t, url+"/v1/completions", map[string]any{"model": modelName, "prompt": prompts[0], "max_tokens": 5})
	if code != 200 {
		t.Errorf("after the flood: %d %v", code, body)
	}
}

// TestDisconnect: a client that goes away mid-stream has its sequence
// cancelled and its KV blocks freed. The model is a synthetic tiny Llama
// 3 with a context of 16,384 tokens, so that a request of 16,000 tokens
// runs for seconds: stories260K writes its whole 512-token context in
// tens of milliseconds, and the engine never waits for a reader, so on a
// loaded machine its stream could end before the client read three events.
func TestDisconnect(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	eng, _, stream := longStream(t, ctx)
	for i := 0; i < 3 && stream.Next(); i++ {
	}
	if m := eng.Metrics(); m.Running != 1 || m.KV.Used == 0 {
		t.Fatalf("mid-stream: %d running, %d blocks used (%v)", m.Running, m.KV.Used, stream.Err())
	}
	cancel()
	stream.Close()
	eventually(t, "after the disconnect", func() string { return busy(eng) })
	if n := eng.Steps(); n >= 8000 { // a step a token: the sequence was not cut short
		t.Errorf("%d steps for a request of 16,000 tokens that disconnected after three", n)
	}
}

// longStream serves the synthetic tiny Llama 3 of 16,384 tokens' context
// and starts a streamed greedy request of 16,000 tokens on it, which runs
// for seconds (stories260K writes its whole 512-token context in tens of
// milliseconds): the engine, the server's URL and the stream.
func longStream(t *testing.T, ctx context.Context) (*runtime.Engine, string, *ssestream.Stream[openai.Completion]) {
	t.Helper()
	const ctxLen = 16384
	eng, err := runtime.Load(synthModel(t, "tiny-llama3", ctxLen), runtime.Options{Device: "cpu", Context: ctxLen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	_, url := serve(t, eng, server.Options{})
	c := client(url)
	stream := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: modelName,
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompts[0])},
		MaxTokens: openai.Int(16000), Temperature: openai.Float(0)}, option.WithJSONSet("ignore_eos", true))
	return eng, url, stream
}

// seenRunning waits until eng runs a sequence (true) or the request
// whose status done receives has ended first (false).
func seenRunning(eng *runtime.Engine, done <-chan int) bool {
	for eng.Metrics().Running == 0 {
		select {
		case <-done:
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return true
}

// eventually fails the test if check still reports a problem after 10 s.
func eventually(t *testing.T, when string, check func() string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		problem := check()
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s %s: %s", when, problem)
		}
	}
}

// busy says what the engine still holds, or "" when it holds nothing.
func busy(eng *runtime.Engine) string {
	if m := eng.Metrics(); m.Running+m.Waiting != 0 || m.KV.Used != 0 {
		return fmt.Sprintf("%d running, %d waiting, %d blocks used", m.Running, m.Waiting, m.KV.Used)
	}
	return ""
}

// TestDeadline: a request that outlives the server's timeout ends with
// 504, streamed or not, and its sequence is freed.
func TestDeadline(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{RequestTimeout: 100 * time.Millisecond})
	body := map[string]any{"model": modelName, "prompt": prompts[0], "max_tokens": 100000, "ignore_eos": true}
	code, res, _ := post(t, url+"/v1/completions", body)
	if code != http.StatusGatewayTimeout || !strings.Contains(errorMessage(t, res), "timeout") {
		t.Errorf("status %d: %v", code, res)
	}
	c := client(url)
	stream := c.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{Model: modelName,
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompts[0])}, MaxTokens: openai.Int(100000)},
		option.WithJSONSet("ignore_eos", true))
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Errorf("stream past the deadline: %v", err)
	}
	// The sequence is freed as the engine sees the cancellation: soon,
	// but not necessarily before the client has read the error.
	eventually(t, "after the deadline", func() string { return busy(eng) })
}

// TestBadRequests: malformed, mistyped and absurd requests get a clear
// 4xx with an OpenAI error body, never a 500; unknown fields are ignored.
func TestBadRequests(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{MaxBodyBytes: 1 << 20})
	long := strings.Repeat("Once upon a time there was a dog. ", 400)
	for _, tc := range []struct {
		name, path string
		body       any
		code       int
		says       string
	}{
		{"not json", "/v1/completions", `{"prompt": "a",`, 400, "not valid JSON"},
		{"two values", "/v1/completions", `{"prompt": "a"} {}`, 400, "more than one"},
		{"wrong type", "/v1/completions", `{"prompt": "a", "temperature": "hot"}`, 400, "temperature"},
		{"wrong type int", "/v1/chat/completions", `{"messages": [{"role":"user","content":"a"}], "max_tokens": 1.5}`, 400, "max_tokens"},
		{"prompt type", "/v1/completions", `{"prompt": {"a": 1}}`, 400, "prompt"},
		{"n 10000", "/v1/completions", map[string]any{"prompt": "a", "n": 10000}, 400, "n must be"},
		{"max_tokens -1", "/v1/completions", map[string]any{"prompt": "a", "max_tokens": -1}, 400, "max_tokens"},
		{"chat max_tokens 0", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "a"}}, "max_tokens": 0}, 400, "max_tokens"},
		{"temperature 1e9", "/v1/completions", map[string]any{"prompt": "a", "temperature": 1e9}, 400, "temperature"},
		{"top_p 0", "/v1/completions", map[string]any{"prompt": "a", "top_p": 0}, 400, "top_p"},
		{"top_k -5", "/v1/completions", map[string]any{"prompt": "a", "top_k": -5}, 400, "top_k"},
		{"five stops", "/v1/completions", map[string]any{"prompt": "a", "stop": []string{"a", "b", "c", "d", "e"}}, 400, "stop"},
		{"top_logprobs 50", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "a"}}, "logprobs": true, "top_logprobs": 50}, 400, "top_logprobs"},
		{"no messages", "/v1/chat/completions", map[string]any{"messages": []any{}}, 400, "messages"},
		{"bad role", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "wizard", "content": "a"}}}, 400, "role"},
		{"image", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url"}}}}}, 400, "image_url"},
		{"no prompt", "/v1/completions", map[string]any{"max_tokens": 3}, 400, "prompt"},
		{"token outside vocab", "/v1/completions", map[string]any{"prompt": []int{1, 99999}}, 400, "vocabulary"},
		{"prompt too long", "/v1/completions", map[string]any{"prompt": long + long}, 400, "context"},
		{"unknown model", "/v1/completions", map[string]any{"model": "gpt-9", "prompt": "a"}, 404, "does not exist"},
		{"huge body", "/v1/completions", `{"prompt": "` + strings.Repeat("a", 2<<20) + `"}`, 413, "larger than"},
		{"unknown endpoint", "/v1/audio/speech", map[string]any{"input": "a"}, 404, "no endpoint"},
		{"no embedding models", "/v1/embeddings", map[string]any{"input": "a"}, 404, "no embedding models"},
		{"unknown fields ignored", "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 2, "logit_bias": map[string]int{"5": 1}, "whatever": true}, 200, ""},
		{"logit_bias key", "/v1/completions", map[string]any{"prompt": "a", "logit_bias": map[string]int{"x": 1}}, 400, "logit_bias"},
		{"logit_bias value", "/v1/completions", map[string]any{"prompt": "a", "logit_bias": map[string]int{"5": 500}}, 400, "logit_bias"},
		{"logit_bias outside", "/v1/completions", map[string]any{"prompt": "a", "logit_bias": map[string]int{"5000": 5}}, 400, "vocabulary"},
		{"detokenize outside", "/detokenize", map[string]any{"tokens": []int{-3}}, 400, "vocabulary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := post(t, url+tc.path, tc.body)
			if code != tc.code {
				t.Fatalf("status %d, want %d: %v", code, tc.code, body)
			}
			if tc.says != "" {
				if msg := errorMessage(t, body); !strings.Contains(msg, tc.says) {
					t.Errorf("message %q does not say %q", msg, tc.says)
				}
			}
		})
	}
	// A 50 MB body is refused without reading it all.
	code, _, _ := post(t, url+"/v1/completions", bytes.Repeat([]byte(" "), 50<<20))
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("50 MB body: %d", code)
	}
}

// TestAPIKey: with a key, every endpoint but /health and /metrics wants it.
func TestAPIKey(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{APIKey: "sesame"})
	body := map[string]any{"prompt": "a", "max_tokens": 2}
	for _, h := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "sesame"}} {
		if code, res, _ := post(t, url+"/v1/completions", body, h...); code != 401 || !strings.Contains(errorMessage(t, res), "API key") {
			t.Errorf("header %v: %d %v", h, code, res)
		}
	}
	if code, _, _ := post(t, url+"/v1/completions", body, "Authorization", "Bearer sesame"); code != 200 {
		t.Errorf("right key: %d", code)
	}
	c, keyed := client(url), client(url, optionKey("sesame"))
	if _, err := c.Models.List(context.Background()); err == nil {
		t.Error("models listed with the wrong key")
	}
	if list, err := keyed.Models.List(context.Background()); err != nil || len(list.Data) != 1 || list.Data[0].ID != modelName {
		t.Errorf("models with the key: %v %v", list, err)
	}
	for _, p := range []string{"/health", "/metrics"} {
		if code, _ := get(t, url+p); code != 200 {
			t.Errorf("%s without a key: %d", p, code)
		}
	}
}

// TestHealthAndDrain: /health is 503 while loading, 200 when ready, and
// 503 while draining, when new requests are refused and running ones end.
func TestHealthAndDrain(t *testing.T) {
	eng := cpuEngine(t)
	s := server.New(server.Options{})
	ts := newHTTPServer(t, s)
	if code, body := get(t, ts+"/health"); code != 503 || !strings.Contains(body, "loading") {
		t.Errorf("loading: %d %s", code, body)
	}
	if code, _, _ := post(t, ts+"/v1/completions", map[string]any{"prompt": "a"}); code != 503 {
		t.Errorf("request while loading: %d", code)
	}
	s.Add(modelName, eng)
	s.Ready()
	if code, _ := get(t, ts+"/health"); code != 200 {
		t.Errorf("ready: %d", code)
	}
	// A running request outlives the start of the drain and completes. It
	// runs for tens of milliseconds: where it ended before this goroutine
	// saw it running (a loaded machine), it is sent again (5 at most).
	var done chan int
	for attempt := 1; ; attempt++ {
		done = make(chan int, 1)
		go func() {
			code, _, _ := post(t, ts+"/v1/completions", map[string]any{"prompt": "a", "max_tokens": 400, "ignore_eos": true})
			done <- code
		}()
		if seenRunning(eng, done) {
			break
		}
		if attempt == 5 {
			t.Fatalf("the request ended before it was seen running, %d times", attempt)
		}
	}
	drained := make(chan error)
	go func() { drained <- s.Drain(context.Background()) }()
	// Health says draining once Drain has begun, which the goroutine
	// above may not have done yet.
	eventually(t, "into the drain", func() string {
		if code, body := get(t, ts+"/health"); code != 503 || !strings.Contains(body, "draining") {
			return fmt.Sprintf("health %d %s", code, body)
		}
		return ""
	})
	if code, body, _ := post(t, ts+"/v1/completions", map[string]any{"prompt": "a"}); code != 503 {
		t.Errorf("request while draining: %d %v", code, body)
	}
	if code := <-done; code != 200 {
		t.Errorf("running request ended with %d", code)
	}
	if err := <-drained; err != nil {
		t.Error(err)
	}
}

// TestMetrics: /metrics parses as Prometheus text and its values move as
// requests are served.
func TestMetrics(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{})
	before := scrape(t, url)
	var prompt, gen int
	for _, p := range prompts {
		st := completionUsage(t, url, p)
		prompt, gen = prompt+st[0], gen+st[1]
	}
	post(t, url+"/v1/completions", map[string]any{"prompt": 7})
	after := scrape(t, url)
	lbl := `{model_name="stories260K"}`
	for name, want := range map[string]float64{
		"vllm:prompt_tokens_total" + lbl:                                          float64(prompt),
		"vllm:generation_tokens_total" + lbl:                                      float64(gen),
		"vllm:time_to_first_token_seconds_count" + lbl:                            float64(len(prompts)),
		"vllm:e2e_request_latency_seconds_count" + lbl:                            float64(len(prompts)),
		`tessera_http_requests_total{code="200",endpoint="POST /v1/completions"}`: float64(len(prompts)),
		`tessera_http_requests_total{code="400",endpoint="POST /v1/completions"}`: 1,
	} {
		if d := after[name] - before[name]; d != want {
			t.Errorf("%s moved by %g, want %g", name, d, want)
		}
	}
	if after["vllm:prefix_cache_queries_total"+lbl] <= before["vllm:prefix_cache_queries_total"+lbl] {
		t.Error("prefix cache queries did not move")
	}
	for _, g := range []string{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"} {
		v, ok := after[g+lbl]
		if !ok || v < 0 || v > 1 && strings.HasSuffix(g, "perc") {
			t.Errorf("%s = %g (present %v)", g, v, ok)
		}
	}
}

// TestMetricsDuringRequest: while a request runs, /metrics says one
// request is running and the KV cache is in use. The model is the
// synthetic tiny Llama 3 of TestDisconnect, whose 16,000-token request
// runs for seconds: stories260K ends its story (or fills its 512-token
// context) in tens of milliseconds, on a loaded machine before the
// scrape.
func TestMetricsDuringRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, url, stream := longStream(t, ctx)
	defer stream.Close()
	if !stream.Next() {
		t.Fatalf("the stream ended at once: %v", stream.Err())
	}
	lbl := `{model_name="stories260K"}`
	during := scrape(t, url)
	if during["vllm:num_requests_running"+lbl] != 1 || during["vllm:kv_cache_usage_perc"+lbl] <= 0 {
		t.Errorf("during a request: running %g, KV %g", during["vllm:num_requests_running"+lbl], during["vllm:kv_cache_usage_perc"+lbl])
	}
}

// scrape reads /metrics into name{labels} → value, with expfmt's parser.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("metrics do not parse: %v", err)
	}
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.Metric {
			var labels []string
			for _, l := range m.Label {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				out[strings.Replace(key, "{", "_count{", 1)] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

// completionUsage runs one completion and returns its prompt and
// completion token counts.
func completionUsage(t *testing.T, url, prompt string) [2]int {
	t.Helper()
	code, body, _ := post(t, url+"/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 10, "temperature": 0})
	if code != 200 {
		t.Fatalf("%d %v", code, body)
	}
	u := body["usage"].(map[string]any)
	return [2]int{int(u["prompt_tokens"].(float64)), int(u["completion_tokens"].(float64))}
}

// TestTokenizeModelsCORS: /tokenize and /detokenize round-trip a text as
// the engine encodes it; /v1/models/{id} describes a model; CORS answers
// preflights and marks answers; X-Request-Id comes back.
func TestTokenizeModelsCORS(t *testing.T) {
	eng := cpuEngine(t)
	_, url := serve(t, eng, server.Options{CORSOrigin: "https://app.example"})
	text := "Once upon a time, Lily saw a cat."
	code, body, h := post(t, url+"/tokenize", map[string]any{"prompt": text}, "X-Request-Id", "abc-123")
	if code != 200 || h.Get("X-Request-Id") != "abc-123" || h.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("tokenize: %d %v %v", code, body, h)
	}
	var ids []int
	for _, v := range body["tokens"].([]any) {
		ids = append(ids, int(v.(float64)))
	}
	if want := eng.Tokenizer().Encode(text, true); fmt.Sprint(ids) != fmt.Sprint(want) || int(body["count"].(float64)) != len(want) {
		t.Errorf("tokenize: %v, want %v", ids, want)
	}
	code, body, _ = post(t, url+"/detokenize", map[string]any{"tokens": ids})
	if code != 200 || strings.TrimSpace(body["prompt"].(string)) != text {
		t.Errorf("detokenize: %d %v", code, body)
	}
	code, body, _ = post(t, url+"/tokenize", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if want, _ := eng.PromptTokens(runtime.Request{Messages: []chat.Message{{Role: "user", Content: "hi"}}}); code != 200 || int(body["count"].(float64)) != len(want) {
		t.Errorf("tokenize messages: %d %v, want %d tokens", code, body, len(want))
	}
	if code, got := get(t, url+"/v1/models/"+modelName); code != 200 || !strings.Contains(got, `"max_model_len":2048`) {
		t.Errorf("model card: %d %s", code, got)
	}
	if code, _ := get(t, url+"/v1/models/nope"); code != 404 {
		t.Errorf("unknown model card: %d", code)
	}
	req, _ := http.NewRequest(http.MethodOptions, url+"/v1/chat/completions", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}
