package web

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// nodeModules is where .ci/install-node.sh puts the webgpu package
// (Dawn's WebGPU for Node); $TESSERA_NODE_MODULES names another.
func nodeModules() string {
	if d := os.Getenv("TESSERA_NODE_MODULES"); d != "" {
		return d
	}
	return "/usr/local/lib/tessera-node/node_modules"
}

// swiftShaderICD is Chromium's SwiftShader Vulkan driver, which Dawn in
// Node runs on where the machine has no GPU (it does not take lavapipe).
const swiftShaderICD = "/usr/lib/chromium/vk_swiftshader_icd.json"

func inCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// missing skips the test without a tool it needs, or fails it in CI,
// where .ci/install-*.sh installs every one.
func missing(t *testing.T, what string) {
	t.Helper()
	if inCI() {
		t.Fatalf("%s is missing (CI installs it: .ci/install-node.sh, .ci/install-browser.sh)", what)
	}
	t.Skipf("%s is missing", what)
}

// TestNpmPack packs the JavaScript package as `make pkg` does (npm pack of
// web/pkg with the wasm built into it), checks that the tarball holds the
// module, its types, the worker, Node's host, Go's loader and the wasm,
// then installs it into a scratch project as a user would and runs it in
// Node: llama2.c's greedy story on the CPU backend (with n-gram
// speculative decoding, which must not change it) and on WebGPU (the
// webgpu package, Dawn, on SwiftShader's Vulkan driver), and a bad
// request refused with a TesseraError naming its field.
func TestNpmPack(t *testing.T) {
	if testing.Short() {
		t.Skip("npm pack, npm install and Node end to end (skipped by -short, as make check runs; make test runs it)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		missing(t, "npm")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node")
	}
	var pkg struct {
		Name    string         `json:"name"`
		Version string         `json:"version"`
		Type    string         `json:"type"`
		Types   string         `json:"types"`
		Exports map[string]any `json:"exports"`
		Files   []string       `json:"files"`
		Private bool           `json:"private"`
	}
	raw, err := fs.ReadFile(embedded, "pkg/package.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	dot, _ := pkg.Exports["."].(map[string]any)
	if pkg.Type != "module" || pkg.Types != "./index.d.ts" || dot["types"] != "./index.d.ts" || dot["import"] != "./index.js" || pkg.Private || pkg.Version == "" ||
		pkg.Exports["./tessera.wasm"] != "./tessera.wasm" || pkg.Exports["./worker.js"] != "./worker.js" {
		t.Errorf("package.json: type %q, types %q, version %q, exports %v, private %v", pkg.Type, pkg.Types, pkg.Version, pkg.Exports, pkg.Private)
	}
	root, ok := FindModuleRoot(".")
	if !ok {
		t.Fatal("not inside the Tessera module")
	}
	dir := t.TempDir()
	src := filepath.Join(root, "web", Package)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() && slices.Contains(pkg.Files, e.Name()) && e.Name() != WasmFile && e.Name() != WasmExec {
			b, _ := os.ReadFile(filepath.Join(src, e.Name()))
			os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
		}
	}
	os.WriteFile(filepath.Join(dir, "package.json"), raw, 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := BuildWasm(ctx, root, dir); err != nil {
		t.Fatal(err)
	}
	npmEnv := append(os.Environ(), "npm_config_cache="+t.TempDir(), "npm_config_offline=true", "npm_config_update_notifier=false",
		"npm_config_fund=false", "npm_config_audit=false", "npm_config_loglevel=error")
	out := t.TempDir()
	cmd := exec.CommandContext(ctx, npm, "pack", "--json", "--pack-destination", out)
	cmd.Dir, cmd.Env = dir, npmEnv
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("npm pack: %v\n%s", err, b)
	}
	var packed []struct {
		Filename     string `json:"filename"`
		Size         int64  `json:"size"`
		UnpackedSize int64  `json:"unpackedSize"`
		Files        []struct {
			Path string `json:"path"`
			Size int64  `json:"size"`
		} `json:"files"`
	}
	if err := json.Unmarshal(b, &packed); err != nil || len(packed) != 1 {
		t.Fatalf("npm pack --json: %v\n%s", err, b)
	}
	var got []string
	for _, f := range packed[0].Files {
		got = append(got, f.Path)
	}
	for _, want := range append(pkg.Files, "package.json") {
		if !slices.Contains(got, want) {
			t.Errorf("the tarball lacks %s (it has %v)", want, got)
		}
	}
	tarball := filepath.Join(out, packed[0].Filename)
	t.Logf("%s: %.2f MB packed (gzipped), %.2f MB unpacked, %d files", packed[0].Filename, float64(packed[0].Size)/1e6, float64(packed[0].UnpackedSize)/1e6, len(got))

	// A scratch project installs the tarball (and the webgpu package,
	// where there is one) with npm, offline.
	project := t.TempDir()
	os.WriteFile(filepath.Join(project, "package.json"), []byte(`{"name": "scratch", "private": true, "type": "module"}`), 0o644)
	install := []string{"install", "--no-save", tarball}
	webgpu := filepath.Join(nodeModules(), "webgpu")
	_, errWebGPU := os.Stat(filepath.Join(webgpu, "package.json"))
	if errWebGPU == nil {
		install = append(install, webgpu)
	}
	cmd = exec.CommandContext(ctx, npm, install...)
	cmd.Dir, cmd.Env = project, npmEnv
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install: %v\n%s", err, b)
	}
	want, err := os.ReadFile(filepath.Join(root, "..", "shared", "models", "stories260K.greedy200.txt"))
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(root, "..", "shared", "models", "stories260K.gguf")
	script := `import { createEngine, TesseraError } from "tessera-web";
const engine = await createEngine({ model: process.argv[2], quant: "f32", device: process.argv[3], draft: process.argv[4] || "",
  maxBatchTokens: Number(process.argv[5]), maxSeqs: Number(process.argv[6]) });
const r = await engine.completions.create({ prompt: "", max_tokens: 200, temperature: 0 });
let bad = "";
try { await engine.chat.completions.create({ messages: [{ role: "user", content: "Hi" }], top_p: "all" }); }
catch (e) { bad = (e instanceof TesseraError) + " " + e.code + " " + e.param; }
console.log(JSON.stringify({ text: r.choices[0].text, backend: engine.model.backend, adapter: engine.model.adapter, bad,
  drafted: r.tessera.draft_tokens, accepted: r.tessera.accepted_tokens,
  budgets: [engine.model.maxBatchTokens, engine.model.maxSeqs] }));
await engine.unload();
`
	os.WriteFile(filepath.Join(project, "run.mjs"), []byte(script), 0o644)
	// budgets are maxBatchTokens and maxSeqs, engine what the engine reports
	// (the tokens capped by stories260K's 2048-token context).
	run := func(t *testing.T, device, draft string, budgets, engine [2]int, env ...string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, node, "run.mjs", model, device, draft, strconv.Itoa(budgets[0]), strconv.Itoa(budgets[1]))
		cmd.Dir = project
		cmd.Env = append(os.Environ(), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("node, device %s: %v\n%s\n%s", device, err, b, stderr.String())
		}
		var res struct {
			Text, Backend, Bad string
			Adapter            map[string]any
			Drafted, Accepted  int
			Budgets            [2]int
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
			t.Fatalf("node, device %s: %v\n%s", device, err, b)
		}
		if res.Text+"\n" != string(want) {
			t.Errorf("node, device %s (%s): the greedy story differs:\n got %q\nwant %q", device, res.Backend, res.Text, want)
		}
		if res.Budgets != engine {
			t.Errorf("node, device %s: budgets %v gave an engine of %v, want %v", device, budgets, res.Budgets, engine)
		}
		if res.Bad != "true bad-request top_p" {
			t.Errorf("node, device %s: a bad top_p gave %q", device, res.Bad)
		}
		t.Logf("node, device %s, draft %q: %s backend (adapter %v), %d bytes of story in %v; %d tokens drafted, %d accepted",
			device, draft, res.Backend, res.Adapter["name"], len(res.Text), time.Since(start).Round(time.Millisecond), res.Drafted, res.Accepted)
	}
	// Speculative decoding by prompt lookup keeps greedy output exact; the
	// budgets work at their largest on the CPU and at one token a step on
	// WebGPU.
	t.Run("cpu, n-gram drafts", func(t *testing.T) { run(t, "cpu", "ngram", [2]int{8192, 256}, [2]int{2048, 256}) })
	t.Run("webgpu on SwiftShader", func(t *testing.T) {
		if errWebGPU != nil {
			missing(t, "the webgpu npm package in "+nodeModules())
		}
		if _, err := os.Stat(swiftShaderICD); err != nil {
			missing(t, "Chromium's SwiftShader Vulkan driver")
		}
		run(t, "webgpu", "", [2]int{1, 1}, [2]int{1, 1}, "VK_ICD_FILENAMES="+swiftShaderICD, "XDG_RUNTIME_DIR="+t.TempDir())
	})
}
