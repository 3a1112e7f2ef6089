// Package server is Tessera's OpenAI-compatible HTTP API: an http.Handler
// over one or more loaded engines, so that a Go program can mount it and
// `tessera serve` can listen with it.
//
// The server owns HTTP concerns only: parsing and validating requests,
// authentication, a bounded queue with 429s past it, server-sent events,
// metrics and draining. Batching, cancellation and memory are the
// engine's: every request becomes one or more sequences of
// runtime.Engine.StartN, a client that goes away is a cancelled context,
// and the engine frees its KV blocks within a step.
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tessera-llm/tessera/models/vision"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/wire"
)

// Options configure a Server. The zero value serves without a key, with
// the defaults below.
type Options struct {
	// APIKey, if set, must come as "Authorization: Bearer KEY" (OpenAI's
	// clients) or "x-api-key: KEY" (Anthropic's) on every endpoint but
	// /health and /metrics.
	APIKey string
	// CORSOrigin, if set, is sent as Access-Control-Allow-Origin ("*" for
	// any), and preflight requests are answered.
	CORSOrigin string
	// MaxQueue is how many sequences may wait for a model beyond those it
	// runs at once (its engine's MaxSeqs budget); past it requests get 429.
	// Default DefaultMaxQueue.
	MaxQueue int
	// RequestTimeout bounds each request from arrival to its last token
	// (0: DefaultRequestTimeout; negative: none).
	RequestTimeout time.Duration
	// BodyTimeout bounds reading a request's body, from its arrival (0:
	// DefaultBodyTimeout; negative: none but RequestTimeout's); it is
	// never later than RequestTimeout. A body still arriving then gets
	// 408 and its connection is closed (see setDeadlines).
	BodyTimeout time.Duration
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes);
	// larger ones get 413.
	MaxBodyBytes int64
	// Logger receives one structured line per request (default: discard).
	Logger *slog.Logger
	// Registerer is where the metrics are registered (default: a registry
	// of the server's own, served on /metrics).
	Registerer prometheus.Registerer
	// Gatherer serves /metrics (default: the server's own registry).
	Gatherer prometheus.Gatherer
	// AllowRuntimeLoRA turns on POST /v1/load_lora_adapter and
	// /v1/unload_lora_adapter (lora.go); off, they answer 403. Loading
	// also needs LoRADir.
	AllowRuntimeLoRA bool
	// LoRADir is the only directory runtime adapters are read from: a
	// request's lora_path is resolved inside it (os.Root: no "..", no
	// symlink out) and must name a regular file or a PEFT folder of
	// regular files there. Empty: loads answer 403.
	LoRADir string
	// MaxLoRABytes bounds each file of a runtime adapter (default
	// DefaultMaxLoRABytes); a larger one is refused with 400.
	MaxLoRABytes int64
	// ImageLimits bound the images of a request (for models loaded with a
	// vision projector), checked on each image's header before its pixels
	// are decoded (default DefaultImageLimits): past them, 400.
	ImageLimits vision.Limits
	// RemoteImages, when set, lets requests name images by http(s) URL,
	// fetched within its bounds (fetch.go). Nil: only data URLs are taken.
	RemoteImages *RemoteImages
}

// DefaultImageLimits take a photo of up to 16 M pixels (64 MiB as RGBA
// while it is decoded), as large as a body may carry.
var DefaultImageLimits = vision.Limits{MaxBytes: DefaultMaxBodyBytes, MaxPixels: 16 << 20, MaxSide: 8192}

// Defaults.
const (
	DefaultMaxQueue       = 256
	DefaultRequestTimeout = 10 * time.Minute
	// DefaultBodyTimeout lets the largest default body (8 MiB) arrive at
	// about 140 KB/s: no honest client is slower, and a client sending a
	// byte at a time holds a connection no longer than this.
	DefaultBodyTimeout  = time.Minute
	DefaultMaxBodyBytes = 8 << 20
	// DefaultMaxLoRABytes is above any rank-64 adapter of a 70B model in
	// F16 (about 1.7 GB), and bounds the memory one load takes (about
	// twice the file in F16, read into float32s).
	DefaultMaxLoRABytes = 4 << 30
)

