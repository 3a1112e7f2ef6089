package eval_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/models/dtype"
	"github.com/tessera-llm/tessera/models/synth"
	"github.com/tessera-llm/tessera/runtime"
	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
)

// shared holds the project's test models (never downloaded by a test).
var shared = filepath.Join("..", "..", "..", "shared", "models")

// sharedFile is the path of a test model, failing the test when it is
// missing.
func sharedFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(shared, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("test model missing: %v", err)
	}
	return p
}

// storyText is the project's own TinyStories-style test text (over 4,000
// tokens by the stories260K tokenizer).
func storyText(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tinystories.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// synthModel writes a random-weight model of a synth shape with weights
// of type typ, and returns its path.
func synthModel(t testing.TB, shape string, typ dtype.Type) string {
	t.Helper()
	s, err := synth.Lookup(shape)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), shape+".gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := synth.Write(f, s, typ, 11); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadWebGPU loads path on WebGPU (f32 weights unless opts says), or skips
// the test where there is no adapter (gputest.NoDevice).
func loadWebGPU(t *testing.T, path string, opts runtime.Options) *runtime.Engine {
	t.Helper()
	opts.Device = "webgpu"
	if opts.Quant == "" {
		opts.Quant = "f32"
	}
	eng, err := runtime.Load(path, opts)
	if errors.Is(err, runtime.ErrNoAdapter) {
		gputest.NoDevice(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}
