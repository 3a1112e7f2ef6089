package e2e

import (
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

// TestBrowserSubgroups runs runtime/gpu's twin tests inside Chromium, on
// its SwiftShader adapter, which has subgroups (size 4): TestSubgroupTwins
// (the subgroup variants of the reductions against the plain f32 kernels
// and the CPU reference, on the GPUs' plans) and the twin tests of the ops
// whose kernels have subgroup variants, on the adapter's own plan. Natively
// no binding exposes subgroups, so this is where those kernels run. It
// also runs TestF16Twins, which skips on SwiftShader (no shader-f16) and
// runs the f16 kernels where Chromium has a GPU with it, and runtime's
// TestSampleKernelMatchesSampler: the sample kernel (with subgroups there)
// draws the CPU sampler's tokens. TestNarrowWorkgroups runs SwiftShader's
// narrow reductions and GEMVs with its subgroups (one subgroup a
// workgroup) and the wide ones beside them.
func TestBrowserSubgroups(t *testing.T) {
	if testing.Short() {
		t.Skip("builds runtime/gpu's tests as wasm and runs them in Chromium")
	}
	exe := needChromium(t)
	dir := t.TempDir()
	execJS, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		t.Fatal(err)
	}
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
		http.ServeFile(w, r, filepath.Join(dir, filepath.Base(r.PathValue("name"))))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cons := startBrowser(t, exe, false)

	// run builds pkg's tests for the browser and runs those that pattern
	// selects (by default those named) with args; those of pass must pass,
	// those of skip pass or skip.
	run := func(pkg, pattern string, pass, skip []string, args ...string) {
		t.Helper()
		name := strings.ReplaceAll(pkg, "/", "_") + ".wasm"
		build := exec.Command("go", "test", "-c", "-o", filepath.Join(dir, name), "../../"+pkg)
		build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building %s's tests for the browser: %v\n%s", pkg, err, out)
		}
		if pattern == "" {
			pattern = "^(" + strings.Join(append(append([]string{}, pass...), skip...), "|") + ")$"
		}
		args = append([]string{"-test.run=" + pattern, "-test.v"}, args...)
		q := url.Values{"wasm": {name}, "args": {strings.Join(args, "\n")}}
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/?"+q.Encode())); err != nil {
			t.Fatal(err)
		}
		type result struct {
			Log  []string `json:"log"`
			Code *int     `json:"code"`
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.goTest && window.goTest.code !== null`,
			chromedp.WithPollingInterval(time.Second), chromedp.WithPollingTimeout(8*time.Minute))); err != nil {
			t.Fatalf("%s's tests did not finish: %v (console %q)", pkg, err, cons.all())
		}
		r, err := chromedp.Run(ctx, chromedp.Evaluate[result](`window.goTest`))
		if err != nil {
			t.Fatal(err)
		}
		out := strings.Join(r.Log, "\n")
		t.Logf("%s's tests in Chromium:\n%s", pkg, out)
		if *r.Code != 0 {
			t.Fatalf("%s: exit code %d", pkg, *r.Code)
		}
		for _, name := range pass {
			if !strings.Contains(out, "--- PASS: "+name+" ") {
				t.Errorf("%s did not pass (skipped or not run)", name)
			}
		}
		for _, name := range skip {
			if !strings.Contains(out, "--- SKIP: "+name+" ") && !strings.Contains(out, "--- PASS: "+name+" ") {
				t.Errorf("%s did not run", name)
			}
		}
	}
	// The f16 kernels need shader-f16, which SwiftShader lacks: there
	// TestF16Twins skips, and runs on a GPU whose Chromium has it.
	run("runtime/gpu", "", []string{"TestSubgroupTwins", "TestArgmax", "TestTopK", "TestBiasAndHeadNorm", "TestLayerNormAndActivate", "TestElementwiseOps",
		"TestNarrowWorkgroups"},
		[]string{"TestF16Twins"}, "-subgroups")
	// The sample kernel's subgroup form against runtime.Sampler itself.
	// The GEMVs' RMSNorm prologue (its subgroup sums): projections whose
	// input a residual prepared (Prescaled), which take it on every
	// adapter; f32 and int4 weights (each subtest is ~12 s here).
	run("runtime/gpu", "^TestProject$/^(f32_prologue_k64|int4_prologue_k96)_/^(qkv-norm-bias|glu-norm|gate-up-split-norm)-next$",
		[]string{"TestProject"}, nil)
	run("runtime", "", []string{"TestSampleKernelMatchesSampler"}, nil)
	for _, p := range cons.problems() {
		// Promises the device left pending settle after the program's
		// exit, which wasm_exec.js reports as exceptions.
		if !strings.Contains(p, "Go program has already exited") {
			t.Errorf("a WebGPU warning or error in the console: %q", p)
		}
	}
}
