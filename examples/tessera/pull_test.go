package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/models/gguf"
	"github.com/tessera-llm/tessera/models/hub/hubtest"
)

// fakeHub serves the real stories260K GGUF as the Hub does (under the name
// and repository it has there: ggml-org/test-model-stories260K) and points
// the CLI's environment at it, with an empty cache.
func fakeHub(t *testing.T) (*hubtest.Hub, string) {
	data, err := os.ReadFile(filepath.Join(shared, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	h := hubtest.New(t)
	h.Add("ggml-org/test-model-stories260K", "stories260K-f32.gguf", data)
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", h.URL)
	t.Setenv("TESSERA_CACHE", cache)
	t.Setenv("TESSERA_OFFLINE", "")
	t.Setenv("HF_TOKEN", "")
	return h, cache
}

// TestRunPulls: --model takes a reference, pulls it from the Hub on first
// use, then runs it from the cache, offline too, until tessera rm.
func TestRunPulls(t *testing.T) {
	h, cache := fakeHub(t)
	want, err := os.ReadFile(filepath.Join(shared, "stories260K.greedy200.txt"))
	if err != nil {
		t.Fatal(err)
	}
	const ref = "hf.co/ggml-org/test-model-stories260K:F32"
	run := func(extra ...string) (int, string, string) {
		return runCLI(append([]string{"run", "--model", ref, "--temperature", "0", "--steps", "200", "--device", "cpu"}, extra...)...)
	}
	code, out, errOut := run()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if out != string(want) {
		t.Errorf("stdout differs:\n got %q\nwant %q", out, want)
	}
	if !strings.Contains(errOut, "stories260K-f32.gguf: 1.1 MiB") || !strings.Contains(errOut, "sha256 verified") {
		t.Errorf("stderr does not report the download: %q", errOut)
	}
	if strings.Contains(errOut, "\r") {
		t.Errorf("a progress bar was drawn to a stderr that is no terminal: %q", errOut)
	}
	if _, err := os.Stat(filepath.Join(cache, "hf.co", "ggml-org", "test-model-stories260K", "stories260K-f32.gguf")); err != nil {
		t.Errorf("not in the cache: %v", err)
	}

	before := len(h.Requests())
	code, out, errOut = run("--offline")
	if code != 0 || out != string(want) {
		t.Fatalf("offline from the cache: exit %d, %q: %s", code, out, errOut)
	}
	if code, out, errOut = runCLI("info", "--offline", "--model", "ggml-org/test-model-stories260K/stories260K-f32.gguf"); code != 0 || !strings.Contains(out, "blk.4.ffn_down.weight") {
		t.Errorf("info of the cached file by its file reference: exit %d: %s", code, errOut)
	}
	if n := len(h.Requests()) - before; n != 0 {
		t.Errorf("running a cached model made %d requests", n)
	}

	code, out, errOut = runCLI("ls")
	if code != 0 || !strings.Contains(out, ref) || !strings.Contains(out, "1.1 MiB") || !strings.Contains(errOut, cache) {
		t.Errorf("ls: exit %d, %q, %q", code, out, errOut)
	}
	code, out, errOut = runCLI("pull", ref)
	if code != 0 || !strings.Contains(errOut, "up to date") || strings.TrimSpace(out) != filepath.Join(cache, "hf.co", "ggml-org", "test-model-stories260K", "stories260K-f32.gguf") {
		t.Errorf("pull of a cached model: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut = runCLI("rm", "hf.co/ggml-org/test-model-stories260K:f32"); code != 0 || !strings.Contains(errOut, "removed "+ref) {
		t.Errorf("rm: exit %d, %q", code, errOut)
	}
	if code, out, errOut = runCLI("ls"); code != 0 || out != "" || !strings.Contains(errOut, "no models") {
		t.Errorf("ls after rm: exit %d, %q, %q", code, out, errOut)
	}

	before = len(h.Requests())
	code, _, errOut = run("--offline")
	if code != 1 || !strings.Contains(errOut, "not in the cache") || !strings.Contains(errOut, "offline") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
		t.Errorf("offline after rm: exit %d, %q; want one line saying it is not in the cache", code, errOut)
	}
	t.Setenv("TESSERA_OFFLINE", "1")
	if code, _, errOut = run(); code != 1 || !strings.Contains(errOut, "offline") {
		t.Errorf("TESSERA_OFFLINE=1: exit %d, %q", code, errOut)
	}
	if n := len(h.Requests()) - before; n != 0 {
		t.Errorf("offline made %d requests", n)
	}
}

func TestPullErrors(t *testing.T) {
	fakeHub(t)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pull"}, 2, "want a model reference"},
		{[]string{"pull", "./local.gguf"}, 2, "not a model reference"},
		{[]string{"pull", "hf.co/ggml-org/test-model-stories260K:Q4_0"}, 1, "no GGUF file matches :Q4_0; the repository has stories260K-f32.gguf"},
		{[]string{"pull", "hf.co/nobody/nothing:Q4_0"}, 1, "no such repository"},
		{[]string{"rm"}, 2, "want the reference"},
		{[]string{"rm", "hf.co/a/b:Q4_0"}, 1, "not in the cache"},
		{[]string{"run", "--device", "cpu", "--model", "nobody/nothing/m.gguf"}, 1, "nobody/nothing/m.gguf is no file here, nor a model on the Hub"},
		{[]string{"ls", "extra"}, 2, "unexpected argument"},
	}
	for _, tt := range tests {
		// A pull may say what it does first; the error is the last line.
		code, _, errOut := runCLI(tt.args...)
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		last := lines[len(lines)-1]
		if code != tt.code || !strings.HasPrefix(last, "tessera ") || !strings.Contains(last, tt.want) || strings.Count("\n"+errOut, "\ntessera ") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one error line with %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}

// TestRunPullsSplit: a split GGUF on the Hub is pulled whole (every
// shard) and runs from its first shard, as the whole file does.
func TestRunPullsSplit(t *testing.T) {
	h, _ := fakeHub(t)
	f, err := gguf.Open(filepath.Join(shared, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bufs := make([]bytes.Buffer, 3)
	if err := f.WriteSplit([]io.Writer{&bufs[0], &bufs[1], &bufs[2]}); err != nil {
		t.Fatal(err)
	}
	for i := range bufs {
		h.Add("acme/split", gguf.SplitName("s-Q4_0", i, 3), bufs[i].Bytes())
	}
	want, err := os.ReadFile(filepath.Join(shared, "stories260K.greedy200.txt"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("run", "--model", "hf.co/acme/split:Q4_0", "--temperature", "0", "--steps", "200", "--device", "cpu")
	if code != 0 || out != string(want) {
		t.Errorf("run of a split model: exit %d, %q: %s", code, out, errOut)
	}
}

// TestEveryModelFlagTakesRefs: each command that loads a model resolves a
// reference through the cache (here, offline, to the error that says so).
func TestEveryModelFlagTakesRefs(t *testing.T) {
	fakeHub(t)
	const ref = "hf.co/acme/absent:Q4_0"
	for _, args := range [][]string{
		{"run", "--model", ref, "--device", "cpu"},
		{"info", "--model", ref},
		{"bench", "--model", ref, "--device", "cpu"},
		{"perplexity", "--model", ref, "--device", "cpu", "--text", filepath.Join("..", "..", "testdata", "tinystories.txt")},
		{"quantize", "--model", ref, "--out", filepath.Join(t.TempDir(), "q.gguf")},
		{"chat", "--model", ref, "--device", "cpu"},
		{"run", "--model", filepath.Join(shared, "stories260K.gguf"), "--draft", ref, "--device", "cpu"},
	} {
		code, _, errOut := runCLI(append(args, "--offline")...)
		if code != 1 || !strings.Contains(errOut, ref+" is not in the cache") {
			t.Errorf("%v --offline: exit %d, %q; want the reference looked up in the cache", args, code, errOut)
		}
	}
}