// writeGrace is how long past its request timeout a response may still
// take to write: its last event, the error that ends it. A client that
// stops reading holds a handler no longer than that.
const writeGrace = 10 * time.Second

// cutGrace is how long Drain waits, once it has cut the requests still
// running, for their handlers to write the error that ends them.
const cutGrace = 2 * time.Second

// errDrainCut is the cause of the requests Drain cancels when its
// context ends: they are answered 503, or a stream ends with an error
// event saying so.
var errDrainCut = errors.New("the server is shutting down and its drain timeout ended before this request finished")

// Server is the HTTP API over a set of named engines. Create it with New,
// add models with Add (it reports loading on /health until Ready), and
// call Drain before shutting down.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	metrics *metrics

	mu     sync.RWMutex
	models map[string]*model
	names  []string // in the order added
	// Embedding models (embeddings.go), likewise.
	embedders  map[string]*embedModel
	embedNames []string
	// stored are the Responses API's stored responses (responses_store.go).
	stored *responseStore
	// fetch reads an http(s) image URL (Options.RemoteImages), or is nil.
	fetch func(ctx context.Context, url string, max int) ([]byte, error)

	state atomic.Int32 // loading, ready, draining
	live  sync.WaitGroup
	count atomic.Int64 // requests in flight, for Drain
	// stop ends with Drain's context: every request's context ends with
	// it, its cause errDrainCut.
	stop    context.Context
	stopNow context.CancelCauseFunc
	// scripted, set only by tests (export_test.go), rewrites each request
	// before it starts, so that a random model writes the reply a test
	// scripted.
	scripted func(runtime.Request) runtime.Request
}

const (
	stateLoading int32 = iota
	stateReady
	stateDraining
)

// model is one served engine and its share of the queue.
type model struct {
	name    string
	eng     *runtime.Engine
	created int64
	// fingerprint is the engine's system_fingerprint: its version, device
	// and storage, what the reproducibility contract binds.
	fingerprint string
	seqs        *atomic.Int64 // sequences this server has started and not finished, shared by the engine's adapters
	// adapter, for a model name BASE:ADAPTER, is the engine's LoRA adapter
	// that requests of this name run with.
	adapter string
}

// adapters is what a request of this model runs with.
func (m *model) adapters() []runtime.AdapterRef {
	if m.adapter == "" {
		return nil
	}
	return []runtime.AdapterRef{{Name: m.adapter}}
}

// New returns a server with no models, reporting "loading" until Ready.
func New(opts Options) *Server {
	if opts.MaxQueue <= 0 {
		opts.MaxQueue = DefaultMaxQueue
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.BodyTimeout == 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxLoRABytes <= 0 {
		opts.MaxLoRABytes = DefaultMaxLoRABytes
	}
	if opts.ImageLimits == (vision.Limits{}) {
		opts.ImageLimits = DefaultImageLimits
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		reg := prometheus.NewRegistry()
		opts.Registerer, opts.Gatherer = reg, reg
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), models: map[string]*model{}, stored: newResponseStore(storeCount, storeBytes),
		fetch: opts.RemoteImages.fetcher()}
	s.stop, s.stopNow = context.WithCancelCause(context.Background())
	s.metrics = newMetrics(opts.Registerer, s.snapshot)
	s.route()
	return s
}

// Add serves eng under name (the "model" of requests).
func (s *Server) Add(name string, eng *runtime.Engine) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name == "" {
		return errors.New("server: a model needs a name")
	}
	if _, ok := s.models[name]; ok {
		return fmt.Errorf("server: model %q added twice", name)
	}
	s.models[name] = &model{name: name, eng: eng, created: time.Now().Unix(), seqs: new(atomic.Int64), fingerprint: eng.Fingerprint()}
	s.names = append(s.names, name)
	return nil
}

// Ready marks the models loaded: /health answers 200.
func (s *Server) Ready() { s.state.CompareAndSwap(stateLoading, stateReady) }

