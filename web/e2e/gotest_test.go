package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// goTestPage runs a Go test binary compiled for the browser (GOOS=js),
// ?wasm, with Go's wasm_exec.js and the arguments in ?args (one per line),
// and keeps what it prints and its exit code in window.goTest.
const goTestPage = `<!doctype html><meta charset="utf-8"><title>go test</title>
<script src="/wasm_exec.js"></script>
<script>
window.goTest = {log: [], code: null};
const print = console.log.bind(console);
console.log = (...a) => { window.goTest.log.push(a.join(" ")); print(...a); };
const go = new Go();
go.argv = ["test.wasm", ...new URLSearchParams(location.search).get("args").split("\n")];
go.exit = (code) => { window.goTest.code = code; };
WebAssembly.instantiateStreaming(fetch("/" + new URLSearchParams(location.search).get("wasm")), go.importObject)
  .then((r) => { globalThis.wasm = r; return go.run(r.instance); })
  .catch((e) => { window.goTest.log.push("load failed: " + e); window.goTest.code = 99; });
</script>`

// goTests serves goTestPage and the packages' test binaries it builds for
// the browser, so that a package's own tests and benchmarks run in
// Chromium as they run natively.
type goTests struct {
	dir string
	srv *httptest.Server
}

// newGoTests starts the server; extra adds handlers (a model the tests
// fetch). It stops when the test ends.
func newGoTests(t testing.TB, extra map[string]http.HandlerFunc) *goTests {
	t.Helper()
	execJS, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		t.Fatal(err)
	}
	g := &goTests{dir: t.TempDir()}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(goTestPage))
	})
	mux.HandleFunc("/favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/wasm_exec.js", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		w.Write(execJS)
	})
	mux.HandleFunc("/{name}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/wasm")
		http.ServeFile(w, r, filepath.Join(g.dir, filepath.Base(r.PathValue("name"))))
	})
	for pattern, h := range extra {
		mux.HandleFunc(pattern, h)
	}
	g.srv = httptest.NewServer(mux)
	t.Cleanup(g.srv.Close)
	return g
}

// build compiles pkg's tests (a path below the module root) for the
// browser and returns the binary's name on the server.
func (g *goTests) build(t testing.TB, pkg string) string {
	t.Helper()
	name := strings.ReplaceAll(pkg, "/", "_") + ".wasm"
	build := exec.Command("go", "test", "-c", "-o", filepath.Join(g.dir, name), "../../"+pkg)
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s's tests for the browser: %v\n%s", pkg, err, out)
	}
	return name
}

// run runs the binary name with args in the page ctx shows, waiting up to
// limit for it to exit, and returns what it printed and its exit code.
func (g *goTests) run(t testing.TB, ctx context.Context, cons *console, name string, args []string, limit time.Duration) (string, int) {
	t.Helper()
	q := url.Values{"wasm": {name}, "args": {strings.Join(args, "\n")}}
	if err := chromedp.Do(ctx, chromedp.Navigate(g.srv.URL+"/?"+q.Encode())); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Log  []string `json:"log"`
		Code *int     `json:"code"`
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.goTest && window.goTest.code !== null`,
		chromedp.WithPollingInterval(time.Second), chromedp.WithPollingTimeout(limit))); err != nil {
		t.Fatalf("%s did not finish in the browser: %v (console %q)", name, err, cons.all())
	}
	r, err := chromedp.Run(ctx, chromedp.Evaluate[result](`window.goTest`))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(r.Log, "\n"), *r.Code
}
