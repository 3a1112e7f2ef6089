package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/host"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// modelPath is the real test model, shared by every package's tests.
const modelPath = "../../shared/models/stories260K.gguf"

// modelName is what the tests serve it as.
const modelName = "stories260K"

var wasmDir string // where the test plugins are built, once per test binary

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tessera-plugins-")
	if err != nil {
		panic(err)
	}
	wasmDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// guest is a plugin the tests build: a package and how.
type guest struct {
	pkg     string // relative to the repository root
	tags    string
	command bool // build a WASI command instead of a reactor
}

var guests = map[string]guest{
	"story":         {pkg: "./examples/plugin/story"},
	"testplugin":    {pkg: "./host/internal/testplugin"},
	"oldabi":        {pkg: "./host/internal/testplugin/oldabi"},
	"unknownimport": {pkg: "./host/internal/testplugin/oldabi", tags: "unknownimport"},
	"command":       {pkg: "./host/internal/testplugin", command: true},
}

var (
	buildMu sync.Mutex
	built   = map[string][]byte{}
)

// wasm builds the named guest with GOOS=wasip1 GOARCH=wasm (once per test
// binary) and returns the module.
func wasm(t testing.TB, name string) []byte {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if b, ok := built[name]; ok {
		return b
	}
	g, ok := guests[name]
	if !ok {
		t.Fatalf("no guest %q", name)
	}
	out := filepath.Join(wasmDir, name+".wasm")
	args := []string{"build", "-o", out}
	if !g.command {
		args = append(args, "-buildmode=c-shared")
	}
	if g.tags != "" {
		args = append(args, "-tags", g.tags)
	}
	cmd := exec.Command(goTool(t), append(args, g.pkg)...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	built[name] = b
	return b
}

// goTool finds the go command that runs the tests.
func goTool(t testing.TB) string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(goroot(), "bin", "go")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("no go command to build the test plugins: %v", err)
	}
	return p
}

func goroot() string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return os.Getenv("GOROOT")
	}
	return strings.TrimSpace(string(out))
}

// load loads the test model on device ("cpu" or "webgpu"), skipping (or
// failing in CI) when WebGPU has no adapter.
func load(t testing.TB, device string) *runtime.Engine {
	t.Helper()
	if _, err := os.Stat(modelPath); err != nil {
		t.Fatalf("test model missing: %v", err)
	}
	eng, err := runtime.Load(modelPath, runtime.Options{Device: device})
	if errors.Is(err, webgpu.ErrNoAdapter) || errors.Is(err, webgpu.ErrNotImplemented) {
		gputest.NoDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// newHost serves eng as modelName.
func newHost(t testing.TB, eng *runtime.Engine) *host.Host {
	t.Helper()
	h, err := host.New(host.Options{Models: []host.Model{{Name: modelName, Engine: eng}}, CacheDir: filepath.Join(wasmDir, "cache")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h
}

// loadPlugin loads the named guest into h with pol (granted the test model
// unless pol names models).
func loadPlugin(t testing.TB, h *host.Host, name string, pol host.Policy) *host.Plugin {
	t.Helper()
	if pol.Models == nil {
		pol.Models = []string{modelName}
	}
	p, err := h.Load(context.Background(), name, wasm(t, name), pol)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// input marshals v as a run's input.
func input(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// generate is what Engine.Generate makes of req: the text of its tokens.
func generate(t testing.TB, eng *runtime.Engine, req runtime.Request) string {
	t.Helper()
	var b strings.Builder
	_, err := eng.Generate(context.Background(), req, func(tok runtime.Token) error {
		b.WriteString(tok.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// story is the story plugin's input.
type story struct {
	Prompt      string  `json:"prompt"`
	Steps       int     `json:"steps"`
	Temperature float32 `json:"temperature"`
	Seed        uint64  `json:"seed,omitempty"`
}

// want is what the story plugin should return for s at temperature 0.
func (s story) want(t testing.TB, eng *runtime.Engine) string {
	return s.Prompt + generate(t, eng, runtime.Request{Prompt: s.Prompt, MaxTokens: s.Steps})
}

var prompts = []string{
	"Once upon a time",
	"Lily and Ben went to the park",
	"The sun was hot. Tom wanted to swim in the big blue sea",
	"",
}

// asRequest is the engine request the story plugin makes for s.
func (s story) asRequest() runtime.Request { return storyRequest(s.Prompt, s.Steps) }

// storyRequest is a greedy request for prompt.
func storyRequest(prompt string, steps int) runtime.Request {
	return runtime.Request{Prompt: prompt, MaxTokens: steps}
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }

func mustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		if len(b) > 200 {
			b = append(b[:200:200], "..."...)
		}
		t.Fatalf("%v in %q", err, b)
	}
}