// Drain stops taking requests (/health answers 503, new requests get 503)
// and waits until the running ones have finished or ctx ends. When ctx
// ends first, the requests still running are cut: each is answered 503,
// or, for a stream that has begun, ends with an error event (as a request
// timeout ends it) rather than stopping mid-stream without a word. Drain
// then waits up to cutGrace for them to write it, and reports how many it
// cut.
func (s *Server) Drain(ctx context.Context) error {
	s.state.Store(stateDraining)
	done := make(chan struct{})
	go func() { s.live.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	n := s.count.Load()
	s.stopNow(errDrainCut)
	select {
	case <-done:
	case <-time.After(cutGrace):
	}
	return fmt.Errorf("drain: cut %d requests still running: %w", n, ctx.Err())
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 128 {
		id = newID()
	}
	s.setDeadlines(w, start)
	rw := &recorder{ResponseWriter: w, status: http.StatusOK}
	rw.Header().Set("X-Request-Id", id)
	info := &logInfo{id: id}
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, info))
	defer func() {
		if p := recover(); p != nil {
			s.opts.Logger.Error("panic", "request_id", id, "panic", fmt.Sprint(p))
			if !rw.wrote {
				s.fail(rw, r, &httpError{status: http.StatusInternalServerError, kind: "server_error", msg: "internal error"})
			}
		}
		endpoint := s.endpoint(r)
		s.metrics.requests.WithLabelValues(endpoint, fmt.Sprint(rw.status)).Inc()
		attrs := []any{"request_id", id, "method", r.Method, "path", r.URL.Path,
			"status", rw.status, "duration_ms", time.Since(start).Milliseconds(), "remote", r.RemoteAddr}
		if info.model != "" {
			attrs = append(attrs, "model", info.model, "stream", info.stream, "prompt_tokens", info.usage.PromptTokens,
				"completion_tokens", info.usage.CompletionTokens)
		}
		if info.user != "" {
			attrs = append(attrs, "user", info.user)
		}
		s.opts.Logger.Info("request", attrs...)
	}()
	if o := s.opts.CORSOrigin; o != "" {
		h := rw.Header()
		h.Set("Access-Control-Allow-Origin", o)
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id, X-Api-Key, Anthropic-Version")
		h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
		h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After")
		if o != "*" {
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			rw.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if s.opts.APIKey != "" && r.URL.Path != "/health" && r.URL.Path != "/metrics" && !s.authorized(r) {
		code := "invalid_api_key"
		s.fail(rw, r, &httpError{status: http.StatusUnauthorized, kind: "invalid_request_error", code: &code,
			msg: "missing or wrong API key: send Authorization: Bearer KEY or x-api-key: KEY"})
		return
	}
	s.mux.ServeHTTP(rw, r)
}

// authorized reports whether r carries the key, as OpenAI's clients send
// it (a bearer token) or as Anthropic's do (x-api-key): either will do,
// since a client may send both, one of them its environment's.
func (s *Server) authorized(r *http.Request) bool {
	want := []byte(s.opts.APIKey)
	bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(bearer)), want) == 1 {
		return true
	}
	key := r.Header.Get("X-Api-Key")
	return key != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), want) == 1
}

// endpoint is the route pattern of r, a bounded label for the metrics.
func (s *Server) endpoint(r *http.Request) string {
	if _, pattern := s.mux.Handler(r); pattern != "" {
		return pattern
	}
	return "other"
}

func (s *Server) route() {
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /v1/models", s.listModels)
	s.mux.HandleFunc("GET /v1/models/{id}", s.getModel)
	s.mux.HandleFunc("POST /v1/chat/completions", s.work(s.chat))
	s.mux.HandleFunc("POST /v1/completions", s.work(s.complete))
	s.mux.HandleFunc("POST /v1/responses", s.work(s.createResponse))
	s.mux.HandleFunc("GET /v1/responses/{id}", s.work(s.getResponse))
	s.mux.HandleFunc("DELETE /v1/responses/{id}", s.work(s.deleteResponse))
	s.mux.HandleFunc("POST /tokenize", s.work(s.tokenize))
	s.mux.HandleFunc("POST /detokenize", s.work(s.detokenize))
	s.mux.HandleFunc("POST /v1/embeddings", s.work(s.embeddings))
	s.mux.HandleFunc("POST /v1/rerank", s.work(s.rerank))
	s.mux.HandleFunc("POST /rerank", s.work(s.rerank))
	s.mux.HandleFunc("POST /v1/load_lora_adapter", s.work(s.loadLoRA))
	s.mux.HandleFunc("POST /v1/unload_lora_adapter", s.work(s.unloadLoRA))
	s.mux.HandleFunc("POST /v1/messages", s.work(s.messages))
	s.mux.HandleFunc("POST /v1/messages/count_tokens", s.work(s.countTokens))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, &httpError{status: http.StatusNotFound, kind: "invalid_request_error", msg: fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)})
	})
}

