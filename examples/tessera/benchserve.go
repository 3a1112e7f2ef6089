package main

// bench-serve is a load generator for an OpenAI-compatible completions
// server, in the manner of vLLM's serving benchmark: it keeps a fixed number
// of streaming requests in flight and reports throughput and the latencies a
// user feels (time to first token, time per output token, inter-token
// latency). It speaks only HTTP, so it measures any such server, Tessera's
// own or another, the same way.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

const (
	// Prompt token ids are drawn from [promptIDMin, promptIDMax): above 0..2,
	// which are <unk>, <s> and </s> in Llama-style vocabularies, and below
	// the 512 entries of the tiniest test models, so every id is valid on
	// every model the server might hold.
	promptIDMin = 3
	promptIDMax = 300

	// maxReportedErrors bounds the distinct error messages kept: a server
	// that fails every request usually fails them all the same way.
	maxReportedErrors = 5
	// maxErrorBody bounds how much of a failed response is read for its
	// message, so a misbehaving server cannot make us buffer without end.
	maxErrorBody = 64 << 10
	// maxSSELine is the longest line of the event stream accepted; chunks
	// hold a few tokens, but a server may batch many into one event.
	maxSSELine = 16 << 20
)

// benchServeOptions are bench-serve's flags.
type benchServeOptions struct {
	URL, Model, APIKey                    string
	Concurrency, Requests, Warmup         int
	PromptTokens, GenTokens, SharedPrefix int
	Timeout                               time.Duration
	Seed                                  uint64
}

func setupBenchServe(fs *flag.FlagSet) func(context.Context, *env) error {
	var o benchServeOptions
	fs.StringVar(&o.URL, "url", "", "base URL of the server, e.g. http://127.0.0.1:8080; requests go to URL/v1/completions (required)")
	fs.StringVar(&o.Model, "model", "", "model name to send (default: the first id from GET URL/v1/models, or none)")
	fs.IntVar(&o.Concurrency, "concurrency", 1, "requests in flight at once")
	fs.IntVar(&o.Requests, "requests", 32, "requests to send in all")
	fs.IntVar(&o.Warmup, "warmup", -1, "requests sent first at the same concurrency and not counted, so that a fresh server's kernel compilation and caches are not measured (default: one round, min(--concurrency, --requests))")
	fs.IntVar(&o.PromptTokens, "prompt-tokens", 32, "prompt length of each request, in token ids")
	fs.IntVar(&o.GenTokens, "gen-tokens", 64, "tokens each request generates (max_tokens, with ignore_eos)")
	fs.IntVar(&o.SharedPrefix, "shared-prefix", 0, "leading prompt tokens all requests share, to exercise a prefix cache")
	fs.StringVar(&o.APIKey, "api-key", "", "sent as 'Authorization: Bearer KEY' (default: $TESSERA_API_KEY)")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "limit on each request, from sending it to the end of its stream")
	fs.Uint64Var(&o.Seed, "seed", 0, "seed of the random prompts")
	asJSON := fs.Bool("json", false, "print one JSON object instead of a table")
	return func(ctx context.Context, e *env) error {
		// The key's default is read here, not given to the flag, so that
		// 'tessera bench-serve -h' never prints it.
		if o.APIKey == "" {
			o.APIKey = os.Getenv("TESSERA_API_KEY")
		}
		if err := o.check(); err != nil {
			return err
		}
		r, err := benchServe(ctx, o, e.stderr)
		if r != nil {
			if perr := r.print(e.stdout, *asJSON); perr != nil {
				return fmt.Errorf("writing the report: %w", perr)
			}
		}
		if err != nil {
			return err
		}
		if r.Completed == 0 {
			first := "no error recorded"
			if len(r.Errors) > 0 {
				first = r.Errors[0]
			}
			return fmt.Errorf("all %d requests failed; first error: %s", r.Failed, first)
		}
		return nil
	}
}

