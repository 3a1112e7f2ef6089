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

// BenchmarkBrowserStepKernels runs runtime's BenchmarkStepKernels (each
// dispatch of a stories260K decode step timed on its own) natively on
// SwiftShader's Vulkan driver and in Chromium on its SwiftShader, native,
// browser, native, and logs the three tables: which kernels cost the
// browser more than native on the same adapter (issue 49).
// TESSERA_STEP_ARGS passes flags to both (-step-subgroups=off,
// -step-prologue=on, -step-workgroups=wide: forms to compare).
//
//	go test ./web/e2e -run '^$' -bench BrowserStepKernels -benchtime 1x -v
func BenchmarkBrowserStepKernels(b *testing.B) {
	exe := chromium()
	if exe == "" {
		b.Skip("no Chromium")
	}
	if _, err := os.Stat(swiftShaderICD); err != nil {
		b.Skip("no SwiftShader Vulkan driver beside Chromium")
	}
	dir := b.TempDir()
	execJS, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "lib", "wasm", "wasm_exec.js"))
	if err != nil {
		b.Fatal(err)
	}
	model, err := os.ReadFile(filepath.Join(sharedModels, "stories260K.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	build := exec.Command("go", "test", "-c", "-o", filepath.Join(dir, "runtime.wasm"), "../../runtime")
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building runtime's tests for the browser: %v\n%s", err, out)
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
	mux.HandleFunc("/model.gguf", func(w http.ResponseWriter, r *http.Request) { w.Write(model) })
	mux.HandleFunc("/runtime.wasm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/wasm")
		http.ServeFile(w, r, filepath.Join(dir, "runtime.wasm"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	native := func() string {
		cmd := exec.Command("go", append([]string{"test", "../../runtime", "-run", "^$", "-bench", "StepKernels", "-benchtime", "1x", "-v", "-args"},
			strings.Fields(os.Getenv("TESSERA_STEP_ARGS"))...)...)
		cmd.Env = append(os.Environ(), "VK_ICD_FILENAMES="+swiftShaderICD)
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("native: %v\n%s", err, out)
		}
		return string(out)
	}
	browser := func() string {
		ctx, cons := startBrowser(b, exe, false)
		args := []string{"-test.run=^$", "-test.bench=StepKernels", "-test.benchtime=1x", "-test.v", "-step-model-url=" + srv.URL + "/model.gguf"}
		args = append(args, strings.Fields(os.Getenv("TESSERA_STEP_ARGS"))...)
		q := url.Values{"wasm": {"runtime.wasm"}, "args": {strings.Join(args, "\n")}}
		if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/?"+q.Encode())); err != nil {
			b.Fatal(err)
		}
		type result struct {
			Log  []string `json:"log"`
			Code *int     `json:"code"`
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`window.goTest && window.goTest.code !== null`,
			chromedp.WithPollingInterval(time.Second), chromedp.WithPollingTimeout(5*time.Minute))); err != nil {
			b.Fatalf("the benchmark did not finish in the browser: %v (console %q)", err, cons.all())
		}
		r, err := chromedp.Run(ctx, chromedp.Evaluate[result](`window.goTest`))
		if err != nil {
			b.Fatal(err)
		}
		out := strings.Join(r.Log, "\n")
		if *r.Code != 0 {
			b.Fatalf("in the browser: exit code %d\n%s", *r.Code, out)
		}
		return out
	}
	for range b.N {
		b.Logf("native:\n%s", native())
		b.Logf("browser:\n%s", browser())
		b.Logf("native:\n%s", native())
	}
}