// setDeadlines bounds the connection's reads and writes for the request
// that arrived at start. These are deadlines on the connection, set here
// per request, rather than http.Server's ReadTimeout and WriteTimeout:
//
//   - The read deadline bounds the body (BodyTimeout, never past
//     RequestTimeout), so that a body sent a byte at a time gets 408
//     instead of holding a handler forever. http.Server.ReadTimeout would
//     bound it too, but it stays on the connection while the handler
//     runs, and net/http's background read (which notices a client that
//     goes away) fails at that deadline and cancels the request: a
//     stream longer than ReadTimeout would be cut. So work lifts the
//     read deadline once the body is in (readBody). Handlers that read no
//     body keep it, which bounds the unread body net/http discards after
//     them.
//   - The write deadline is the request timeout plus writeGrace: a
//     client that stops reading a stream holds its handler no longer
//     than that. WriteTimeout would be the same for every request, and a
//     deadline left by one request would hold for the next on a
//     keep-alive connection, so each request sets its own here.
//
// A ResponseWriter without a connection (httptest's recorder) has no
// deadlines; that is not an error.
func (s *Server) setDeadlines(w http.ResponseWriter, start time.Time) {
	rc := http.NewResponseController(w)
	var read, write time.Time
	if t := s.opts.RequestTimeout; t > 0 {
		read, write = start.Add(t), start.Add(t+writeGrace)
	}
	if t := s.opts.BodyTimeout; t > 0 && (read.IsZero() || start.Add(t).Before(read)) {
		read = start.Add(t)
	}
	rc.SetReadDeadline(read)
	rc.SetWriteDeadline(write)
}

// work wraps a handler that uses a model: refused while loading or
// draining, counted for Drain, cut by Drain when its context ends,
// bounded in body size and time.
func (s *Server) work(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.live.Add(1)
		s.count.Add(1)
		defer func() { s.count.Add(-1); s.live.Done() }()
		switch s.state.Load() {
		case stateLoading:
			s.fail(w, r, &httpError{status: http.StatusServiceUnavailable, kind: "unavailable", retryAfter: 5, msg: "the server is loading its models"})
			return
		case stateDraining:
			s.fail(w, r, &httpError{status: http.StatusServiceUnavailable, kind: "unavailable", msg: "the server is shutting down"})
			return
		}
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		unhook := context.AfterFunc(s.stop, func() { cancel(context.Cause(s.stop)) })
		defer unhook()
		if t := s.opts.RequestTimeout; t > 0 {
			var cancelT context.CancelFunc
			ctx, cancelT = context.WithTimeout(ctx, t)
			defer cancelT()
		}
		r = r.WithContext(ctx)
		body, err := s.readBody(w, r)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err := h(w, r); err != nil {
			s.fail(w, r, err)
		}
	}
}

// readBody reads r's whole body, at most MaxBodyBytes (past it: 413) and
// before the read deadline setDeadlines set (past it: 408, and the
// connection closes, since the rest of the body may still come). Then it
// lifts the read deadline, so that a long answer is not cut by it (see
// setDeadlines). Bodies are small (8 MiB by default) and every handler
// reads all of its body anyway.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, &httpError{status: http.StatusRequestEntityTooLarge, kind: "invalid_request_error",
			msg: fmt.Sprintf("the body is larger than %d bytes", tooBig.Limit)}
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		return nil, &httpError{status: http.StatusRequestTimeout, kind: "timeout",
			msg: fmt.Sprintf("the body did not arrive in time: %d bytes came before the server's body timeout (%s)", len(b), s.bodyTimeout())}
	case err != nil:
		w.Header().Set("Connection", "close")
		return nil, badRequest("", "the body could not be read: %v", err)
	}
	http.NewResponseController(w).SetReadDeadline(time.Time{})
	return b, nil
}

