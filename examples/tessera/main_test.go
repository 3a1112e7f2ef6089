package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var shared = filepath.Join("..", "..", "..", "shared", "models")

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli(context.Background(), args, &env{stdout: &out, stderr: &errb, stdin: strings.NewReader("")})
	return code, out.String(), errb.String()
}

// TestRunGolden is the foundation's acceptance test: both files of
// stories260K print exactly llama2.c's greedy story.
func TestRunGolden(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(shared, "stories260K.greedy200.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--model", filepath.Join(shared, "stories260K.gguf")},
		{"--model", filepath.Join(shared, "stories260K.bin"), "--tokenizer", filepath.Join(shared, "tok512.bin")},
	} {
		args = append([]string{"run", "--temperature", "0", "--steps", "200", "--device", "cpu"}, args...)
		code, out, errOut := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		if out != string(want) {
			t.Errorf("%v: stdout differs:\n got %q\nwant %q", args, out, want)
		}
		if !strings.Contains(errOut, "tok/s") || !strings.Contains(errOut, "time to first token") || !strings.Contains(errOut, "200 generated (--steps reached)") {
			t.Errorf("summary missing from stderr: %q", errOut)
		}
	}
}

// TestRunEnding: the summary says why the story ended: at --steps, at an
// end of sequence, or at a full context, which --context can widen.
func TestRunEnding(t *testing.T) {
	model := filepath.Join(shared, "stories260K.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--steps", "3"}, "3 generated (--steps reached)"},
		{[]string{"--steps", "400"}, "(end of sequence)"},
		{[]string{"--steps", "20", "--context", "8"}, "(the context of 8 tokens full; --context)"},
	} {
		args := append([]string{"run", "--temperature", "0", "--device", "cpu", "--model", model, "--prompt", "Once"}, c.args...)
		code, _, errOut := runCLI(args...)
		if code != 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, summary %q lacks %q", c.args, code, errOut, c.want)
		}
	}
}

func TestInfo(t *testing.T) {
	code, out, errOut := runCLI("info", "--model", filepath.Join(shared, "stories260K.gguf"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"llama", "layers", "8 (kv 4, head dim 8)", "512 tokens", "blk.4.ffn_down.weight", "F32",
		"storage on cpu     f32 48 tensors 1.2 MB", "storage on webgpu  f32 48 tensors 1.2 MB"} {
		if !strings.Contains(out, want) {
			t.Errorf("info lacks %q:\n%s", want, out)
		}
	}
	// --quant mixed describes the mixed policy's choice: the head, the
	// table and the matrices it keeps in int8, the rest int4.
	code, out, errOut = runCLI("info", "--model", filepath.Join(shared, "stories260K.gguf"), "--quant", "mixed")
	if code != 0 || !strings.Contains(out, "storage on webgpu  int4 13 tensors 87 KB, int8 24 tensors 196 KB, f32 11 tensors 3 KB") {
		t.Errorf("info --quant mixed: exit %d, %s\n%s", code, errOut, out)
	}
	if code, _, errOut = runCLI("info", "--model", filepath.Join(shared, "stories260K.gguf"), "--quant", "int3"); code != 2 || !strings.Contains(errOut, "int3") {
		t.Errorf("info --quant int3: exit %d, %s", code, errOut)
	}
}

// TestErrors checks that every bad input gives one clear line and the right
// exit code.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.gguf")
	os.WriteFile(junk, []byte("GGUF\x03\x00\x00\x00garbage"), 0o644)
	empty := filepath.Join(dir, "empty.bin")
	os.WriteFile(empty, nil, 0o644)
	gguf := filepath.Join(shared, "stories260K.gguf")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"run"}, 2, "--model is required"},
		{[]string{"run", "--model", gguf, "--steps", "x"}, 2, "invalid value"},
		{[]string{"run", "--model", gguf, "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"run", "--model", gguf, "--temperature", "-1"}, 2, "temperature"},
		{[]string{"run", "--model", gguf, "--device", "tpu"}, 1, "unknown device"},
		{[]string{"run", "--model", filepath.Join(dir, "missing.gguf")}, 1, "no such file"},
		{[]string{"run", "--model", junk, "--device", "cpu"}, 1, "junk.gguf"},
		{[]string{"run", "--model", empty, "--device", "cpu"}, 1, "empty.bin"},
		{[]string{"info", "--model", filepath.Join(shared, "stories260K.bin"), "--tokenizer", filepath.Join(shared, "llama2-tokenizer.model")}, 1, "tokenizer"},
		{[]string{"run", "--model", gguf, "--device", "cpu", "--context", "-5"}, 1, "context -5 must be >= 0"},
		{[]string{"run", "--model", gguf, "--device", "cpu", "--multi-step", "17"}, 1, "multi-step 17 must be in [0, 16]"},
		{[]string{"run", "--model", gguf, "--device", "cpu", "--threads", "-2"}, 1, "threads -2 must be in [0, 1024]"},
		{[]string{"run", "--model", gguf, "--device", "cpu", "--prompt", "Once", "--image", filepath.Join(dir, "missing.png")}, 1, "missing.png"},
		{[]string{"run", "--model", gguf, "--device", "cpu", "--context", "16", "--prompt", strings.Repeat("Once upon a time ", 10)}, 1, "longer than the context"},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", tt.args, code, errOut, tt.code, tt.want)
		}
		if out != "" { // not even the prompt of a run that could not start
			t.Errorf("%v: stdout %q", tt.args, out)
		}
		if strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: error is not one line: %q", tt.args, errOut)
		}
	}
}

