package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCPUOnlyBuild builds tessera with CGO_ENABLED=0, as a user without a C
// toolchain would, and runs it: the CPU-only binary prints the golden story
// with --device auto (falling back from WebGPU, and saying why), and
// --device webgpu fails with that reason instead of a link error.
func TestCPUOnlyBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the CPU-only binary: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(shared, "stories260K.greedy200.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "tessera")
	build := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	model := filepath.Join(shared, "stories260K.gguf")
	run := exec.CommandContext(ctx, bin, "run", "--temperature", "0", "--steps", "200", "--device", "auto", "--model", model)
	var stderr strings.Builder
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	if string(out) != string(want) {
		t.Errorf("stdout differs:\n got %q\nwant %q", out, want)
	}
	if !strings.Contains(stderr.String(), "without cgo") {
		t.Errorf("stderr does not say why WebGPU is off: %q", stderr.String())
	}
	out, err = exec.CommandContext(ctx, bin, "run", "--device", "webgpu", "--steps", "1", "--model", model).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "without cgo") {
		t.Errorf("--device webgpu: err %v, output %q: want a failure naming cgo", err, out)
	}
}
