// Package e2e tests the browser demo end to end: it builds the engine as
// wasm, serves the page, and drives headless Chromium (WebGPU on its
// bundled SwiftShader) through chromedp.
package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/tessera-llm/tessera/web"
)

// sharedModels is the project's folder of real test models.
var sharedModels = filepath.Join("..", "..", "..", "shared", "models")

// chromium finds the browser: $TESSERA_CHROMIUM, Debian's binary (the
// /usr/bin/chromium wrapper adds flags and a shell warning), or one on PATH.
func chromium() string {
	if p := os.Getenv("TESSERA_CHROMIUM"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/lib/chromium/chromium"); err == nil {
		return "/usr/lib/chromium/chromium"
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// needChromium returns the browser to drive, or skips the test where
// there is none: under CI=true a missing browser fails instead, since CI
// installs it (.ci/install-browser.sh) and a skip there would hide every
// browser test.
func needChromium(t testing.TB) string {
	t.Helper()
	exe := chromium()
	if exe == "" {
		if inCI() {
			t.Fatal("no Chromium, which fails the test because CI is set: run .ci/install-browser.sh")
		}
		t.Skip("no Chromium (apt-get install chromium, or .ci/install-browser.sh); with CI=true this fails")
	}
	return exe
}

// buildWasm builds the engine exactly as `make web` does, into a fresh
// folder it returns.
func buildWasm(t testing.TB) string {
	t.Helper()
	root, ok := web.FindModuleRoot(".")
	if !ok {
		t.Fatal("not inside the Tessera module")
	}
	dir := t.TempDir()
	start := time.Now()
	if err := web.BuildWasm(context.Background(), root, dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, web.WasmFile)); err == nil {
		t.Logf("built %s (%.1f MB) in %.1f s", web.WasmFile, float64(st.Size())/1e6, time.Since(start).Seconds())
	}
	return dir
}

// console collects what the page and its workers write to the console.
type console struct {
	mu   sync.Mutex
	msgs []string // "source type: text"
	bad  []string // warnings, errors and uncaught exceptions
}

func (c *console) add(source string, m chromedp.ConsoleMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	line := fmt.Sprintf("%s %s: %s", source, m.Type, m.Text)
	c.msgs = append(c.msgs, line)
	switch m.Type {
	case chromedp.ConsoleWarning, chromedp.ConsoleError, chromedp.ConsoleException:
		c.bad = append(c.bad, line)
	}
}

func (c *console) collect(ctx context.Context, source string) {
	for m, err := range chromedp.Console(ctx) {
		if err != nil {
			return
		}
		c.add(source, m)
	}
}

// saw reports whether a message from source contains text.
func (c *console) saw(source, text string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		if strings.HasPrefix(m, source+" ") && strings.Contains(m, text) {
			return true
		}
	}
	return false
}

func (c *console) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.msgs...)
}

func (c *console) problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.bad...)
}

// demoState is what the page tells about its last run.
type demoState struct {
	State    string `json:"state"`
	Stopped  string `json:"stopped"`
	Output   string `json:"output"`
	Status   string `json:"status"`
	Tokens   string `json:"tokens"`
	TPS      string `json:"tps"`
	TTFT     string `json:"ttft"`
	Progress []struct {
		Phase string  `json:"phase"`
		Done  float64 `json:"done"`
		Total float64 `json:"total"`
	} `json:"progress"`
	Stats *struct {
		Generated int     `json:"generated"`
		TTFTms    float64 `json:"ttftMs"`
		TotalMs   float64 `json:"totalMs"`
		DecodeTPS float64 `json:"decodeTps"`
		Stopped   string  `json:"stopped"`
	} `json:"stats"`
	Model *struct {
		Name    string  `json:"name"`
		Size    float64 `json:"size"`
		Cached  bool    `json:"cached"`
		Path    string  `json:"path"`
		Backend string  `json:"backend"`
		LoadMs  float64 `json:"loadMs"`
		Adapter *struct {
			Name      string `json:"name"`
			Subgroups bool   `json:"subgroups"`
		} `json:"adapter"`
	} `json:"model"`
	Errors []struct {
		Code, Message string
	} `json:"errors"`
}

const readState = `(() => {
	const d = window.tesseraDemo || {};
	const text = (id) => document.getElementById(id).textContent;
	return {
		state: document.body.dataset.state, stopped: document.body.dataset.stopped || "",
		output: text("output"), status: text("status"), tokens: text("tokens"), tps: text("tps"), ttft: text("ttft"),
		progress: d.progress || [], stats: d.stats, model: d.model, errors: d.errors || [],
	};
})()`