// check rejects option values that cannot make a meaningful run.
func (o *benchServeOptions) check() error {
	if strings.TrimSpace(o.URL) == "" {
		return usagef("--url is required, e.g. --url http://127.0.0.1:8080")
	}
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--url %q: want http://HOST:PORT or https://HOST:PORT", o.URL)
	}
	if o.Concurrency < 1 || o.Requests < 1 || o.PromptTokens < 1 || o.GenTokens < 1 {
		return usagef("--concurrency, --requests, --prompt-tokens and --gen-tokens must be at least 1")
	}
	if o.Warmup < -1 {
		return usagef("--warmup must be at least 0 (or -1: one round at --concurrency)")
	}
	if o.SharedPrefix < 0 || o.SharedPrefix > o.PromptTokens {
		return usagef("--shared-prefix must be in 0..--prompt-tokens (%d)", o.PromptTokens)
	}
	if o.Timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	return nil
}

// benchServeReport is what a run measured. Field names follow vLLM's
// benchmark_serving.py so that scripts written for its JSON read ours.
// Latencies are in milliseconds; percentiles interpolate linearly between
// ranks (see percentile).
type benchServeReport struct {
	URL          string `json:"url"`
	Model        string `json:"model"`
	Concurrency  int    `json:"concurrency"`
	Requests     int    `json:"requests"`
	PromptTokens int    `json:"prompt_tokens"`
	GenTokens    int    `json:"gen_tokens"`
	SharedPrefix int    `json:"shared_prefix"`
	Seed         uint64 `json:"seed"`

	Completed   int      `json:"completed"`
	Failed      int      `json:"failed"`
	Errors      []string `json:"errors"`
	Interrupted bool     `json:"interrupted"`

	DurationS            float64 `json:"duration_s"`
	TotalInputTokens     int     `json:"total_input_tokens"`
	TotalOutputTokens    int     `json:"total_output_tokens"`
	RequestThroughput    float64 `json:"request_throughput"`
	OutputThroughput     float64 `json:"output_throughput"`
	TotalTokenThroughput float64 `json:"total_token_throughput"`

	MeanTTFTms   float64 `json:"mean_ttft_ms"`
	MedianTTFTms float64 `json:"median_ttft_ms"`
	P99TTFTms    float64 `json:"p99_ttft_ms"`
	MeanTPOTms   float64 `json:"mean_tpot_ms"`
	MedianTPOTms float64 `json:"median_tpot_ms"`
	P99TPOTms    float64 `json:"p99_tpot_ms"`
	MeanITLms    float64 `json:"mean_itl_ms"`
	MedianITLms  float64 `json:"median_itl_ms"`
	P99ITLms     float64 `json:"p99_itl_ms"`
	MeanE2ELms   float64 `json:"mean_e2el_ms"`
	MedianE2ELms float64 `json:"median_e2el_ms"`
	P99E2ELms    float64 `json:"p99_e2el_ms"`
}

// outcome is how one request ended.
type outcome int

const (
	notRun    outcome = iota // never sent: the run was interrupted first
	completed                // streamed to data: [DONE]
	failed                   // the server or the connection failed it
	cancelled                // cut off by the run's interruption; counts for nothing
)

// requestResult is one request's measurements.
type requestResult struct {
	outcome      outcome
	err          string
	ttft, e2e    time.Duration
	itl          []time.Duration
	promptTokens int
	outputTokens int
}

// serveBench holds what every worker shares.
type serveBench struct {
	o      benchServeOptions
	base   string
	model  string
	client *http.Client
	prefix []int
}

// benchServe runs the load and summarizes it. It returns a report whenever
// requests were sent, even with an error (the run was interrupted), so that
// a long run stopped by Ctrl-C still shows what it measured.
func benchServe(ctx context.Context, o benchServeOptions, notes io.Writer) (*benchServeReport, error) {
	workers := min(o.Concurrency, o.Requests)
	// The default transport keeps two idle connections per host; with more
	// workers than that, each request past the second would open a new
	// connection and measure the handshake.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = max(tr.MaxIdleConns, workers)
	tr.MaxIdleConnsPerHost = workers
	defer tr.CloseIdleConnections()
	b := &serveBench{
		o:      o,
		base:   strings.TrimRight(o.URL, "/"),
		model:  o.Model,
		client: &http.Client{Transport: tr},
		prefix: promptIDs(o.Seed, math.MaxUint64, o.SharedPrefix),
	}
	if b.model == "" {
		id, note, err := b.discoverModel(ctx)
		if err != nil {
			return nil, err
		}
		if note != "" {
			fmt.Fprintf(notes, "bench-serve: %s; sending requests without a model\n", note)
		}
		b.model = id
	}

	warmup := o.Warmup
	if warmup < 0 {
		warmup = workers
	}
	// The warm-up's prompts are requests past the last (their own random
	// streams), so that no measured prompt is in the prefix cache.
	b.run(ctx, workers, o.Requests, warmup)
	results, elapsed := b.run(ctx, workers, 0, o.Requests)
	r := b.summarize(results, elapsed)
	if err := ctx.Err(); err != nil {
		r.Interrupted = true
		return r, fmt.Errorf("interrupted after %d of %d requests: %w", r.Completed+r.Failed, o.Requests, err)
	}
	return r, nil
}