// TestFlagsAfterArguments: a command that takes arguments reads its flags
// after them too (tessera pull REF --retries 0), each with its value;
// after the first argument a dash that names none of its flags (nor -h)
// is an argument, and "--" ends the flags.
func TestFlagsAfterArguments(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.String("model", "", "")
	fs.Bool("json", false, "")
	fs.Int("n", 0, "")
	for _, c := range []struct{ in, want []string }{
		{[]string{"a", "b"}, []string{"--", "a", "b"}},
		{[]string{"--model", "m", "a"}, []string{"--model", "m", "--", "a"}},
		{[]string{"a", "--model", "m", "b"}, []string{"--model", "m", "--", "a", "b"}},
		{[]string{"a", "--json", "b"}, []string{"--json", "--", "a", "b"}},
		{[]string{"a", "-n=3", "--model=m"}, []string{"-n=3", "--model=m", "--", "a"}},
		{[]string{"a", "-5 degrees", "--n", "2"}, []string{"--n", "2", "--", "a", "-5 degrees"}},
		{[]string{"a", "--", "--json"}, []string{"--", "a", "--json"}},
		{[]string{"--bogus", "a"}, []string{"--bogus", "--", "a"}},
		{[]string{"a", "-", "--model"}, []string{"--model", "--", "a", "-"}},
		{[]string{"--json"}, []string{"--json"}},
		{[]string{"a", "-h"}, []string{"-h", "--", "a"}},
	} {
		if got := flagsFirst(fs, c.in); !slices.Equal(got, c.want) {
			t.Errorf("flagsFirst(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	tok := filepath.Join(shared, "stories260K.gguf")
	_, before, _ := runCLI("tokenize", "--tokenizer", tok, "--special", "Hello world")
	code, after, errOut := runCLI("tokenize", "Hello world", "--tokenizer", tok, "--special")
	if code != 0 || after != before || !strings.HasPrefix(before, "[1,") {
		t.Errorf("flags after the text: exit %d, %q (%s), want %q", code, after, errOut, before)
	}
	if code, _, errOut := runCLI("pull", "hf.co/o/r:Q4_0", "-h"); code != 0 || !strings.Contains(errOut, "-retries") {
		t.Errorf("pull REF -h: exit %d, %q", code, errOut)
	}
}
