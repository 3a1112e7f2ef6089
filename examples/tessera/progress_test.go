package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPerplexityProgressNotATerminal: with stderr not a terminal (a
// buffer, or a file as `2>log` makes it), perplexity draws no bar: no
// carriage-return redraws, one summary line of the scoring.
func TestPerplexityProgressNotATerminal(t *testing.T) {
	args := []string{"perplexity", "--model", filepath.Join(shared, "stories260K.gguf"), "--device", "cpu",
		"--text", filepath.Join("..", "..", "testdata", "tinystories.txt")}
	check := func(name, stderr string) {
		t.Helper()
		if strings.ContainsAny(stderr, "\r\x1b") {
			t.Errorf("%s: a bar was drawn: %q", name, stderr)
		}
		if n := strings.Count(stderr, "scoring"); n != 1 {
			t.Errorf("%s: %d lines say scoring, want one summary line:\n%s", name, n, stderr)
		}
	}

	code, _, stderr := runCLI(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	check("buffer", stderr)

	log, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var out bytes.Buffer
	if code := cli(t.Context(), args, &env{stdout: &out, stderr: log, stdin: strings.NewReader("")}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b, err := os.ReadFile(log.Name())
	if err != nil {
		t.Fatal(err)
	}
	check("file", string(b))
}

// TestProgressOnATerminal: on a terminal the helper draws the bar.
func TestProgressOnATerminal(t *testing.T) {
	var w bytes.Buffer
	p := newProgressOn(&w, true, "scoring", 100, "tok")
	for i := range 101 {
		p.Set(int64(i))
	}
	p.Finish()
	if !strings.Contains(w.String(), "\r") || !strings.Contains(w.String(), "scoring") {
		t.Errorf("no bar drawn on a terminal: %q", w.String())
	}
}

// TestProgressSummary: off a terminal the helper writes exactly one line,
// when it finishes, with the count reached; as an io.Writer it counts
// bytes.
func TestProgressSummary(t *testing.T) {
	var w bytes.Buffer
	p := newProgress(&w, "scoring", 4365, "tok")
	for i := range 4366 {
		p.Set(int64(i))
	}
	if w.Len() != 0 {
		t.Errorf("wrote %q before finishing", w.String())
	}
	p.Finish()
	p.Finish() // twice is once
	got := w.String()
	if strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "scoring: 4365/4365 tok") {
		t.Errorf("summary %q", got)
	}

	w.Reset()
	p = newProgress(&w, "downloading", 3<<20, "B")
	if _, err := io.Copy(p, io.LimitReader(zeros{}, 2<<20)); err != nil {
		t.Fatal(err)
	}
	p.Finish()
	if got := w.String(); !strings.HasPrefix(got, "downloading: 2.0/3.0 MiB") || strings.Count(got, "\n") != 1 {
		t.Errorf("summary %q", got)
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }
