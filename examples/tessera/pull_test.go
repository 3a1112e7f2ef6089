package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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

// TestCacheTampered: an index edited to point outside the cache (or at
// another model's file, or through a symlink) is listed as damaged, never
// loaded, pulled over or followed by rm, which drops the entry and
// deletes nothing; the sound entry beside them goes on working.
func TestCacheTampered(t *testing.T) {
	h, _ := fakeHub(t)
	keep, err := os.ReadFile(filepath.Join(shared, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	// The victim is a real model, so that following the index would run
	// it rather than fail to parse it.
	tc := hubtest.TamperedCache(t, keep)
	t.Setenv("TESSERA_CACHE", tc.Dir)

	code, out, errOut := runCLI("ls")
	if code != 0 || !strings.Contains(out, tc.Good) || !strings.Contains(errOut, "'tessera rm") {
		t.Errorf("ls: exit %d, %q, %q; want every entry listed, the damaged explained", code, out, errOut)
	}
	for ref := range tc.Refs {
		if !regexp.MustCompile(regexp.QuoteMeta(ref) + `\s.*DAMAGED`).MatchString(out) {
			t.Errorf("ls does not mark %s damaged:\n%s", ref, out)
		}
		if !strings.Contains(errOut, "damaged cache entry "+ref) {
			t.Errorf("ls does not explain %s: %q", ref, errOut)
		}
	}
	if code, out, _ = runCLI("ls", "--paths"); code != 0 || !strings.Contains(out, filepath.Join(tc.Dir, filepath.FromSlash(tc.GoodPath))) || strings.Contains(out, tc.Victim) {
		t.Errorf("ls --paths: exit %d\n%s", code, out)
	}

	for ref, how := range tc.Refs {
		for _, args := range [][]string{
			{"run", "--offline", "--model", ref, "--device", "cpu", "--steps", "5"},
			{"run", "--model", ref, "--device", "cpu", "--steps", "5"}, // no pulling over it unnoticed
			{"info", "--offline", "--model", ref},
		} {
			code, out, errOut := runCLI(args...)
			if code != 1 || out != "" || !strings.Contains(errOut, "damaged cache entry "+ref) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("%s (%s): %v: exit %d, stdout %q, stderr %q; want one line saying it is damaged", ref, how, args, code, out, errOut)
			}
		}
		code, _, errOut := runCLI("rm", ref)
		if code != 1 || !strings.Contains(errOut, "removed "+ref+" from the index but deleted none of its files") {
			t.Errorf("rm %s (%s): exit %d, %q", ref, how, code, errOut)
		}
		tc.Intact(t, keep)
	}
	if n := len(h.Requests()); n != 0 {
		t.Errorf("the damaged entries made %d requests", n)
	}
	code, out, errOut = runCLI("ls")
	if code != 0 || strings.Count(strings.TrimSpace(out), "\n") != 1 || !strings.Contains(out, tc.Good) || strings.Contains(errOut, "damaged") {
		t.Errorf("ls after rm: exit %d, %q, %q; want the sound entry alone", code, out, errOut)
	}
	if code, _, errOut = runCLI("run", "--offline", "--model", tc.Good, "--device", "cpu", "--steps", "5"); code != 0 {
		t.Errorf("the sound entry no longer runs: exit %d, %s", code, errOut)
	}
}

// TestPullTimeouts: a Hub that never answers, or a download that stalls,
// ends the pull within a bounded time with one line naming the host, the
// stage and the flag that sets its limit; a stalled download keeps what
// arrived and the next pull resumes it.
func TestPullTimeouts(t *testing.T) {
	h, cache := fakeHub(t)
	data := pullNoise(8_000)
	f := h.Add("acme/m", "m.gguf", data)
	part := filepath.Join(cache, "hf.co", "acme", "m", "m.gguf.part")
	hole := hubtest.Blackhole(t)
	tests := []struct {
		name     string
		endpoint string
		stall    int
		args     []string
		want     []string
		part     int64
	}{
		{name: "silent hub", endpoint: "http://" + hole, args: []string{"--header-timeout", "200ms", "--retries", "0"},
			want: []string{hole, "no response headers within 200ms", "--header-timeout"}, part: 0},
		{name: "silent hub's tls", endpoint: "https://" + hole, args: []string{"--connect-timeout", "200ms", "--retries", "0"},
			want: []string{hole, "TLS handshake", "--connect-timeout"}, part: 0},
		{name: "stalled download", endpoint: h.URL, stall: 3_000, args: []string{"--stall-timeout", "200ms", "--retries", "1"},
			want: []string{"stalled", "--stall-timeout", "gave up after 1 retries", "kept"}, part: 6_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(part)
			t.Setenv("HF_ENDPOINT", tt.endpoint)
			f.Stall = tt.stall
			start := time.Now()
			code, out, errOut := runCLI(append(append([]string{"pull"}, tt.args...), "acme/m/m.gguf")...)
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the pull took %s", d)
			}
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			last := lines[len(lines)-1]
			if code != 1 || out != "" || !strings.HasPrefix(last, "tessera pull: ") {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(last, w) {
					t.Errorf("%q lacks %q", last, w)
				}
			}
			if st, err := os.Stat(part); err != nil || st.Size() != tt.part {
				t.Errorf(".part: %v, %v; want %d bytes", st, err, tt.part)
			}
		})
	}
	f.Stall = 0
	t.Setenv("HF_ENDPOINT", h.URL)
	code, out, errOut := runCLI("pull", "acme/m/m.gguf")
	if code != 0 || strings.TrimSpace(out) != filepath.Join(cache, "hf.co", "acme", "m", "m.gguf") || !strings.Contains(errOut, "resumed at 5.9 KiB") {
		t.Errorf("the pull after the stall: exit %d, %q, %q; want it resumed", code, out, errOut)
	}
	if code, _, errOut = runCLI("pull", "--retries", "-1", "acme/m/m.gguf"); code != 2 || !strings.Contains(errOut, "--retries") {
		t.Errorf("--retries -1: exit %d, %q", code, errOut)
	}
}

// pullNoise is n bytes of noise, standing in for a model file.
func pullNoise(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}
