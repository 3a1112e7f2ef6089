package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
	model, err := os.ReadFile(filepath.Join(sharedModels, "stories260K.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	g := newGoTests(b, map[string]http.HandlerFunc{"/model.gguf": func(w http.ResponseWriter, r *http.Request) { w.Write(model) }})
	wasm := g.build(b, "runtime")

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
		args := []string{"-test.run=^$", "-test.bench=StepKernels", "-test.benchtime=1x", "-test.v", "-step-model-url=" + g.srv.URL + "/model.gguf"}
		args = append(args, strings.Fields(os.Getenv("TESSERA_STEP_ARGS"))...)
		out, code := g.run(b, ctx, cons, wasm, args, 5*time.Minute)
		if code != 0 {
			b.Fatalf("in the browser: exit code %d\n%s", code, out)
		}
		return out
	}
	for range b.N {
		b.Logf("native:\n%s", native())
		b.Logf("browser:\n%s", browser())
		b.Logf("native:\n%s", native())
	}
}
