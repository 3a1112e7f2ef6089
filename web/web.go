// Package web serves Tessera's browser demo: the page and its scripts
// (built into the binary), the engine compiled to wasm (which `make web` or
// BuildWasm writes next to them) and a folder of models under /models/.
// See README.md in this folder for the page, its JavaScript API and its
// element ids.
package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

//go:embed index.html style.css app.js chat.js md.js store.js favicon.svg models.json
//go:embed pkg/index.js pkg/index.d.ts pkg/client.js pkg/worker.js pkg/package.json pkg/README.md
var embedded embed.FS

// Package is the folder of the JavaScript package (tessera-web) inside
// this one, served under /pkg/: the module, its types, the worker, and the
// built wasm with Go's loader.
const Package = "pkg"

// The files that BuildWasm (or `make web`) writes into web/pkg, gitignored.
const (
	WasmFile = "tessera.wasm" // the engine: GOOS=js GOARCH=wasm build of ./wasm/browser
	WasmExec = "wasm_exec.js" // Go's loader for it, from the same Go installation
)

// ModulePath is the Go module the browser engine is built from.
const ModulePath = "github.com/tessera-llm/tessera"

// Options say where the served files come from.
type Options struct {
	// Wasm is the folder holding tessera.wasm and wasm_exec.js.
	Wasm string // usually web/pkg
	// Models is a folder whose files are served under /models/ (with range
	// requests), and listed as JSON at /models/. Empty: no models.
	Models string
	// Assets, if set, serves the page's own files (index.html, app.js, …)
	// from this folder instead of those built into the binary: edit and
	// reload without rebuilding.
	Assets string
}

// Handler serves the demo. It fails if a folder in o does not exist.
func Handler(o Options) (http.Handler, error) {
	s := &server{o: o, gz: map[string][]byte{}}
	if o.Models != "" {
		root, err := os.OpenRoot(o.Models)
		if err != nil {
			return nil, fmt.Errorf("web: models folder: %w", err)
		}
		s.models = root
	}
	if o.Assets != "" {
		root, err := os.OpenRoot(o.Assets)
		if err != nil {
			return nil, fmt.Errorf("web: assets folder: %w", err)
		}
		s.assets = root.FS()
	}
	return s, nil
}

type server struct {
	o      Options
	models *os.Root
	assets fs.FS

	mu sync.Mutex
	gz map[string][]byte // gzipped bodies by ETag
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	switch {
	case p == "/models":
		http.Redirect(w, r, "/models/", http.StatusMovedPermanently)
	case p == "/models/":
		s.listModels(w)
	case strings.HasPrefix(p, "/models/"):
		s.serveModel(w, r, strings.TrimPrefix(p, "/models/"))
	case p == "/" || p == "/index.html":
		s.serveAsset(w, r, "index.html")
	case p == "/"+Package+"/"+WasmFile || p == "/"+Package+"/"+WasmExec:
		s.serveBuilt(w, r, path.Base(p))
	case strings.HasPrefix(p, "/"+Package+"/"):
		name := strings.TrimPrefix(p, "/"+Package+"/")
		if strings.Contains(name, "/") || name == "" {
			http.NotFound(w, r)
			return
		}
		s.serveAsset(w, r, Package+"/"+name)
	default:
		name := p[1:]
		if strings.Contains(name, "/") {
			http.NotFound(w, r)
			return
		}
		s.serveAsset(w, r, name)
	}
}

// serveAsset serves one of the page's files.
func (s *server) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	src := fs.FS(embedded)
	if s.assets != nil {
		src = s.assets
	}
	data, err := fs.ReadFile(src, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	s.serveBytes(w, r, name, data, time.Time{})
}

// serveBuilt serves tessera.wasm or wasm_exec.js from the wasm folder.
func (s *server) serveBuilt(w http.ResponseWriter, r *http.Request, name string) {
	p := filepath.Join(s.o.Wasm, name)
	data, err := os.ReadFile(p)
	if err != nil {
		msg := fmt.Sprintf("%s is not built: run `make web` in the Tessera repository (it writes web/pkg/%s)", name, name)
		http.Error(w, msg, http.StatusNotFound)
		return
	}
	var mod time.Time
	if st, err := os.Stat(p); err == nil {
		mod = st.ModTime()
	}
	s.serveBytes(w, r, name, data, mod)
}

// serveBytes answers with data, gzipped when the client takes it and the
// type compresses (the wasm shrinks to about a quarter). An ETag of the
// content lets the browser revalidate cheaply.
func (s *server) serveBytes(w http.ResponseWriter, r *http.Request, name string, data []byte, mod time.Time) {
	sum := sha256.Sum256(data)
	etag := hex.EncodeToString(sum[:8])
	h := w.Header()
	h.Set("Content-Type", ContentType(name))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	if compressible(name) {
		h.Set("Vary", "Accept-Encoding")
		if acceptsGzip(r) {
			h.Set("Content-Encoding", "gzip")
			h.Set("ETag", `"`+etag+`-gz"`)
			r.Header.Del("Range") // ranges would apply to the compressed bytes
			http.ServeContent(w, r, name, mod, bytes.NewReader(s.gzipped(etag, data)))
			return
		}
	}
	h.Set("ETag", `"`+etag+`"`)
	http.ServeContent(w, r, name, mod, bytes.NewReader(data))
}