// run sends requests first..first+n-1 from workers at once and returns
// their results and the time they took.
func (b *serveBench) run(ctx context.Context, workers, first, n int) ([]requestResult, time.Duration) {
	jobs := make(chan int, n)
	for i := range n {
		jobs <- i
	}
	close(jobs)
	results := make([]requestResult, n)
	var wg sync.WaitGroup
	start := time.Now()
	for range min(workers, n) {
		wg.Go(func() {
			for i := range jobs {
				if ctx.Err() != nil {
					return
				}
				results[i] = b.send(ctx, first+i)
			}
		})
	}
	wg.Wait()
	return results, time.Since(start)
}

// discoverModel asks GET /v1/models for the first model id, as clients of
// OpenAI-style servers do when not told one. A server it cannot reach is an
// error, since every request would fail the same way; a server without the
// endpoint, or with no models listed, only gives a note.
func (b *serveBench) discoverModel(ctx context.Context) (id, note string, err error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/v1/models", nil)
	if err != nil {
		return "", "", fmt.Errorf("asking for the model: %w", err)
	}
	b.authorize(req)
	resp, err := b.client.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("asking %s/v1/models for the model (or give --model): %w", b.base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return "", "", fmt.Errorf("reading %s/v1/models: %w", b.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Sprintf("GET /v1/models answered %s", describeHTTPError(resp.Status, body)), nil
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return "", fmt.Sprintf("GET /v1/models sent no model list (%v)", err), nil
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", "GET /v1/models lists no model", nil
	}
	return list.Data[0].ID, "", nil
}

func (b *serveBench) authorize(req *http.Request) {
	if b.o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+b.o.APIKey)
	}
}

// promptIDs returns n pseudo-random token ids in [promptIDMin, promptIDMax)
// from the stream (seed, stream). Each request takes its own stream, so its
// prompt depends on the seed and its index only, not on which worker sends
// it or when.
func promptIDs(seed, stream uint64, n int) []int {
	rng := rand.New(rand.NewPCG(seed, stream))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = promptIDMin + rng.IntN(promptIDMax-promptIDMin)
	}
	return ids
}

// prompt is request i's prompt: the shared prefix, then ids of its own.
func (b *serveBench) prompt(i int) []int {
	return append(slices.Clone(b.prefix), promptIDs(b.o.Seed, uint64(i), b.o.PromptTokens-len(b.prefix))...)
}

