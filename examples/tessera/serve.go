package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/kvevents"
	"github.com/tessera-llm/tessera/runtime/server"
)

// modelList is the repeatable --model flag of serve: PATH, or NAME=PATH.
type modelList []namedModel

type namedModel struct{ name, path string }

func (l *modelList) String() string {
	var parts []string
	for _, m := range *l {
		parts = append(parts, m.name+"="+m.path)
	}
	return strings.Join(parts, ",")
}

func (l *modelList) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok {
		path = v
		name = strings.TrimSuffix(filepath.Base(v), filepath.Ext(v))
	}
	if name == "" || path == "" {
		return fmt.Errorf("--model %q: want PATH or NAME=PATH", v)
	}
	for _, m := range *l {
		if m.name == name {
			return fmt.Errorf("--model: two models named %q", name)
		}
	}
	*l = append(*l, namedModel{name, path})
	return nil
}

// Limits of serve's connections, beside the server's own per request.
const (
	// readHeaderTimeout bounds a request's headers: a client that sends
	// them a byte at a time is closed then.
	readHeaderTimeout = 30 * time.Second
	// idleTimeout closes a keep-alive connection idle this long, so that
	// idle clients do not hold connections (and file descriptors) for
	// ever.
	idleTimeout = 2 * time.Minute
	// maxHeaderBytes bounds a request's headers (net/http's default is 1
	// MiB): an API request's are well under 8 KiB; past this the answer
	// is 431.
	maxHeaderBytes = 64 << 10
	// shutdownGrace follows the drain: the requests it cut end and the
	// connections close within it.
	shutdownGrace = 2 * time.Second
)