// bodyTimeout is the time a body has to arrive, for messages.
func (s *Server) bodyTimeout() time.Duration {
	t := s.opts.BodyTimeout
	if rt := s.opts.RequestTimeout; rt > 0 && (t <= 0 || rt < t) {
		t = rt
	}
	return t
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	status, code := "ok", http.StatusOK
	switch s.state.Load() {
	case stateLoading:
		status, code = "loading", http.StatusServiceUnavailable
	case stateDraining:
		status, code = "draining", http.StatusServiceUnavailable
	}
	s.mu.RLock()
	checks := map[string]selfCheckJSON{}
	for _, n := range s.names {
		if c, ok := s.models[n].eng.SelfCheck(); ok {
			checks[n] = newSelfCheckJSON(c)
		}
	}
	s.mu.RUnlock()
	body := map[string]any{"status": status}
	if len(checks) > 0 {
		body["self_check"] = checks
	}
	writeJSON(w, code, body)
}

// selfCheckJSON is a model's load-time self-check (runtime.SelfCheck) as
// /health reports it.
type selfCheckJSON struct {
	Status  string   `json:"status"` // passed, fallback, cpu or skipped
	Adapter string   `json:"adapter"`
	Driver  string   `json:"driver,omitempty"`
	Plan    string   `json:"plan,omitempty"`
	Failed  []string `json:"failed,omitempty"` // each failed plan and its first mismatch
	Kernels []string `json:"kernels,omitempty"`
	Skipped string   `json:"skipped,omitempty"`
	Cached  bool     `json:"cached"`
	Millis  int64    `json:"ms"`
}

func newSelfCheckJSON(c runtime.SelfCheck) selfCheckJSON {
	j := selfCheckJSON{Status: c.Status(), Adapter: c.Adapter, Driver: c.Driver, Plan: c.Plan, Kernels: c.Kernels,
		Skipped: c.Skipped, Cached: c.Cached, Millis: c.Elapsed.Milliseconds()}
	for _, f := range c.Failed {
		j.Failed = append(j.Failed, f.Plan+": "+f.Error)
	}
	return j
}

type modelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"`
	// Parent is, for an adapter's name BASE:ADAPTER, the base model (as
	// vLLM lists its LoRA adapters).
	Parent string `json:"parent,omitempty"`
}

func (m *model) card() modelCard {
	c := modelCard{ID: m.name, Object: "model", Created: m.created, OwnedBy: "tessera", MaxModelLen: m.eng.Model().Config.Context}
	if m.adapter != "" {
		c.Parent = strings.TrimSuffix(m.name, ":"+m.adapter)
	}
	return c
}

func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	cards := []modelCard{}
	for _, n := range s.names {
		base := s.models[n]
		cards = append(cards, base.card())
		for _, a := range base.eng.Adapters() {
			if !a.Unloading {
				cards = append(cards, base.withAdapter(a.Name).card())
			}
		}
	}
	for _, n := range s.embedNames {
		cards = append(cards, s.embedders[n].card())
	}
	s.mu.RUnlock()
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": cards})
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.RLock()
	e, ok := s.embedders[id]
	s.mu.RUnlock()
	if ok {
		writeJSON(w, http.StatusOK, e.card())
		return
	}
	m, err := s.model(id, r.URL.Path)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, m.card())
}

