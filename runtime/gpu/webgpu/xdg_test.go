//go:build linux || freebsd

package webgpu_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/runtime/gpu/gputest"
	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// xdgChild names the environment variable that makes TestRuntimeDirUnset
// its own child process: one that only opens a device.
const xdgChild = "TESSERA_TEST_XDG_CHILD"

// TestRuntimeDirUnset: opening a device with XDG_RUNTIME_DIR unset (as
// outside a login session: CI, containers, cron) sets it to a private
// directory, so that Mesa's Wayland code in lavapipe does not print
// "XDG_RUNTIME_DIR is invalid or not set" for every adapter it probes. A
// child process shows the message is gone from stderr.
func TestRuntimeDirUnset(t *testing.T) {
	if os.Getenv(xdgChild) != "" {
		openChild(t)
		return
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	os.Unsetenv("XDG_RUNTIME_DIR")
	gputest.Open(t)
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir == "" || !filepath.IsAbs(dir) {
		t.Errorf("XDG_RUNTIME_DIR is %q after opening a device", dir)
	} else if st, err := os.Lstat(dir); err != nil {
		t.Error(err)
	} else if !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %v, want a directory with 0700", dir, st.Mode())
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestRuntimeDirUnset$", "-test.v")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, xdgChild+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String() + stderr.String()
	if !strings.Contains(out, "opened") {
		t.Fatalf("the child opened no device:\n%s", out)
	}
	if strings.Contains(out, "XDG_RUNTIME_DIR") {
		t.Errorf("the child's output mentions XDG_RUNTIME_DIR:\n%s", out)
	}
}

// openChild is TestRuntimeDirUnset's child process: it opens a device
// with XDG_RUNTIME_DIR unset, for the parent to read its output.
func openChild(t *testing.T) {
	d, err := webgpu.Open(webgpu.Options{})
	if err != nil {
		gputest.NoDevice(t, err)
	}
	d.Close()
	t.Log("opened")
}

// TestRuntimeDirKept: a set XDG_RUNTIME_DIR is left alone.
func TestRuntimeDirKept(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	gputest.Open(t)
	if got := os.Getenv("XDG_RUNTIME_DIR"); got != dir {
		t.Errorf("XDG_RUNTIME_DIR changed from %q to %q", dir, got)
	}
}