func setupServe(fs *flag.FlagSet) func(context.Context, *env) error {
	var mf modelFlags
	mf.registerLoad(fs)
	var models modelList
	fs.Var(&models, "model", "a model to serve: PATH or REF (see pull), or NAME=PATH to choose its API name (repeatable; default name: the file's)")
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (port 0: any free port)")
	maxQueue := fs.Int("max-queue", server.DefaultMaxQueue, "sequences that may wait per model beyond the running batch; past it requests get 429")
	apiKey := fs.String("api-key", "", "require 'Authorization: Bearer KEY' (default: $TESSERA_API_KEY; none if both are empty)")
	cors := fs.String("cors-origin", "", "allow browser pages from this origin (* for any)")
	timeout := fs.Duration("request-timeout", server.DefaultRequestTimeout, "longest a request may run (negative: no limit)")
	bodyTimeout := fs.Duration("body-timeout", server.DefaultBodyTimeout, "longest a request's body may take to arrive (never past --request-timeout); a slower one gets 408 (negative: no limit but --request-timeout's)")
	drain := fs.Duration("drain-timeout", 30*time.Second, "on SIGTERM, how long running requests may take to finish; those still running then end with an error (0: they end at once)")
	logFormat := fs.String("log", "text", "request log on stderr: text, json or off")
	runtimeLoRA := fs.Bool("allow-runtime-lora", false, "serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM's), which load adapters the client names from --lora-dir (needed with it)")
	loraDir := fs.String("lora-dir", "", "with --allow-runtime-lora: the directory runtime adapters are loaded from; a lora_path is resolved inside it (no '..', no symlink out), regular files only")
	loraMax := fs.Int64("lora-max-bytes", server.DefaultMaxLoRABytes, "largest file a runtime adapter may have")
	kvEvents := fs.String("kv-events", "", "publish each model's KV cache events as vLLM does, on this ZeroMQ PUB endpoint (tcp://*:5557 binds; the Nth model's port is the endpoint's + N)")
	kvReplay := fs.String("kv-events-replay", "", "with --kv-events: a ZeroMQ ROUTER endpoint replaying buffered event batches from a sequence number (tcp://*:5558)")
	kvPod := fs.String("kv-events-pod", "", "with --kv-events: this replica's name in the event topics, kv@POD@MODEL (default: the host name)")
	imageURLs := fs.Bool("image-urls", false, "fetch images that requests name by http(s) URL (off: data URLs only); each fetch is bounded in bytes, time and redirects, and only public addresses are fetched from")
	imageHosts := fs.String("image-url-hosts", "", "with --image-urls: the only hosts images are fetched from, comma-separated")
	imagePrivate := fs.Bool("image-url-private", false, "with --image-urls: also fetch from loopback, private and link-local addresses")
	imageTimeout := fs.Duration("image-url-timeout", server.DefaultImageFetchTimeout, "with --image-urls: longest one image may take to fetch")
	return func(ctx context.Context, e *env) error {
		if len(models) == 0 {
			return usagef("--model is required")
		}
		if *maxQueue < 0 {
			return usagef("--max-queue %d must be >= 0", *maxQueue)
		}
		// The server reads a zero timeout as its default; here a zero was
		// typed, most likely meaning none, so it is refused rather than
		// read as ten minutes.
		for _, d := range []struct {
			name string
			v    time.Duration
		}{{"request-timeout", *timeout}, {"body-timeout", *bodyTimeout}} {
			if d.v == 0 {
				return usagef("--%s 0: give a duration, or a negative one for no limit", d.name)
			}
		}
		if *drain < 0 {
			return usagef("--drain-timeout %v must be >= 0", *drain)
		}
		// A client that loads adapters names paths the server reads: only
		// inside a directory the operator names, never anywhere.
		switch {
		case *runtimeLoRA && *loraDir == "":
			return usagef("--allow-runtime-lora needs --lora-dir DIR: runtime adapters are loaded only from inside that directory")
		case !*runtimeLoRA && *loraDir != "":
			return usagef("--lora-dir is for --allow-runtime-lora, which is not given: add it to load adapters from %s at run time", *loraDir)
		case *loraMax <= 0:
			return usagef("--lora-max-bytes %d must be positive", *loraMax)
		}
		var remote *server.RemoteImages
		switch {
		case *imageURLs:
			if *imageTimeout <= 0 {
				return usagef("--image-url-timeout %v must be positive", *imageTimeout)
			}
			remote = &server.RemoteImages{Timeout: *imageTimeout, AllowPrivate: *imagePrivate}
			for h := range strings.SplitSeq(*imageHosts, ",") {
				if h = strings.TrimSpace(h); h != "" {
					remote.Hosts = append(remote.Hosts, h)
				}
			}
		case *imageHosts != "" || *imagePrivate:
			return usagef("--image-url-hosts and --image-url-private are for --image-urls, which is not given")
		}
		if *kvEvents == "" && (*kvReplay != "" || *kvPod != "") {
			return usagef("--kv-events-replay and --kv-events-pod are for --kv-events, which is not given")
		}
		if *kvPod == "" {
			*kvPod, _ = os.Hostname()
		}
		if *loraDir != "" {
			if st, err := os.Stat(*loraDir); err != nil {
				return fmt.Errorf("--lora-dir: %w", err)
			} else if !st.IsDir() {
				return fmt.Errorf("--lora-dir %s is not a directory", *loraDir)
			}
		}
		key := *apiKey
		if key == "" {
			key = os.Getenv("TESSERA_API_KEY")
		}
		var logger *slog.Logger
		switch *logFormat {
		case "text":
			logger = slog.New(slog.NewTextHandler(e.stderr, nil))
		case "json":
			logger = slog.New(slog.NewJSONHandler(e.stderr, nil))
		case "off":
			logger = slog.New(slog.DiscardHandler)
		default:
			return usagef("--log %q: want text, json or off", *logFormat)
		}
		srv := server.New(server.Options{APIKey: key, CORSOrigin: *cors, MaxQueue: max(*maxQueue, 0), RequestTimeout: *timeout,
			BodyTimeout: *bodyTimeout, Logger: logger, AllowRuntimeLoRA: *runtimeLoRA, LoRADir: *loraDir, MaxLoRABytes: *loraMax,
			RemoteImages: remote})
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		// Requests keep running when the signal comes: the drain ends them.
		// The handler bounds each request's body and answer itself (see
		// server.Server.ServeHTTP: no ReadTimeout or WriteTimeout here,
		// which would cut long streams); the connection's other waits are
		// bounded here: its headers, and how long it may idle between
		// requests.
		hs := &http.Server{Handler: srv, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
			BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
		served := make(chan error, 1)
		go func() { served <- hs.Serve(ln) }()
		logger.Info("listening", "url", "http://"+ln.Addr().String())
		var engines []*runtime.Engine
		defer func() {
			for _, eng := range engines {
				eng.Close()
			}
		}()
		for _, m := range models {
			if ctx.Err() != nil {
				break
			}
			path, err := modelPath(ctx, e, m.path, mf.offline)
			if err != nil {
				hs.Close()
				return fmt.Errorf("model %s: %w", m.name, err)
			}
			if isEmbedding(path, mf.tokenizer) {
				emb, err := mf.loadEmbedder(e, path)
				if err != nil {
					hs.Close()
					return fmt.Errorf("model %s: %w", m.name, err)
				}
				defer emb.Close()
				if err := srv.AddEmbedder(m.name, emb); err != nil {
					hs.Close()
					return err
				}
				logger.Info("loaded", "model", m.name, "path", m.path, "device", emb.Backend().Name(), "embedding", emb.Model().Config.Pooling.String())
				continue
			}
			eng, err := mf.loadPath(ctx, e, path)
			if err != nil {
				hs.Close()
				return fmt.Errorf("model %s: %w", m.name, err)
			}
			engines = append(engines, eng)
			if err := srv.Add(m.name, eng); err != nil {
				hs.Close()
				return err
			}
			if *kvEvents != "" {
				pub, err := publishKVEvents(ctx, eng, m.name, len(engines)-1, *kvEvents, *kvReplay, *kvPod, logger)
				if err != nil {
					hs.Close()
					return err
				}
				defer pub.Close()
			}
			logger.Info("loaded", "model", m.name, "path", m.path, "device", eng.Backend().Name(), "context", eng.Model().Config.Context,
				"max_batch_tokens", eng.Budgets().MaxBatchTokens, "max_seqs", eng.Budgets().MaxSeqs)
		}
		srv.Ready()
		select {
		case <-ctx.Done():
		case err := <-served:
			return err
		}
		logger.Info("draining", "timeout", drain.String())
		// The whole shutdown takes at most --drain-timeout and
		// shutdownGrace (what examples/deploy's grace periods count on):
		// the requests that the drain cuts write their error within
		// shutdownGrace, and the connections close in what is left of it.
		drained := time.Now().Add(*drain)
		dctx, cancel := context.WithDeadline(context.Background(), drained)
		defer cancel()
		if err := srv.Drain(dctx); err != nil {
			logger.Warn("drain timed out", "err", err)
		}
		sctx, scancel := context.WithDeadline(context.Background(), drained.Add(shutdownGrace))
		defer scancel()
		if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		hs.Close()
		logger.Info("stopped")
		return nil
	}
}

// publishKVEvents publishes the prefix-cache events of the i-th model
// served, on the endpoints given, offset by i as vLLM offsets its
// data-parallel ranks' so that every model has its own sockets.
func publishKVEvents(ctx context.Context, eng *runtime.Engine, name string, i int, endpoint, replay, pod string, logger *slog.Logger) (*kvevents.Publisher, error) {
	ep, err := kvevents.OffsetEndpoint(endpoint, i)
	if err != nil {
		return nil, fmt.Errorf("--kv-events: %w", err)
	}
	rep, err := kvevents.OffsetEndpoint(replay, i)
	if err != nil {
		return nil, fmt.Errorf("--kv-events-replay: %w", err)
	}
	pub, err := kvevents.New(ctx, eng, kvevents.Options{Endpoint: ep, Replay: rep, Model: name, Topic: "kv@" + pod + "@" + name, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", name, err)
	}
	logger.Info("publishing KV events", "model", name, "endpoint", ep, "replay", rep, "topic", pub.Topic())
	return pub, nil
}