// completionRequest is the body of POST /v1/completions. ignore_eos makes
// every request generate exactly max_tokens, so runs compare like with like.
type completionRequest struct {
	Model         string        `json:"model,omitempty"`
	Prompt        []int         `json:"prompt"`
	MaxTokens     int           `json:"max_tokens"`
	Temperature   float64       `json:"temperature"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	IgnoreEOS     bool          `json:"ignore_eos"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// completionChunk is one event of the response stream; an error may come
// in place of a chunk.
type completionChunk struct {
	Choices []completionChoice `json:"choices"`
	Usage   *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *apiError `json:"error"`
}

type completionChoice struct {
	Text         string  `json:"text"`
	FinishReason *string `json:"finish_reason"`
}

// apiError is the OpenAI error object, {"error": {...}}.
type apiError struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

func (e *apiError) String() string {
	s := e.Message
	if s == "" {
		s = "no message"
	}
	if e.Type != "" {
		s += " (" + e.Type + ")"
	}
	return s
}

// send makes request i and measures it. It never panics on what the server
// sends: every failure becomes the result's err.
func (b *serveBench) send(ctx context.Context, i int) requestResult {
	prompt := b.prompt(i)
	res := requestResult{promptTokens: len(prompt)}
	fail := func(err error) requestResult {
		res.outcome, res.err = failed, err.Error()
		if ctx.Err() != nil {
			res.outcome = cancelled
		}
		return res
	}
	body, err := json.Marshal(completionRequest{
		Model: b.model, Prompt: prompt, MaxTokens: b.o.GenTokens, Stream: true,
		StreamOptions: streamOptions{IncludeUsage: true}, IgnoreEOS: true,
	})
	if err != nil {
		return fail(fmt.Errorf("encoding the request: %w", err))
	}
	rctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	defer cancel()
	// timedOut names the deadline rather than the bare "context deadline
	// exceeded" the transport reports.
	timedOut := func(err error) error {
		if ctx.Err() == nil && errors.Is(rctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("timed out after %v (--timeout)", b.o.Timeout)
		}
		return err
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, b.base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return fail(fmt.Errorf("making the request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	b.authorize(req)

	start := time.Now()
	resp, err := b.client.Do(req)
	if err != nil {
		return fail(timedOut(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return fail(errors.New("HTTP " + describeHTTPError(resp.Status, msg)))
	}

	var (
		last      time.Time
		chunks    int
		done      bool
		usageSeen bool
		events    int
	)
	err = readSSE(resp.Body, func(data string) (bool, error) {
		now := time.Now()
		events++
		if data == "[DONE]" {
			done = true
			return true, nil
		}
		var c completionChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return false, fmt.Errorf("chunk %d is not JSON (%q): %w", events, clip(data, 120), err)
		}
		if c.Error != nil {
			return false, fmt.Errorf("error in the stream: %s", c.Error)
		}
		if slices.ContainsFunc(c.Choices, func(ch completionChoice) bool { return ch.Text != "" }) {
			if chunks == 0 {
				res.ttft = now.Sub(start)
			} else {
				res.itl = append(res.itl, now.Sub(last))
			}
			last = now
			chunks++
		}
		if c.Usage != nil {
			usageSeen = true
			res.promptTokens = c.Usage.PromptTokens
			res.outputTokens = c.Usage.CompletionTokens
		}
		return false, nil
	})
	res.e2e = time.Since(start)
	switch {
	case err != nil:
		return fail(fmt.Errorf("reading the stream: %w", timedOut(err)))
	case !done && events == 0:
		return fail(fmt.Errorf("no server-sent events in the response (Content-Type %q)", resp.Header.Get("Content-Type")))
	case !done:
		return fail(errors.New("stream ended before data: [DONE]"))
	case chunks == 0:
		return fail(errors.New("stream carried no text"))
	}
	if !usageSeen {
		res.outputTokens = chunks
	}
	res.outcome = completed
	return res
}

// describeHTTPError renders a failed response: the status and, from the
// body, the OpenAI error message or else the start of the text.
func describeHTTPError(status string, body []byte) string {
	var e struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil {
		return status + ": " + e.Error.String()
	}
	if s := strings.TrimSpace(string(body)); s != "" {
		return status + ": " + clip(s, 200)
	}
	return status
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// readSSE calls event with the data of each server-sent event in r until
// event asks to stop, returns an error, or the stream ends. It follows the
// event-stream format: lines "field: value", events ended by a blank line,
// several data lines joined by newlines, comments starting with ':'.
func readSSE(r io.Reader, event func(data string) (stop bool, err error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxSSELine)
	var data []string
	dispatch := func() (bool, error) {
		if data == nil {
			return false, nil
		}
		d := strings.Join(data, "\n")
		data = nil
		return event(d)
	}
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if stop, err := dispatch(); stop || err != nil {
				return err
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		if field == "data" {
			data = append(data, strings.TrimPrefix(value, " "))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	// An event cut off by the end of the stream still counts: some servers
	// close the connection straight after the last data line.
	_, err := dispatch()
	return err
}

// summarize turns the requests' results into the report. Requests cut off
// by an interruption are left out, not counted as the server's failures.
func (b *serveBench) summarize(results []requestResult, dur time.Duration) *benchServeReport {
	o := b.o
	r := &benchServeReport{
		URL: b.base, Model: b.model, Concurrency: o.Concurrency, Requests: o.Requests,
		PromptTokens: o.PromptTokens, GenTokens: o.GenTokens, SharedPrefix: o.SharedPrefix, Seed: o.Seed,
		Errors: []string{}, DurationS: dur.Seconds(),
	}
	var ttft, tpot, itl, e2e []time.Duration
	for _, res := range results {
		switch res.outcome {
		case failed:
			r.Failed++
			if len(r.Errors) < maxReportedErrors && !slices.Contains(r.Errors, res.err) {
				r.Errors = append(r.Errors, res.err)
			}
		case completed:
			r.Completed++
			r.TotalInputTokens += res.promptTokens
			r.TotalOutputTokens += res.outputTokens
			ttft = append(ttft, res.ttft)
			e2e = append(e2e, res.e2e)
			itl = append(itl, res.itl...)
			// One token has no time per output token: it is all first token.
			if res.outputTokens > 1 {
				tpot = append(tpot, (res.e2e-res.ttft)/time.Duration(res.outputTokens-1))
			}
		}
	}
	if s := dur.Seconds(); s > 0 {
		r.RequestThroughput = float64(r.Completed) / s
		r.OutputThroughput = float64(r.TotalOutputTokens) / s
		r.TotalTokenThroughput = float64(r.TotalInputTokens+r.TotalOutputTokens) / s
	}
	r.MeanTTFTms, r.MedianTTFTms, r.P99TTFTms = latencyStats(ttft)
	r.MeanTPOTms, r.MedianTPOTms, r.P99TPOTms = latencyStats(tpot)
	r.MeanITLms, r.MedianITLms, r.P99ITLms = latencyStats(itl)
	r.MeanE2ELms, r.MedianE2ELms, r.P99E2ELms = latencyStats(e2e)
	return r
}

// latencyStats returns the mean, median and 99th percentile of ds in
// milliseconds, all 0 when ds is empty.
func latencyStats(ds []time.Duration) (mean, p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	ms := make([]float64, len(ds))
	sum := 0.0
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += ms[i]
	}
	slices.Sort(ms)
	return sum / float64(len(ms)), percentile(ms, 50), percentile(ms, 99)
}

// percentile returns the p-th percentile (0..100) of sorted by linear
// interpolation between the closest ranks: rank p/100*(n-1), counted from
// 0. That is numpy's default, which vLLM's benchmark uses, so the figures
// compare; nearest-rank would jump between samples on small runs. An empty
// slice gives 0.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := math.Min(math.Max(p, 0), 100) / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(rank))
	hi := int(math.Ceil(rank))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(rank-float64(lo))
}

// print writes the report as a table or as one JSON object.
func (r *benchServeReport) print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	model := r.Model
	if model == "" {
		model = "(none sent)"
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "server            %s, model %s\n", r.URL, model)
	fmt.Fprintf(&buf, "load              %d requests of %d prompt + %d generated tokens (shared prefix %d), concurrency %d\n",
		r.Requests, r.PromptTokens, r.GenTokens, r.SharedPrefix, r.Concurrency)
	status := ""
	if r.Interrupted {
		status = ", interrupted"
	}
	fmt.Fprintf(&buf, "requests          %d completed, %d failed%s in %.2f s\n", r.Completed, r.Failed, status, r.DurationS)
	for _, e := range r.Errors {
		fmt.Fprintf(&buf, "error             %s\n", e)
	}
	fmt.Fprintf(&buf, "tokens            %d prompt, %d generated\n", r.TotalInputTokens, r.TotalOutputTokens)
	fmt.Fprintf(&buf, "throughput        %.2f req/s, %.1f output tok/s, %.1f total tok/s\n",
		r.RequestThroughput, r.OutputThroughput, r.TotalTokenThroughput)
	fmt.Fprintf(&buf, "ttft              mean %.2f ms, p50 %.2f ms, p99 %.2f ms\n", r.MeanTTFTms, r.MedianTTFTms, r.P99TTFTms)
	fmt.Fprintf(&buf, "tpot              mean %.2f ms, p50 %.2f ms, p99 %.2f ms\n", r.MeanTPOTms, r.MedianTPOTms, r.P99TPOTms)
	fmt.Fprintf(&buf, "itl               mean %.2f ms, p50 %.2f ms, p99 %.2f ms\n", r.MeanITLms, r.MedianITLms, r.P99ITLms)
	fmt.Fprintf(&buf, "e2e latency       mean %.2f ms, p50 %.2f ms, p99 %.2f ms\n", r.MeanE2ELms, r.MedianE2ELms, r.P99E2ELms)
	_, err := w.Write(buf.Bytes())
	return err
}
