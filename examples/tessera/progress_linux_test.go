package main

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestIsTerminal: a pseudo-terminal is a terminal; a pipe and a file are
// not.
func TestIsTerminal(t *testing.T) {
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	defer ptm.Close()
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlocking the pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("pty number: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the pty: %v", err)
	}
	defer pts.Close()
	if !isTerminal(pts) {
		t.Error("a pty is not a terminal")
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	f, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(w) || isTerminal(f) {
		t.Errorf("pipe a terminal: %v, file a terminal: %v", isTerminal(w), isTerminal(f))
	}
}
