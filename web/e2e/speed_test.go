package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/web"
)

// swiftShaderICD is the Vulkan driver of Chromium's SwiftShader, which
// the browser's WebGPU runs on here and wgpu-native can load too.
const swiftShaderICD = "/usr/lib/chromium/vk_swiftshader_icd.json"

// BenchmarkBrowserDecode decodes stories260K greedily in Chromium and
// natively on the same adapter (SwiftShader's Vulkan driver, given to
// wgpu-native through VK_ICD_FILENAMES), alternating native, browser,
// browser, native, and reports both decode rates and their ratio (issue
// 49: the browser at 0.9x native or better). Run it alone, so that
// nothing opened another adapter first:
//
//	go test ./web/e2e -run '^$' -bench BrowserDecode -benchtime 1x
func BenchmarkBrowserDecode(b *testing.B) {
	exe := chromium()
	if exe == "" {
		b.Skip("no Chromium")
	}
	if _, err := os.Stat(swiftShaderICD); err != nil {
		b.Skip("no SwiftShader Vulkan driver beside Chromium")
	}
	b.Setenv("VK_ICD_FILENAMES", swiftShaderICD)
	stories := filepath.Join(sharedModels, "stories260K.gguf")
	eng, err := runtime.Load(stories, runtime.Options{Device: "webgpu", Quant: "f32", Context: 256, NoSelfCheck: true})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	if dev := eng.DeviceName(); !strings.Contains(dev, "SwiftShader") {
		b.Skipf("native runs on %s, not SwiftShader: run the benchmark alone", dev)
	}
	const tokens = 160
	req := runtime.Request{Prompt: "Once upon a time", MaxTokens: tokens, IgnoreEOS: true}
	nativeRun := func() float64 {
		st, err := eng.Generate(context.Background(), req, func(runtime.Token) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		return st.DecodeRate()
	}

	wasmDir := buildWasm(b)
	h, err := web.Handler(web.Options{Wasm: wasmDir, Models: sharedModels})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(apiPage))
	})
	mux.Handle("/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx, cons := startBrowser(b, exe, false)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		b.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.title === "ready"`, chromedp.WithPollingTimeout(time.Minute))); err != nil {
		b.Fatalf("the module did not load: %v (console %q)", err, cons.all())
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(async () => {
		window.engine = await tessera.createEngine({model: "/models/stories260K.gguf", quant: "f32", context: 256, selfCheck: false});
		return true;
	})()`, chromedp.EvalAwaitPromise)); err != nil {
		b.Fatalf("load in the page: %v (console %q)", err, cons.all())
	}
	browserRun := func() float64 {
		r, err := chromedp.Run(ctx, chromedp.Evaluate[apiResult](`(async () => {
			const a = await engine.completions.create({prompt: "Once upon a time", max_tokens: 160, temperature: 0, ignore_eos: true});
			return {DecodeTPS: a.tessera.decode_tps, Adapter: (engine.model.adapter || {}).name || ""};
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			b.Fatalf("decode in the page: %v (console %q)", err, cons.all())
		}
		return r.DecodeTPS
	}
	nativeRun() // warm: pipelines compiled on both sides
	browserRun()
	b.ResetTimer()
	var native, browser, nativeCPU, browserCPU []float64
	// Each run's CPU time a token, of this process and its children (the
	// browser's), alongside its rate: on shared cores the rates follow
	// the load, and there the CPU each side spends is what sets them.
	timed := func(f func() float64, rates, cpu *[]float64) {
		c0 := treeCPU(os.Getpid())
		*rates = append(*rates, f())
		*cpu = append(*cpu, (treeCPU(os.Getpid())-c0)*1000/tokens)
	}
	for range b.N {
		timed(nativeRun, &native, &nativeCPU)
		timed(browserRun, &browser, &browserCPU)
		timed(browserRun, &browser, &browserCPU)
		timed(nativeRun, &native, &nativeCPU)
	}
	b.StopTimer()
	med := func(v []float64) float64 { v = slices.Clone(v); slices.Sort(v); return v[len(v)/2] }
	n, w := med(native), med(browser)
	b.ReportMetric(n, "native-tok/s")
	b.ReportMetric(w, "browser-tok/s")
	b.ReportMetric(w/n, "browser/native")
	if nc, bc := med(nativeCPU), med(browserCPU); nc > 0 && bc > 0 {
		b.ReportMetric(nc, "native-cpu-ms/tok")
		b.ReportMetric(bc, "browser-cpu-ms/tok")
	}
	b.Logf("stories260K greedy decode on SwiftShader, %d tokens: native %.0f tok/s (%.1f CPU ms a token), browser %.0f tok/s (%.1f)",
		tokens, native, nativeCPU, browser, browserCPU)
}

// treeCPU is the CPU time, in seconds, that process pid and the processes
// under it have used so far, their ended threads included (Linux's /proc;
// 0 where there is none). Clock ticks are taken as 100 a second, Linux's
// USER_HZ everywhere.
func treeCPU(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	var total float64
	stat := string(raw)
	// Fields after the command's closing parenthesis: state is 3, utime 14
	// and stime 15 (proc(5)).
	if f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:]); len(f) > 12 {
		user, _ := strconv.ParseFloat(f[11], 64)
		sys, _ := strconv.ParseFloat(f[12], 64)
		total = (user + sys) / 100
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		children, _ := os.ReadFile(t)
		for _, c := range strings.Fields(string(children)) {
			if child, err := strconv.Atoi(c); err == nil {
				total += treeCPU(child)
			}
		}
	}
	return total
}
