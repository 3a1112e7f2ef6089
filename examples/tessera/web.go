package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/tessera-llm/tessera/web"
)

func setupWeb(fs *flag.FlagSet) func(context.Context, *env) error {
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	models := fs.String("models", "", "folder whose files are served under /models/ (the page's default model is /models/stories260K.gguf)")
	wasmDir := fs.String("wasm", "", "folder with tessera.wasm and wasm_exec.js (default: web/pkg/ of the Tessera module around the current folder)")
	assets := fs.String("assets", "", "serve the page's files from this folder instead of those built in (for editing web/)")
	build := fs.Bool("build", true, "build tessera.wasm first when it is missing or older than the Go sources (needs the go command and the source)")
	return func(ctx context.Context, e *env) error {
		dir, err := wasmFolder(ctx, e, *wasmDir, *build)
		if err != nil {
			return err
		}
		h, err := web.Handler(web.Options{Wasm: dir, Models: *models, Assets: *assets})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		fmt.Fprintf(e.stdout, "serving the Tessera demo at http://%s/\n", ln.Addr())
		if *models != "" {
			fmt.Fprintf(e.stdout, "models from %s under /models/\n", *models)
		} else {
			fmt.Fprintln(e.stdout, "no --models folder: load a model by URL or from disk in the page")
		}
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(shut)
		}
	}
}

// wasmFolder finds the folder that holds the built engine, building it when
// it is missing or stale and the source is at hand, and otherwise explains
// how to build it.
func wasmFolder(ctx context.Context, e *env, dir string, build bool) (string, error) {
	cwd, _ := os.Getwd()
	root, inModule := web.FindModuleRoot(cwd)
	if dir == "" {
		if !inModule {
			return "", usagef("run this inside the Tessera repository (after `make web`), or pass --wasm DIR, the folder with %s and %s", web.WasmFile, web.WasmExec)
		}
		dir = filepath.Join(root, "web", "pkg")
	}
	stale, err := web.Stale(root, dir)
	if !inModule {
		stale, err = false, nil
		if _, serr := os.Stat(filepath.Join(dir, web.WasmFile)); serr != nil {
			err = web.ErrNotBuilt
		}
	}
	switch {
	case err == nil && !stale:
		return dir, nil
	case !build || !inModule:
		if errors.Is(err, web.ErrNotBuilt) {
			return "", fmt.Errorf("no %s in %s: build it with `make web` in the Tessera repository", web.WasmFile, dir)
		}
		fmt.Fprintf(e.stderr, "tessera web: %s is older than the Go sources; `make web` rebuilds it\n", filepath.Join(dir, web.WasmFile))
		return dir, nil
	}
	fmt.Fprintf(e.stderr, "building %s (GOOS=js GOARCH=wasm go build ./wasm/browser)…\n", filepath.Join(dir, web.WasmFile))
	start := time.Now()
	if err := web.BuildWasm(ctx, root, dir); err != nil {
		return "", err
	}
	fmt.Fprintf(e.stderr, "built in %.1f s\n", time.Since(start).Seconds())
	return dir, nil
}
