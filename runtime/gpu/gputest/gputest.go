// Package gputest opens devices for tests, with one rule for machines that
// have no WebGPU adapter: skip the test during development, fail it in CI.
//
// A kernel test that silently skips in CI would let a broken driver setup
// pass as green, so when the environment variable CI is true (as CI systems
// set it) a missing adapter is a test failure.
package gputest

import (
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/tessera-llm/tessera/runtime/gpu/webgpu"
)

// Open opens the default device for the test and closes it at cleanup.
func Open(t testing.TB) webgpu.Device {
	t.Helper()
	return OpenWith(t, webgpu.Options{})
}

// OpenWith opens a device with opts for the test and closes it at cleanup.
func OpenWith(t testing.TB, opts webgpu.Options) webgpu.Device {
	t.Helper()
	d, err := webgpu.Open(opts)
	if err != nil {
		NoDevice(t, err)
	}
	t.Cleanup(d.Close)
	return d
}

// Adapters lists the adapters, or skips or fails the test like Open.
func Adapters(t testing.TB) []webgpu.Info {
	t.Helper()
	infos, err := webgpu.Adapters()
	if err != nil {
		NoDevice(t, err)
	}
	return infos
}

// NoDevice ends a test that could not get a device because of err: it skips
// when there is no adapter (or no implementation on this platform) and CI is
// not set, and fails otherwise. It never returns.
func NoDevice(t testing.TB, err error) {
	t.Helper()
	missing := errors.Is(err, webgpu.ErrNoAdapter) || errors.Is(err, webgpu.ErrNotImplemented)
	switch {
	case missing && InCI():
		t.Fatalf("no GPU device, which fails the test because CI is set: %v", err)
	case missing:
		t.Skipf("no GPU device (with CI=true this fails): %v", err)
	}
	t.Fatalf("opening a GPU device: %v", err)
}

// InCI reports whether the CI environment variable is set to a true value.
func InCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}