// gzipped compresses data once per content.
func (s *server) gzipped(etag string, data []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.gz[etag]; ok {
		return b
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(data)
	zw.Close()
	s.gz[etag] = buf.Bytes()
	return buf.Bytes()
}

func compressible(name string) bool {
	switch path.Ext(name) {
	case ".wasm", ".js", ".html", ".css", ".svg", ".json", ".ts":
		return true
	}
	return false
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// ContentType is the MIME type the server sends for a file name: WebAssembly
// must be application/wasm for streaming compilation, and model files are
// plain bytes.
func ContentType(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".ts":
		return "text/plain; charset=utf-8" // TypeScript declarations, for reading
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".json":
		return "application/json"
	case ".svg":
		return "image/svg+xml"
	case ".wasm":
		return "application/wasm"
	case ".gguf", ".bin", ".model":
		return "application/octet-stream"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// serveModel serves a file of the models folder, with range requests.
func (s *server) serveModel(w http.ResponseWriter, r *http.Request, rel string) {
	if s.models == nil {
		http.Error(w, "this server has no models folder (tessera web --models DIR)", http.StatusNotFound)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+rel), "/")
	f, err := s.models.Open(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ContentType(name))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, st.ModTime(), f)
}

// ModelEntry is one file of the JSON list at /models/.
type ModelEntry struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// listModels answers /models/ with the GGUF files of the folder.
func (s *server) listModels(w http.ResponseWriter) {
	list := []ModelEntry{}
	if s.models != nil {
		entries, _ := fs.ReadDir(s.models.FS(), ".")
		for _, e := range entries {
			if !e.Type().IsRegular() || !strings.EqualFold(path.Ext(e.Name()), ".gguf") {
				continue
			}
			if info, err := e.Info(); err == nil {
				list = append(list, ModelEntry{Name: e.Name(), Size: info.Size()})
			}
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	json.NewEncoder(w).Encode(list)
}

// FindModuleRoot walks up from dir to the folder whose go.mod declares the
// Tessera module, the one BuildWasm builds in.
func FindModuleRoot(dir string) (string, bool) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[0] == "module" && f[1] == ModulePath {
					return dir, true
				}
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// BuildWasm compiles ./wasm/browser of the module at root with GOOS=js
// GOARCH=wasm into out/tessera.wasm, and copies that Go installation's
// wasm_exec.js beside it, as `make web` does. It needs the go command.
func BuildWasm(ctx context.Context, root, out string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("web: building %s needs the go command: %w", WasmFile, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	target, err := filepath.Abs(filepath.Join(out, WasmFile))
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-ldflags=-s -w", "-o", target, "./wasm/browser")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("web: GOOS=js GOARCH=wasm go build ./wasm/browser: %w\n%s", err, b)
	}
	src, err := WasmExecPath(ctx, goCmd)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, WasmExec), data, 0o644)
}

// WasmExecPath finds wasm_exec.js in the Go installation of goCmd: in
// lib/wasm since Go 1.24, misc/wasm before.
func WasmExecPath(ctx context.Context, goCmd string) (string, error) {
	b, err := exec.CommandContext(ctx, goCmd, "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("web: go env GOROOT: %w", err)
	}
	goroot := strings.TrimSpace(string(b))
	for _, dir := range []string{"lib/wasm", "misc/wasm"} {
		p := filepath.Join(goroot, dir, WasmExec)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("web: no %s in %s", WasmExec, goroot)
}

// ErrNotBuilt is returned by Stale when the wasm has not been built.
var ErrNotBuilt = errors.New("web: the engine's wasm is not built")

// Stale reports whether wasmDir/tessera.wasm is older than a Go or WGSL
// source of the module at root (or wasm_exec.js is missing), so that a
// server can rebuild before it serves an engine that no longer matches.
func Stale(root, wasmDir string) (bool, error) {
	st, err := os.Stat(filepath.Join(wasmDir, WasmFile))
	if err != nil {
		return true, ErrNotBuilt
	}
	if _, err := os.Stat(filepath.Join(wasmDir, WasmExec)); err != nil {
		return true, ErrNotBuilt
	}
	built := st.ModTime()
	stale := false
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable folder cannot hold a newer source
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(name); (ext == ".go" || ext == ".wgsl" || name == "go.mod") && !strings.HasSuffix(name, "_test.go") {
			if info, err := d.Info(); err == nil && info.ModTime().After(built) {
				stale = true
				return filepath.SkipAll
			}
		}
		return nil
	})
	return stale, nil
}
