package main

import (
	"encoding/json"
	"math"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestEmbed: texts from arguments or standard input give one normalised
// JSON array each; --raw keeps the pooled vectors; --rerank scores lines.
func TestEmbed(t *testing.T) {
	dir := t.TempDir()
	model, ranker := filepath.Join(dir, "bert.gguf"), filepath.Join(dir, "ranker.gguf")
	for _, m := range [][2]string{{"tiny-bert", model}, {"tiny-reranker", ranker}} {
		if code, _, errOut := runCLI("synth", "--shape", m[0], "--out", m[1]); code != 0 {
			t.Fatalf("synth %s: %s", m[0], errOut)
		}
	}
	parse := func(out string) [][]float64 {
		t.Helper()
		var vecs [][]float64
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var v []float64
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			vecs = append(vecs, v)
		}
		return vecs
	}
	norm := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x * x
		}
		return math.Sqrt(s)
	}
	code, out, errOut := runCLI("embed", "--model", model, "--device", "cpu", "hello world", "café")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	args := parse(out)
	if len(args) != 2 || len(args[0]) != 64 || math.Abs(norm(args[0])-1) > 1e-6 {
		t.Fatalf("got %d vectors of %d values, norm %g", len(args), len(args[0]), norm(args[0]))
	}
	code, out, errOut = runCLIInput("hello world\ncafé\n", "embed", "--model", model, "--device", "cpu")
	if stdin := parse(out); code != 0 || len(stdin) != 2 || stdin[1][5] != args[1][5] {
		t.Errorf("standard input: exit %d %s: %d vectors", code, errOut, len(stdin))
	}
	code, out, _ = runCLI("embed", "--model", model, "--device", "cpu", "--raw", "hello world")
	if raw := parse(out); code != 0 || math.Abs(norm(raw[0])-1) < 1e-3 {
		t.Errorf("--raw: exit %d, norm %g", code, norm(raw[0]))
	}
	code, out, errOut = runCLIInput("the cat sat\na dog\n", "embed", "--model", ranker, "--device", "cpu", "--rerank", "cat?")
	lines := strings.Fields(out)
	if code != 0 || len(lines) != 2 {
		t.Fatalf("--rerank: exit %d %s: %q", code, errOut, out)
	}
	for _, l := range lines {
		if _, err := strconv.ParseFloat(l, 32); err != nil {
			t.Errorf("score %q: %v", l, err)
		}
	}
	if code, _, _ := runCLI("embed", "--model", ranker, "--device", "cpu", "x"); code != 1 {
		t.Errorf("embedding with a reranker: exit %d, want 1", code)
	}
}

// TestServeEmbedder: tessera serve serves an embedding model on
// /v1/embeddings beside a generative one.
func TestServeEmbedder(t *testing.T) {
	model := filepath.Join(t.TempDir(), "bert.gguf")
	if code, _, errOut := runCLI("synth", "--shape", "tiny-bert", "--out", model); code != 0 {
		t.Fatalf("synth: %s", errOut)
	}
	_, url, _ := startServe(t, "--model", "bert="+model, "--model", filepath.Join(shared, "stories260K.gguf"))
	resp, err := http.Post(url+"/v1/embeddings", "application/json", strings.NewReader(`{"model": "bert", "input": ["hello", "world"]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Data []struct{ Embedding []float64 }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Data) != 2 || len(out.Data[1].Embedding) != 64 {
		t.Fatalf("status %d, %v: %+v", resp.StatusCode, err, out)
	}
}