// waitDone waits until the page is done (or failed) and returns its state.
func waitDone(t *testing.T, ctx context.Context, timeout time.Duration) demoState {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[string](
		`["done", "error"].includes(document.body.dataset.state) && document.body.dataset.state`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	s, serr := chromedp.Run(ctx, chromedp.Evaluate[demoState](readState))
	if serr != nil {
		t.Fatalf("reading the page: %v", serr)
	}
	if err != nil {
		t.Fatalf("the page did not finish (state %q, status %q): %v", s.State, s.Status, err)
	}
	if s.State == "error" {
		t.Fatalf("the page failed: %s (errors %+v)", s.Status, s.Errors)
	}
	return s
}

func TestBrowserDemo(t *testing.T) {
	exe := needChromium(t)
	modelPath := filepath.Join(sharedModels, "stories260K.gguf")
	goldenRaw, err := os.ReadFile(filepath.Join(sharedModels, "stories260K.greedy200.txt"))
	if err != nil {
		t.Fatalf("test model missing: %v", err)
	}
	if _, err := os.Stat(modelPath); err != nil {
		t.Fatalf("test model missing: %v", err)
	}
	golden := strings.TrimSuffix(string(goldenRaw), "\n")

	wasmDir := buildWasm(t)

	h, err := web.Handler(web.Options{Wasm: wasmDir, Models: sharedModels})
	if err != nil {
		t.Fatal(err)
	}
	// The catalogue gets a model too big for any browser, which the
	// picker must refuse.
	mux := http.NewServeMux()
	mux.HandleFunc("/models.json", func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/models.json", nil))
		var cat map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &cat); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		cat["models"] = append(cat["models"].([]any), map[string]any{"id": "huge", "name": "Huge 405B", "url": "https://huggingface.co/x/huge/resolve/main/huge.gguf",
			"size": 230e9, "params": 405e9, "memory": 250e9, "chat": true, "about": "Too big for a browser."})
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(cat)
	})
	visionDir := t.TempDir() // testImagePage's model, projector and picture
	mux.Handle("/vision/", http.StripPrefix("/vision/", http.FileServer(http.Dir(visionDir))))
	mux.Handle("/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("enable-unsafe-webgpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil { // start the browser
		t.Fatalf("starting %s: %v", exe, err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, 5*time.Minute)
	defer cancelTimeout()

	// Listen to the page's console and to each worker's, where the engine
	// runs and where WebGPU reports validation errors.
	var cons console
	go cons.collect(ctx, "page")
	attached := chromedp.Events(ctx, target.AttachedToTarget)
	go func() {
		for ev, err := range attached {
			if err != nil {
				return
			}
			if strings.Contains(ev.TargetInfo.Type, "worker") {
				wctx, _ := chromedp.NewContext(ctx, chromedp.WithTargetID(ev.TargetInfo.TargetID))
				go cons.collect(wctx, "worker")
			}
		}
	}()

	page := srv.URL + "/?mode=completion&model=/models/stories260K.gguf&quant=f32&temperature=0&steps=200&autostart=1"

	t.Run("golden greedy story", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
			t.Fatal(err)
		}
		s := waitDone(t, ctx, 3*time.Minute)
		if s.Output != golden {
			t.Errorf("the page's text differs from llama2.c's:\n got %q\nwant %q", s.Output, golden)
		}
		if s.Stats == nil || s.Stats.Generated != 200 || s.Stopped != "max" {
			t.Errorf("stats %+v, stopped %q: want 200 tokens up to the limit", s.Stats, s.Stopped)
		}
		checkProgress(t, s, "download")
		if s.Model == nil || s.Model.Backend != "webgpu" || s.Model.Adapter == nil || s.Model.Cached {
			t.Fatalf("model %+v: want a fresh download on WebGPU", s.Model)
		}
		// The label names the kernels that ran: the subgroup variants of
		// the reductions wherever the adapter has subgroups (SwiftShader
		// does), and they gave llama2.c's text above.
		if want := map[bool]string{true: "f32+subgroups", false: "f32"}[s.Model.Adapter.Subgroups]; s.Model.Path != want {
			t.Errorf("path %q on an adapter with subgroups %v, want %q", s.Model.Path, s.Model.Adapter.Subgroups, want)
		}
		t.Logf("adapter %s, %s kernels; loaded %.1f MB in %.0f ms; first token %.0f ms; decode %.1f tokens/s (page shows %s tok/s)",
			s.Model.Adapter.Name, s.Model.Path, s.Model.Size/1e6, s.Model.LoadMs, s.Stats.TTFTms, s.Stats.DecodeTPS, s.TPS)
		screenshot(t, ctx)
	})

	t.Run("stop mid-generation", func(t *testing.T) {
		// A long run, stopped once some tokens are out.
		_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
			document.getElementById("max-tokens").value = "1500";
			document.getElementById("generate").click();
			return true;
		})()`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`parseInt(document.getElementById("tokens").textContent, 10) >= 20`,
			chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(time.Minute))); err != nil {
			t.Fatalf("no tokens streamed: %v", err)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("stop"))); err != nil {
			t.Fatal(err)
		}
		s := waitDone(t, ctx, time.Minute)
		if s.Stopped != "abort" || s.Stats == nil || s.Stats.Generated < 20 || s.Stats.Generated >= 1500 {
			t.Fatalf("after Stop: stopped %q, stats %+v; want an aborted run of 20 to 1499 tokens", s.Stopped, s.Stats)
		}
		if !strings.HasPrefix(golden, s.Output) && !strings.HasPrefix(s.Output, golden) {
			t.Errorf("the stopped greedy run does not follow the golden story: %q", s.Output)
		}
		t.Logf("stopped after %d tokens: %q", s.Stats.Generated, s.Status)
	})

	t.Run("cached model is checked and reused", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate(page)); err != nil {
			t.Fatal(err)
		}
		s := waitDone(t, ctx, 3*time.Minute)
		if s.Model == nil || !s.Model.Cached {
			t.Fatalf("model %+v: want it from the browser's cache", s.Model)
		}
		checkProgress(t, s, "verify")
		if s.Output != golden {
			t.Errorf("from the cache, the text differs:\n got %q\nwant %q", s.Output, golden)
		}
		t.Logf("from the cache: loaded in %.0f ms", s.Model.LoadMs)
	})

	t.Run("buffer and file sources, unload", func(t *testing.T) {
		type result struct {
			A, B, BName, Text, Text2, Err string
		}
		r, err := chromedp.Run(ctx, chromedp.Evaluate[result](`(async () => {
			const c = tesseraDemo.client;
			const url = "/models/stories260K.gguf";
			const a = await c.load({buffer: await (await fetch(url)).arrayBuffer()}, {quant: "f32"});
			let text = "";
			await c.generate("", {maxTokens: 10}, (t) => { text += t.text; });
			const file = new File([await (await fetch(url)).blob()], "picked.gguf");
			const b = await c.load({file}, {quant: "f32"});
			let text2 = "";
			await c.generate("", {maxTokens: 10}, (t) => { text2 += t.text; });
			await c.unload();
			let err = "";
			try { await c.generate("", {maxTokens: 1}); } catch (e) { err = e.code; }
			return {A: a.source, B: b.source, BName: b.name, Text: text, Text2: text2, Err: err};
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if r.A != "buffer" || r.B != "file" || r.BName != "picked.gguf" {
			t.Errorf("sources %q, %q (%q): want buffer, file (picked.gguf)", r.A, r.B, r.BName)
		}
		for _, text := range []string{r.Text, r.Text2} {
			if text == "" || !strings.HasPrefix(golden, text) {
				t.Errorf("10 greedy tokens %q do not start the golden story", text)
			}
		}
		if r.Err != "no-model" {
			t.Errorf("generate after unload failed with code %q, want no-model", r.Err)
		}
	})

	t.Run("chat: send, regenerate, stop mid-reply, reload, switch and delete", func(t *testing.T) {
		testChatPage(t, ctx, srv.URL)
	})

	t.Run("chat: an image picked, shown and answered as natively", func(t *testing.T) {
		testImagePage(t, ctx, srv.URL, "/vision/", visionDir)
	})

	t.Run("the picker refuses a model that does not fit; screenshots at 1280 and 390 px", func(t *testing.T) {
		testPickerAndScreens(t, ctx, srv.URL)
	})

	// Let a last warning arrive before judging the console.
	time.Sleep(200 * time.Millisecond)
	// The worker says when the engine is ready: hearing it proves that its
	// console, where WebGPU would complain, was listened to.
	if !cons.saw("worker", "engine") {
		t.Errorf("the worker's console was not captured; heard: %q", cons.all())
	}
	if bad := cons.problems(); len(bad) > 0 {
		t.Errorf("the console has %d warnings or errors (WebGPU validation errors show up here):\n%s", len(bad), strings.Join(bad, "\n"))
	}
}

// checkProgress wants events of phase first (download or verify), then
// upload, each ending at its total.
func checkProgress(t *testing.T, s demoState, first string) {
	t.Helper()
	ended := map[string]bool{}
	seen := map[string]int{}
	for _, p := range s.Progress {
		seen[p.Phase]++
		if p.Total > 0 && p.Done == p.Total {
			ended[p.Phase] = true
		}
	}
	for _, phase := range []string{first, "upload"} {
		if seen[phase] == 0 || !ended[phase] {
			t.Errorf("progress: %d %q events, ending at the total: %v (all: %v)", seen[phase], phase, ended[phase], seen)
		}
	}
}

// screenshot saves the page to $TESSERA_SCREENSHOT or the test's folder.
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot: %v", err)
		return
	}
	path := os.Getenv("TESSERA_SCREENSHOT")
	if path == "" {
		path = filepath.Join(t.TempDir(), "tessera-web.png")
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Errorf("screenshot: %v", errors.Join(err))
		return
	}
	t.Logf("screenshot: %s", path)
}
