package web

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve builds a handler over a wasm folder with a fake engine and a
// models folder with one model and one other file.
func serve(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	wasm, models := t.TempDir(), t.TempDir()
	engine := []byte(strings.Repeat("\x00asm wasm bytes compress well ", 4096))
	for name, data := range map[string][]byte{
		filepath.Join(wasm, WasmFile):           engine,
		filepath.Join(wasm, WasmExec):           []byte("// loader"),
		filepath.Join(models, "tiny.gguf"):      []byte("GGUF0123456789"),
		filepath.Join(models, "notes.txt"):      []byte("not a model"),
		filepath.Join(t.TempDir(), "secret.go"): []byte("outside"),
	} {
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := Handler(Options{Wasm: wasm, Models: models})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, engine
}

func get(t *testing.T, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	// A bare transport: no transparent gzip, so the test sees the encoding.
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestHandlerTypes(t *testing.T) {
	srv, _ := serve(t)
	for path, want := range map[string]string{
		"/":                 "text/html; charset=utf-8",
		"/app.js":           "text/javascript; charset=utf-8",
		"/pkg/worker.js":    "text/javascript; charset=utf-8",
		"/pkg/index.js":     "text/javascript; charset=utf-8",
		"/pkg/client.js":    "text/javascript; charset=utf-8",
		"/pkg/index.d.ts":   "text/plain; charset=utf-8",
		"/pkg/package.json": "application/json",
		"/models.json":      "application/json",
		"/style.css":        "text/css; charset=utf-8",
		"/favicon.svg":      "image/svg+xml",
		"/pkg/tessera.wasm": "application/wasm",
		"/pkg/wasm_exec.js": "text/javascript; charset=utf-8",
		"/models/":          "application/json",
		"/models/tiny.gguf": "application/octet-stream",
	} {
		resp, _ := get(t, srv.URL+path, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != want {
			t.Errorf("%s: %d %q, want 200 %q", path, resp.StatusCode, resp.Header.Get("Content-Type"), want)
		}
	}
	for _, path := range []string{"/nope.js", "/models/missing.gguf", "/models/../web.go", "/models/%2e%2e/web.go", "/e2e/e2e_test.go", "/web.go", "/tessera.wasm", "/pkg/", "/pkg/x/index.js"} {
		if resp, _ := get(t, srv.URL+path, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, resp.StatusCode)
		}
	}
}

func TestHandlerGzipsTheWasm(t *testing.T) {
	srv, engine := serve(t)
	resp, body := get(t, srv.URL+"/pkg/tessera.wasm", map[string]string{"Accept-Encoding": "gzip, deflate"})
	if resp.Header.Get("Content-Encoding") != "gzip" || len(body) >= len(engine)/4 {
		t.Fatalf("encoding %q, %d bytes for %d: want gzip, much smaller", resp.Header.Get("Content-Encoding"), len(body), len(engine))
	}
	zr, err := gzip.NewReader(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if string(plain) != string(engine) {
		t.Error("the gzipped wasm does not unpack to the file")
	}
	if resp, body := get(t, srv.URL+"/pkg/tessera.wasm", nil); resp.Header.Get("Content-Encoding") != "" || string(body) != string(engine) {
		t.Error("without Accept-Encoding the wasm must come plain")
	}
	etag := resp.Header.Get("ETag")
	if resp, _ := get(t, srv.URL+"/pkg/tessera.wasm", map[string]string{"Accept-Encoding": "gzip", "If-None-Match": etag}); resp.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation with the ETag: %d, want 304", resp.StatusCode)
	}
}

func TestHandlerModels(t *testing.T) {
	srv, _ := serve(t)
	resp, body := get(t, srv.URL+"/models/tiny.gguf", map[string]string{"Range": "bytes=4-7"})
	if resp.StatusCode != http.StatusPartialContent || string(body) != "0123" {
		t.Errorf("range request: %d %q, want 206 \"0123\"", resp.StatusCode, body)
	}
	_, body = get(t, srv.URL+"/models/", nil)
	var list []ModelEntry
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "tiny.gguf" || list[0].Size != 14 {
		t.Errorf("listing %+v, want only tiny.gguf of 14 bytes", list)
	}
}

func TestHandlerWithoutWasm(t *testing.T) {
	h, err := Handler(Options{Wasm: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, body := get(t, srv.URL+"/pkg/tessera.wasm", nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "make web") {
		t.Errorf("missing wasm: %d %q, want 404 saying to run make web", resp.StatusCode, body)
	}
	if _, err := Handler(Options{Models: filepath.Join(t.TempDir(), "absent")}); err == nil {
		t.Error("a missing models folder is not an error")
	}
}

func TestAcceptsGzip(t *testing.T) {
	for header, want := range map[string]bool{
		"gzip": true, "deflate, gzip;q=0.5": true, "br": false, "": false, "gzip;q=0": false, "GZIP": true,
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Accept-Encoding", header)
		if got := acceptsGzip(r); got != want {
			t.Errorf("Accept-Encoding %q: %v, want %v", header, got, want)
		}
	}
}