// model finds the engine a request to endpoint names: a model,
// BASE:ADAPTER, or an adapter's own name; with one model, an empty name
// means it. A name that is one of the embedding models says so, rather
// than that it does not exist.
func (s *Server) model(name, endpoint string) (*model, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if m, ok := s.models[name]; ok {
		return m, nil
	}
	// BASE:ADAPTER names a LoRA adapter loaded on BASE's engine.
	if i := strings.LastIndex(name, ":"); i > 0 {
		if base, ok := s.models[name[:i]]; ok {
			for _, a := range base.eng.Adapters() {
				if a.Name == name[i+1:] && !a.Unloading {
					return base.withAdapter(a.Name), nil
				}
			}
		}
	}
	// An adapter's own name, as vLLM serves it and as
	// vllm:lora_requests_info lists it (so that the inference extension's
	// LoRA affinity finds the replicas running it): when one base has it.
	if name != "" {
		var found []*model
		for _, n := range s.names {
			base := s.models[n]
			for _, a := range base.eng.Adapters() {
				if a.Name == name && !a.Unloading {
					found = append(found, base.withAdapter(a.Name))
				}
			}
		}
		switch len(found) {
		case 1:
			return found[0], nil
		case 0:
		default:
			var names []string
			for _, m := range found {
				names = append(names, m.name)
			}
			return nil, badRequest("model", "the LoRA adapter %q is loaded on several models: name one of %s", name, strings.Join(names, ", "))
		}
	}
	if e, ok := s.embedders[name]; ok {
		serves := "/v1/embeddings"
		if e.emb.Reranker() {
			serves = "/v1/rerank"
		}
		code := "model_not_supported"
		return nil, &httpError{status: http.StatusNotFound, kind: "invalid_request_error", code: &code,
			msg: fmt.Sprintf("the model %q is an embedding model; it serves %s, not %s", name, serves, endpoint)}
	}
	if len(s.names) == 0 {
		code := "model_not_found"
		return nil, &httpError{status: http.StatusNotFound, kind: "invalid_request_error", code: &code,
			msg: fmt.Sprintf("this server has no generative models for %s; its models (%s) are embedding models, served on /v1/embeddings and /v1/rerank",
				endpoint, strings.Join(s.embedNames, ", "))}
	}
	if name == "" && len(s.names) == 1 {
		return s.models[s.names[0]], nil
	}
	if name == "" {
		return nil, badRequest("model", "a model is required: one of %s", strings.Join(s.names, ", "))
	}
	code := "model_not_found"
	return nil, &httpError{status: http.StatusNotFound, kind: "invalid_request_error", code: &code,
		msg: fmt.Sprintf("the model %q does not exist; this server has %s", name, strings.Join(s.names, ", "))}
}

// withAdapter is m's engine serving under m.name:adapter, sharing m's queue.
func (m *model) withAdapter(adapter string) *model {
	return &model{name: m.name + ":" + adapter, eng: m.eng, created: m.created, seqs: m.seqs, adapter: adapter, fingerprint: m.fingerprint}
}

// snapshot lists the models for the metrics collector.
func (s *Server) snapshot() []*model {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*model, 0, len(s.names))
	for _, n := range s.names {
		out = append(out, s.models[n])
	}
	return out
}

// admit takes n sequences from m's queue, or reports that it is full.
func (s *Server) admit(m *model, n int) error {
	limit := int64(m.eng.Budgets().MaxSeqs + s.opts.MaxQueue)
	if m.seqs.Add(int64(n)) > limit {
		m.seqs.Add(-int64(n))
		return &httpError{status: http.StatusTooManyRequests, kind: "rate_limit_error", retryAfter: 1,
			msg: fmt.Sprintf("the queue for %s is full (%d sequences); retry later", m.name, limit)}
	}
	return nil
}

// decode reads a JSON body into v, telling a body too large (413) from
// one that is not JSON or has a field of the wrong type (400, worded as
// every home words it: wire.JSONError).
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	err := dec.Decode(v)
	var tooBig *http.MaxBytesError
	var he *httpError
	switch {
	case errors.As(err, &he): // a field's own check (UnmarshalJSON)
		return he
	case err == nil:
		if dec.More() {
			return badRequest("", "the body holds more than one JSON value")
		}
		return nil
	case errors.As(err, &tooBig):
		return &httpError{status: http.StatusRequestEntityTooLarge, kind: "invalid_request_error",
			msg: fmt.Sprintf("the body is larger than %d bytes", tooBig.Limit)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("", "the body is not valid JSON: %v", err)
	}
	pe, _ := wire.AsParam(wire.JSONError(err))
	return badRequest(pe.Param, "%s", pe.Msg)
}

// recorder remembers the status written, for logs and metrics, and lets
// the SSE writer flush through it.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

type requestIDKey struct{}

// logInfo is what a handler learns about its request for the log line:
// set by the generating handlers, read when the request ends.
type logInfo struct {
	id, model, user string
	stream          bool
	usage           usage
}

func info(ctx context.Context) *logInfo {
	if i, ok := ctx.Value(requestIDKey{}).(*logInfo); ok {
		return i
	}
	return &logInfo{}
}

func requestID(ctx context.Context) string { return info(ctx).id }

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
